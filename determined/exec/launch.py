"""`python -m determined.exec.launch`: start the N worker processes of one trial on this machine.

    python -m determined.exec.launch --nproc-per-node 2 -- python -m determined.exec.harness
    python -m determined.exec.launch --nproc-per-node 2 train.py --epochs 3

Each worker gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK / DET_CROSS_RANK,
GROUP_WORLD_SIZE / DET_CROSS_SIZE (machines), MASTER_ADDR / MASTER_PORT (rendezvous of torch.distributed),
DET_CHIEF_IP / DET_CHIEF_PORT (the framework-free collectives of `determined.core`), its own
CUDA_VISIBLE_DEVICES entry (empty on CPU slots) and an equal share of OMP_NUM_THREADS. Its output is relayed
with a `[rank N]` prefix, line by line (a line ends at a newline or a carriage return).

The launchers of scripts (`determined.launch.torch_distributed`, ...) use the same `worker_envs` and `Workers`.

When a worker exits non-zero (or is killed), the others are killed within a second and the launcher exits
with that worker's status, so the master restarts the trial from its latest checkpoint. SIGTERM is passed
on to every worker (the chief decides when to stop and tells the others). The exit status is 0 when every
worker exited 0.
"""
import argparse
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import IO, Dict, Iterator, List, Optional, Sequence

from determined.common._process import die_with_parent

logger = logging.getLogger("determined.launch")

POLL_S = 0.1
# After the chief exited 0, how long the other ranks may take to exit before they are killed.
WORKER_EXIT_GRACE_S = 60.0


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the kernel's choice of an ephemeral port)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def worker_envs(
    nproc: int,
    base_env: Dict[str, str],
    *,
    cross_rank: int = 0,
    cross_size: int = 1,
    master_addr: str = "127.0.0.1",
    master_port: Optional[int] = None,
    chief_port: Optional[int] = None,
    first_rank: Optional[int] = None,
    world_size: Optional[int] = None,
    one_gpu_each: bool = True,
) -> List[Dict[str, str]]:
    """The environment of each of the `nproc` local workers (local rank order).

    Ranks are `cross_rank * nproc + local_rank` of `cross_size * nproc`, unless `first_rank` and `world_size`
    say otherwise (machines with different numbers of workers). With `one_gpu_each` false every worker sees
    all of CUDA_VISIBLE_DEVICES and picks its GPU by LOCAL_RANK (as under torchrun).
    """
    if nproc < 1:
        raise ValueError(f"--nproc-per-node must be >= 1, got {nproc}")
    if not 0 <= cross_rank < cross_size:
        raise ValueError(f"the machine rank {cross_rank} is not in [0, {cross_size})")
    first_rank = cross_rank * nproc if first_rank is None else first_rank
    world_size = cross_size * nproc if world_size is None else world_size
    if first_rank < 0 or first_rank + nproc > world_size:
        raise ValueError(f"ranks {first_rank}..{first_rank + nproc - 1} do not fit in a world of {world_size}")
    master_port = master_port or free_port()
    chief_port = chief_port or free_port()
    while chief_port == master_port:
        chief_port = free_port()
    visible = base_env.get("CUDA_VISIBLE_DEVICES")
    gpus = [g.strip() for g in visible.split(",") if g.strip()] if visible else []
    if gpus and len(gpus) < nproc and one_gpu_each:
        raise ValueError(
            f"CUDA_VISIBLE_DEVICES={visible!r} names {len(gpus)} GPU(s) for {nproc} workers; give one GPU per worker"
        )
    total_threads = _int(base_env.get("OMP_NUM_THREADS")) or (os.cpu_count() or 1)
    threads = max(1, total_threads // nproc)
    envs = []
    for local_rank in range(nproc):
        env = dict(base_env)
        env.update({
            "RANK": str(first_rank + local_rank),
            "LOCAL_RANK": str(local_rank),
            "WORLD_SIZE": str(world_size),
            "LOCAL_WORLD_SIZE": str(nproc),
            "GROUP_RANK": str(cross_rank),
            "GROUP_WORLD_SIZE": str(cross_size),
            "DET_CROSS_RANK": str(cross_rank),
            "DET_CROSS_SIZE": str(cross_size),
            "MASTER_ADDR": master_addr,
            "MASTER_PORT": str(master_port),
            "DET_CHIEF_IP": master_addr,
            "DET_CHIEF_PORT": str(chief_port),
            "OMP_NUM_THREADS": str(threads),
            "PYTHONUNBUFFERED": "1",
        })
        if visible is not None and one_gpu_each:  # else every worker sees every GPU and picks cuda:LOCAL_RANK
            env["CUDA_VISIBLE_DEVICES"] = gpus[local_rank] if gpus else ""
        envs.append(env)
    return envs


def _int(raw: Optional[str]) -> int:
    try:
        return int(raw or 0)
    except ValueError:
        return 0


MAX_LINE_BYTES = 8191  # a longer line is cut into pieces of this size (each one prefixed)
_LINE_END = re.compile(rb"\r\n|[\r\n]")


def read_lines(pipe: IO[bytes]) -> Iterator[bytes]:
    """The lines of `pipe`, each ending with a newline.

    A line ends at a newline, a carriage return (progress bars redraw a line with one) or both; the empty
    line a carriage return would make at the start of a redraw is left out, and a line longer than
    MAX_LINE_BYTES is cut.
    """
    pending = b""
    eof = False
    after_return = False
    while not eof:
        chunk = pipe.read1(65536) if hasattr(pipe, "read1") else pipe.read(65536)
        eof = not chunk
        pending += chunk
        while pending:
            match = _LINE_END.search(pending, 0, MAX_LINE_BYTES + 1)
            if match is not None and match.group() == b"\r" and match.end() == len(pending) and not eof:
                break  # a newline may follow in the next read
            if match is None:
                if len(pending) < MAX_LINE_BYTES and not eof:
                    break
                line, pending = pending[:MAX_LINE_BYTES], pending[MAX_LINE_BYTES:]
                after_return = False
            else:
                line, pending = pending[:match.start()], pending[match.end():]
                redraw = match.group() == b"\r"
                if not line and (redraw or after_return):
                    after_return = redraw
                    continue
                after_return = redraw
            yield line + b"\n"


def relay_lines(prefix: bytes, pipe: IO[bytes], out: IO[bytes]) -> None:
    """Copy `pipe` to `out` line by line, each line prefixed, until the pipe closes."""
    for line in read_lines(pipe):
        out.write(prefix + line)
        out.flush()
    pipe.close()


def _relay(prefix: bytes, pipe: IO[bytes], out: IO[bytes]) -> threading.Thread:
    thread = threading.Thread(target=relay_lines, args=(prefix, pipe, out), daemon=True)
    thread.start()
    return thread


def _exit_status(code: int) -> int:
    return 128 - code if code < 0 else code


class Workers:
    """The worker processes of one trial on this machine, watched until they all exit.

    Each worker's output is relayed with `prefix` (formatted with its `rank`). With `own_sessions` every
    worker leads its own process group (signals for them are passed on by `signal_all`, to their groups).
    """

    def __init__(self, command: Sequence[str], envs: List[Dict[str, str]], first_rank: int = 0, *,
                 prefix: str = "[rank {rank}] ", own_sessions: bool = False) -> None:
        self.procs: List["subprocess.Popen[bytes]"] = []
        self.relays: List[threading.Thread] = []
        # Local ranks in the order their processes ended (a thread per worker waits for it): when several have
        # failed by the time the launcher looks, the first to end is the cause, the others followed it.
        self._ended: List[int] = []
        self._ended_lock = threading.Lock()
        self.first_rank = first_rank
        self.own_sessions = own_sessions
        stdout, stderr = sys.stdout.buffer, sys.stderr.buffer
        try:
            for local_rank, env in enumerate(envs):
                proc = subprocess.Popen(
                    list(command), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, start_new_session=own_sessions,
                    preexec_fn=die_with_parent,
                )
                self.procs.append(proc)
                threading.Thread(target=self._note_end, args=(local_rank, proc), daemon=True).start()
                prefix_bytes = prefix.format(rank=first_rank + local_rank).encode()
                assert proc.stdout is not None and proc.stderr is not None
                self.relays += [_relay(prefix_bytes, proc.stdout, stdout), _relay(prefix_bytes, proc.stderr, stderr)]
        except BaseException:
            self.kill()
            raise

    def _note_end(self, local_rank: int, proc: "subprocess.Popen[bytes]") -> None:
        proc.wait()
        with self._ended_lock:
            self._ended.append(local_rank)

    def signal_all(self, signum: int) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    if self.own_sessions:
                        os.killpg(proc.pid, signum)
                    else:
                        proc.send_signal(signum)
                except (ProcessLookupError, PermissionError):
                    pass

    def kill(self) -> None:
        self.signal_all(signal.SIGKILL)
        for proc in self.procs:
            proc.wait()

    def wait(self, grace: float = WORKER_EXIT_GRACE_S) -> int:
        """Watch the workers; the exit status of the launcher."""
        chief_done_at: Optional[float] = None
        while True:
            codes = [proc.poll() for proc in self.procs]
            with self._ended_lock:
                order = {rank: position for position, rank in enumerate(self._ended)}
            failed = sorted(((i, c) for i, c in enumerate(codes) if c is not None and c != 0),
                            key=lambda failure: order.get(failure[0], len(order)))
            if failed:
                local_rank, code = failed[0]
                others = [i for i, c in enumerate(codes) if c is None]
                logger.error("rank %d exited with status %d; stopping rank(s) %s", self.first_rank + local_rank,
                             _exit_status(code), [self.first_rank + i for i in others])
                self.kill()
                self._join_relays()
                return _exit_status(code)
            if all(c == 0 for c in codes):
                self._join_relays()
                return 0
            if codes[0] == 0 and self.first_rank == 0:
                chief_done_at = chief_done_at or time.monotonic()
                if time.monotonic() - chief_done_at > grace:
                    lingering = [self.first_rank + i for i, c in enumerate(codes) if c is None]
                    logger.warning("the chief finished %.0f s ago but rank(s) %s still run; killing them",
                                   grace, lingering)
                    self.kill()
                    self._join_relays()
                    return 0
            time.sleep(POLL_S)

    def _join_relays(self) -> None:
        for thread in self.relays:
            thread.join(timeout=2.0)


def _command(args: List[str]) -> List[str]:
    if args and args[0] == "--":
        args = args[1:]
    if not args:
        raise SystemExit("launch: give the command to run, e.g. `-- python -m determined.exec.harness` or `train.py`")
    if args[0].endswith(".py"):
        return [sys.executable, *args]
    return args


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m determined.exec.launch",
        description="Run N processes of one data-parallel trial on this machine.",
    )
    parser.add_argument("--nproc-per-node", type=int,
                        default=_int(os.environ.get("DET_SLOTS_PER_NODE")) or 1,
                        help="processes (slots) on this machine (default: DET_SLOTS_PER_NODE or 1)")
    parser.add_argument("--node-rank", type=int, default=_int(os.environ.get("DET_CROSS_RANK")),
                        help="rank of this machine (multi-machine trials)")
    parser.add_argument("--nnodes", type=int, default=_int(os.environ.get("DET_CROSS_SIZE")) or 1,
                        help="number of machines of the trial")
    parser.add_argument("--master-addr", default=os.environ.get("MASTER_ADDR") or "127.0.0.1",
                        help="address of the chief's machine (rendezvous)")
    parser.add_argument("--master-port", type=int, default=_int(os.environ.get("MASTER_PORT")) or None)
    parser.add_argument("--chief-port", type=int, default=_int(os.environ.get("DET_CHIEF_PORT")) or None)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the program each process runs")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stdout)
    if args.nnodes > 1 and (args.master_port is None or args.chief_port is None):
        parser.error("a multi-machine trial needs --master-port and --chief-port (the same on every machine)")
    command = _command(args.command)
    try:
        envs = worker_envs(args.nproc_per_node, dict(os.environ), cross_rank=args.node_rank,
                           cross_size=args.nnodes, master_addr=args.master_addr, master_port=args.master_port,
                           chief_port=args.chief_port)
    except ValueError as e:
        parser.error(str(e))
    workers = Workers(command, envs, first_rank=args.node_rank * args.nproc_per_node)

    def forward(signum: int, frame: object) -> None:
        workers.signal_all(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    return workers.wait()


if __name__ == "__main__":
    sys.exit(main())
