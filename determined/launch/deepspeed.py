"""`python3 -m determined.launch.deepspeed (SCRIPT... | --trial module:Class)`

Starts one worker of SCRIPT per slot of this machine's part of the trial, with the environment DeepSpeed's
own launcher gives its workers (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_SIZE, CROSS_RANK, CROSS_SIZE, MASTER_ADDR,
MASTER_PORT) plus torchrun's names, USE_DEEPSPEED=1 and DET_CHIEF_IP, so that `deepspeed.init_distributed()`
and `det.core` find each other (`core.DistributedContext.from_deepspeed()` reads them). DeepSpeed trains on
CPU slots too (its CPU accelerator, with gloo). A trial over several machines runs this launcher on each
machine instead of DeepSpeed's ssh-based multi-node launch. Output lines are prefixed `[rank=N] `; a failing
worker takes the others down at once.

The script's interpreter must have the `deepspeed` package (`pip install deepspeed`).
"""
import argparse
import importlib.util
import os
import sys
from typing import Dict, List, Optional

from determined.core._info import ClusterInfo
from determined.launch import cluster_info_or_exit, fail, run_workers, setup_logging, torch_distributed, worker_command



def parse_args(args: List[str]) -> List[str]:
    """The command of each worker."""
    parser = argparse.ArgumentParser(prog="python3 -m determined.launch.deepspeed",
                                     usage="%(prog)s (--trial TRIAL | SCRIPT...)",
                                     description="Run a DeepSpeed script (or a Trial class), one worker per slot.")
    parser.add_argument("--trial", help="(deprecated) a Trial class module:Class instead of a script")
    parser.add_argument("script", nargs=argparse.REMAINDER, metavar="SCRIPT...")
    parsed = parser.parse_args(args[1:] if args[:1] == ["--"] else args)
    return worker_command(parsed.trial, parsed.script, "determined.launch.deepspeed")


def worker_environments(info: ClusterInfo, base: Dict[str, str]) -> List[Dict[str, str]]:
    envs = torch_distributed.worker_environments(info, argparse.Namespace(
        nproc_per_node=None, master_addr=None, master_port=None), base)
    for env in envs:
        env.pop("USE_TORCH_DISTRIBUTED", None)
        env.update({"USE_DEEPSPEED": "1", "LOCAL_SIZE": env["LOCAL_WORLD_SIZE"], "CROSS_RANK": env["GROUP_RANK"],
                    "CROSS_SIZE": env["GROUP_WORLD_SIZE"]})
    return envs


def main(argv: Optional[List[str]] = None) -> int:
    command = parse_args(list(sys.argv[1:] if argv is None else argv))
    setup_logging()
    if importlib.util.find_spec("deepspeed") is None:
        fail(f"determined.launch.deepspeed: the trial's interpreter ({sys.executable}) has no deepspeed package; "
             "add `pip install deepspeed` to the model directory's startup-hook.sh, or install it where trials run")
    info = cluster_info_or_exit("determined.launch.deepspeed")
    try:
        envs = worker_environments(info, dict(os.environ))
    except ValueError as e:
        fail(str(e))
    return run_workers(command, envs, int(envs[0]["RANK"]))


if __name__ == "__main__":
    sys.exit(main())
