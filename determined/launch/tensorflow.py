"""`python3 -m determined.launch.tensorflow [--port P] [--] SCRIPT...`

Runs SCRIPT once on each machine of the trial, for `tf.distribute`. On one machine the script runs as it is
(`MirroredStrategy` uses its GPUs). On several, each gets

    TF_CONFIG={"cluster": {"worker": ["<machine 0>:<port>", ...]}, "task": {"type": "worker", "index": <its rank>}}

for `MultiWorkerMirroredStrategy`, where the port is --port, else $C10D_PORT, else 29400, and its output lines
are prefixed `[rank=N] `. DET_CHIEF_IP is the first machine's address; RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, DET_CROSS_RANK and DET_CROSS_SIZE count machines, so that `det.core.init()` connects them.
"""
import argparse
import json
import os
import sys
from typing import Dict, List, Optional

from determined.core._info import ClusterInfo
from determined.exec import _script
from determined.launch import cluster_info_or_exit, fail, run_workers, setup_logging

DEFAULT_PORT = 29400


def tf_config(info: ClusterInfo, port: int) -> Dict[str, object]:
    """The TF_CONFIG of this machine's worker in a run over several machines."""
    return {"cluster": {"worker": [f"{addr}:{port}" for addr in info.container_addrs]},
            "task": {"type": "worker", "index": info.container_rank}}


def worker_environment(info: ClusterInfo, port: int, base: Dict[str, str]) -> Dict[str, str]:
    env = dict(base)
    env["DET_CHIEF_IP"] = info.container_addrs[0]
    machines = len(info.container_addrs)
    if machines > 1:
        env["TF_CONFIG"] = json.dumps(tf_config(info, port))
        env.update({"RANK": str(info.container_rank), "WORLD_SIZE": str(machines), "LOCAL_RANK": "0",
                    "LOCAL_WORLD_SIZE": "1", "DET_CROSS_RANK": str(info.container_rank),
                    "DET_CROSS_SIZE": str(machines)})
    return env


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m determined.launch.tensorflow",
                                     usage="%(prog)s [--port PORT] [--] SCRIPT...",
                                     description="Run a tf.distribute script once per machine of the trial.")
    parser.add_argument("--port", type=int, help="the port of each worker (default: $C10D_PORT, else 29400)")
    parser.add_argument("script", nargs=argparse.REMAINDER, metavar="SCRIPT...")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    setup_logging()
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    if not script:
        fail("give the script to run, e.g. `python3 -m determined.launch.tensorflow -- python3 train.py`")
    env_port = os.environ.get("C10D_PORT", "").strip()
    port = args.port or (int(env_port) if env_port.isdigit() else DEFAULT_PORT)
    info = cluster_info_or_exit("determined.launch.tensorflow")
    env = worker_environment(info, port, dict(os.environ))
    command = _script.command_argv(script)
    if len(info.container_addrs) == 1:
        try:
            os.execvpe(command[0], command, env)
        except OSError as e:
            fail(f"cannot start {command[0]!r}: {e.strerror or e}")
    return run_workers(command, [env], info.container_rank)


if __name__ == "__main__":
    sys.exit(main())
