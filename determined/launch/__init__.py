"""`python3 -m determined.launch.<launcher> ... SCRIPT...`: turn one slot allocation into the workers of a script.

A script entrypoint (`entrypoint: python3 -m determined.launch.torch_distributed python3 train.py`) runs once
per machine of the trial's run (a "container", with that machine's slots); its launcher starts the script's
workers there with the environment their framework expects, relays their output with a `[rank=N] ` prefix,
and exits with the first failure's status, stopping the other workers at once, so that the trial restarts
from its latest checkpoint:

* `torch_distributed`: one worker per slot, with the environment torchrun gives (RANK, LOCAL_RANK, ...);
* `tensorflow`: one worker per machine, with TF_CONFIG when there are several;
* `deepspeed`, `horovod`: not available here (a clear error, and what to use instead);
* `wrap_rank`: prefix a command's output lines with its rank.

The workers are started by the multi-slot machinery of `determined.exec.launch`.
"""
import logging
import sys
from typing import List, NoReturn

from determined.core._info import ClusterInfo, get_cluster_info


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


def split_overrides(args: List[str]) -> "tuple[List[str], List[str]]":
    """`[OVERRIDES... --] SCRIPT...`: the launcher's own options before a `--`, and the rest."""
    if "--" in args:
        at = args.index("--")
        return args[:at], args[at + 1:]
    return [], args


__all__ = ["cluster_info_or_exit", "fail", "setup_logging", "split_overrides"]
