"""`python3 -m determined.launch.tensorflow [--port P] [--] SCRIPT...`

Runs SCRIPT once on each machine of the trial, for `tf.distribute`. On one machine the script runs as it is
(`MirroredStrategy` uses its GPUs), except on CPU slots: a trial with several CPU slots (no GPUs) runs one worker
per slot, each with TF_CONFIG, for `MultiWorkerMirroredStrategy`. On several machines, each gets

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


def cpu_worker_environments(info: ClusterInfo, port: Optional[int], base: Dict[str, str]) -> List[Dict[str, str]]:
    """One worker per CPU slot of this machine: TF_CONFIG over every slot of the run (each machine's workers on
    consecutive ports from `port`, else on free ports of this machine when the run has one), and the ranks and
    chief port that `DistributedContext.from_tf_config()` connects."""
    from determined.exec.launch import free_port

    counts = list(info.container_slot_counts) or [len(info.slot_ids)]
    if len(counts) == 1 and port is None:
        ports = [[free_port() for _ in range(counts[0])]]
        chief_port = free_port()
    else:
        start = port or DEFAULT_PORT
        ports = [[start + i for i in range(n)] for n in counts]
        chief_port = start + max(counts)
    workers = [f"{addr}:{p}" for addr, machine in zip(info.container_addrs, ports) for p in machine]
    first = sum(counts[:info.container_rank])
    envs = []
    for local in range(counts[info.container_rank]):
        env = dict(base)
        rank = first + local
        env.update({"TF_CONFIG": json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": rank}}),
                    "DET_CHIEF_IP": info.container_addrs[0], "DET_CHIEF_PORT": str(chief_port), "RANK": str(rank),
                    "WORLD_SIZE": str(len(workers)), "LOCAL_RANK": str(local), "LOCAL_WORLD_SIZE": str(counts[
                        info.container_rank]), "DET_CROSS_RANK": str(info.container_rank),
                    "DET_CROSS_SIZE": str(len(counts)), "PYTHONUNBUFFERED": "1"})
        envs.append(env)
    return envs


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
    given_port = args.port or (int(env_port) if env_port.isdigit() else None)
    port = given_port or DEFAULT_PORT
    info = cluster_info_or_exit("determined.launch.tensorflow")
    command = _script.command_argv(script)
    cpu_slots = not os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if cpu_slots and sum(info.container_slot_counts or [len(info.slot_ids)]) > 1:
        first = sum(info.container_slot_counts[:info.container_rank])
        return run_workers(command, cpu_worker_environments(info, given_port, dict(os.environ)), first)
    env = worker_environment(info, port, dict(os.environ))
    if len(info.container_addrs) == 1:
        try:
            os.execvpe(command[0], command, env)
        except OSError as e:
            fail(f"cannot start {command[0]!r}: {e.strerror or e}")
    return run_workers(command, [env], info.container_rank)


if __name__ == "__main__":
    sys.exit(main())
