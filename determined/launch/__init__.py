"""`python3 -m determined.launch.<launcher> ... SCRIPT...`: turn one slot allocation into the workers of a script.

A script entrypoint (`entrypoint: python3 -m determined.launch.torch_distributed python3 train.py`) runs once
per machine of the trial's run (a "container", with that machine's slots); its launcher starts the script's
workers there with the environment their framework expects, relays their output with a `[rank=N] ` prefix,
and exits with the first failure's status, stopping the other workers at once, so that the trial restarts
from its latest checkpoint:

* `torch_distributed`: one worker per slot, with the environment torchrun gives (RANK, LOCAL_RANK, ...);
* `tensorflow`: one worker per machine (per CPU slot when there are no GPUs), with TF_CONFIG when there are several;
* `deepspeed`: one worker per slot, with the environment DeepSpeed's launcher gives (needs `pip install deepspeed`);
* `horovod`: not available here (a clear error, and what to use instead);
* `wrap_rank`: prefix a command's output lines with its rank.

The workers are started by the multi-slot machinery of `determined.exec.launch`.
"""
import logging
import signal
import sys
from typing import Dict, List, NoReturn, Sequence

from determined.core._info import ClusterInfo, get_cluster_info
from determined.exec.launch import Workers

RANK_PREFIX = "[rank={rank}] "
# Signals passed on to the workers (each leads its own process group, so each gets a signal once).
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


def cluster_info_or_exit(launcher: str) -> ClusterInfo:
    """The trial's ClusterInfo; outside a trial, a clear message and exit status 1."""
    info = get_cluster_info()
    if info is None:
        fail(f"{launcher} runs inside a trial (as an experiment's entrypoint), where DET_MASTER and DET_TRIAL_ID "
             "are set; to run the script on this machine without the platform, start it directly (torchrun for "
             "several processes)")
    return info


def setup_logging() -> None:
    """The launcher's own lines (a worker that failed, ...) in Determined's log format, on stderr."""
    from determined import LOG_FORMAT

    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)


def fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(1)


def worker_command(trial: "str | None", script: List[str], launcher: str) -> List[str]:
    """What each worker runs: the script (`python3` is this interpreter), or with `--trial module:Class` a harness
    that runs the Trial class in the model directory."""
    if trial is not None:
        if script:
            fail(f"--trial {trial} takes no script, got {' '.join(script)}")
        return [sys.executable, "-m", "determined.exec.harness", trial]
    if not script:
        fail(f"give the script each worker runs, e.g. `python3 -m {launcher} python3 train.py`")
    from determined.exec import _script

    return _script.command_argv(script)


def run_workers(command: Sequence[str], envs: List[Dict[str, str]], first_rank: int) -> int:
    """Start a worker of `command` per environment, relay their lines with their ranks, pass signals on, and
    wait: the first failure's status (the others are killed at once), or 0."""
    workers = Workers(command, envs, first_rank=first_rank, prefix=RANK_PREFIX, own_sessions=True)
    for signum in FORWARDED:
        signal.signal(signum, lambda signum, frame: workers.signal_all(signum))
    return workers.wait()


def split_overrides(args: List[str]) -> "tuple[List[str], List[str]]":
    """`[OVERRIDES... --] SCRIPT...`: the launcher's own options before a `--`, and the rest."""
    if "--" in args:
        at = args.index("--")
        return args[:at], args[at + 1:]
    return [], args


__all__ = ["cluster_info_or_exit", "fail", "run_workers", "setup_logging", "split_overrides", "worker_command"]
