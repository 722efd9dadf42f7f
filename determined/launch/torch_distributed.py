"""`python3 -m determined.launch.torch_distributed [TORCH_OVERRIDES... --] (SCRIPT... | --trial module:Class)`

Starts one worker of SCRIPT per slot of this machine's part of the trial, with the environment `torchrun`
gives its workers (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_*,
MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*), plus USE_TORCH_DISTRIBUTED=True, DET_CHIEF_IP (the first machine's
address) and DET_CHIEF_PORT, so that `torch.distributed.init_process_group()` and `det.core` find each other.
Every worker sees every GPU of the machine and picks `cuda:LOCAL_RANK`, as under torchrun. A trial over
several machines runs this launcher on each; ranks follow the machines' order and slot counts.

Each line a worker prints is prefixed `[rank=N] `. When a worker fails, the others are killed at once and the
launcher exits with its status (the trial restarts from its latest checkpoint); SIGTERM, SIGINT, SIGHUP and
SIGUSR1/2 are passed on to every worker.

TORCH_OVERRIDES are torchrun's options that make sense here: --nproc_per_node (fewer workers than slots),
--master_addr, --master_port, --max_restarts 0; --nnodes and --node_rank must agree with the trial's machines.
`--trial module:Class` runs a Trial class (deprecated by Determined 0.38 in favour of a script that uses
`det.pytorch.Trainer`) with one harness worker per slot.
"""
import argparse
import os
import sys
from typing import Dict, List, Optional, Tuple

from determined.core._info import ClusterInfo
from determined.exec.launch import free_port, worker_envs
from determined.launch import cluster_info_or_exit, fail, run_workers, setup_logging, split_overrides, worker_command

C10D_PORT_DEFAULT = 29400  # Determined's torch rendezvous port when the resource manager names none
CHIEF_PORT_DEFAULT = 12360  # and its port of the chief's collectives


def _override_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="determined.launch.torch_distributed TORCH_OVERRIDES", add_help=False,
                                     allow_abbrev=False)
    for name, kind in (("nproc_per_node", int), ("nnodes", str), ("node_rank", int), ("master_addr", str),
                       ("master_port", int), ("max_restarts", int), ("monitor_interval", float),
                       ("start_method", str)):
        parser.add_argument(f"--{name}", f"--{name.replace('_', '-')}", dest=name, type=kind)
    parser.add_argument("--standalone", action="store_true")
    return parser


def parse_args(args: List[str]) -> Tuple[argparse.Namespace, List[str]]:
    """(torchrun overrides, the command of each worker)."""
    override_args, rest = split_overrides(args)
    parser = argparse.ArgumentParser(
        prog="python3 -m determined.launch.torch_distributed",
        usage="%(prog)s [[TORCH_OVERRIDES...] --] (--trial TRIAL | SCRIPT...)",
        description="Run a script (or a Trial class) under torch.distributed, one worker per slot.")
    parser.add_argument("--trial", help="(deprecated) a Trial class module:Class instead of a script")
    parser.add_argument("script", nargs=argparse.REMAINDER, metavar="SCRIPT...")
    parsed = parser.parse_args(rest)
    overrides, unknown = _override_parser().parse_known_args(override_args)
    if unknown:
        fail(f"unsupported torchrun option(s) {' '.join(unknown)}: the trial's machines and slots set the "
             "others; use --nproc_per_node, --master_addr, --master_port or --max_restarts 0")
    if overrides.max_restarts not in (None, 0):
        fail("--max_restarts: workers are not restarted one by one here; the trial restarts from its latest "
             "checkpoint (max_restarts in the experiment config)")
    return overrides, worker_command(parsed.trial, parsed.script, "determined.launch.torch_distributed")


def _check_topology(overrides: argparse.Namespace, info: ClusterInfo) -> None:
    machines = len(info.container_addrs)
    if overrides.nnodes is not None and overrides.nnodes not in (str(machines), f"{machines}:{machines}"):
        fail(f"--nnodes {overrides.nnodes}: this trial runs on {machines} machine(s)")
    if overrides.node_rank is not None and overrides.node_rank != info.container_rank:
        fail(f"--node_rank {overrides.node_rank}: this is machine {info.container_rank} of the trial")


def worker_environments(info: ClusterInfo, overrides: argparse.Namespace,
                        base: Dict[str, str]) -> List[Dict[str, str]]:
    """The environment of each worker on this machine (local rank order)."""
    counts = list(info.container_slot_counts) or [len(info.slot_ids)]
    nproc = overrides.nproc_per_node or len(info.slot_ids) or 1
    if overrides.nproc_per_node is not None and len(counts) > 1:
        counts = [overrides.nproc_per_node] * len(counts)
    node_rank = info.container_rank
    machines = len(info.container_addrs)
    chief_ip = info.container_addrs[0]
    master_addr = overrides.master_addr or ("127.0.0.1" if machines == 1 else chief_ip)
    master_port = overrides.master_port or _env_port("C10D_PORT") or (
        free_port() if machines == 1 else C10D_PORT_DEFAULT)
    chief_port = _env_port("DET_CHIEF_PORT") or (free_port() if machines == 1 else CHIEF_PORT_DEFAULT)
    while chief_port == master_port:
        chief_port = free_port()
    base = dict(base, USE_TORCH_DISTRIBUTED="True")
    envs = worker_envs(nproc, base, cross_rank=node_rank, cross_size=machines, master_addr=master_addr,
                       master_port=master_port, chief_port=chief_port, first_rank=sum(counts[:node_rank]),
                       world_size=sum(counts), one_gpu_each=False)
    for env in envs:
        env.update({
            "DET_CHIEF_IP": chief_ip if machines > 1 else "127.0.0.1",
            "ROLE_NAME": "default",
            "ROLE_RANK": env["RANK"],
            "ROLE_WORLD_SIZE": env["WORLD_SIZE"],
            "TORCHELASTIC_RESTART_COUNT": "0",
            "TORCHELASTIC_MAX_RESTARTS": "0",
            "TORCHELASTIC_RUN_ID": info.allocation_id or "none",
            "TORCHELASTIC_USE_AGENT_STORE": "False",
        })
    return envs


def _env_port(name: str) -> Optional[int]:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw.isdigit() and 0 < int(raw) < 65536 else None


def main(argv: Optional[List[str]] = None) -> int:
    overrides, command = parse_args(list(sys.argv[1:] if argv is None else argv))
    setup_logging()
    info = cluster_info_or_exit("determined.launch.torch_distributed")
    _check_topology(overrides, info)
    try:
        envs = worker_environments(info, overrides, dict(os.environ))
    except ValueError as e:
        fail(str(e))
    return run_workers(command, envs, int(envs[0]["RANK"]))


if __name__ == "__main__":
    sys.exit(main())
