"""The keeper of one interactive task: a small process that starts the task and outlives the master.

The runner (tasks/runner.py) starts `python -m determined.master.tasks.keeper` in a session of its own, as the
master's user and outside any sandbox, and writes the task's spec as one JSON object on its stdin: `argv`, `env`,
`cwd`, the account (`user`, `group`, `extra_groups`, `umask`; null: the master's), `dir` (the keeper's own
directory, the master's only), `line_bytes` and `budget` (bytes kept per stream). The keeper then

1. starts the task's command in a session of its own that dies with the keeper (PR_SET_PDEATHSIG), and answers on
   its stdout one JSON line, `{"pid": N}` or `{"error": "..."}`, then closes it;
2. writes each line of the task's stdout and stderr to `stdout.log` / `stderr.log` in `dir` as `<unix time> <line>`
   (each line cut at `line_bytes`; past `budget` bytes per stream lines are counted, not written), which the
   master tails from offsets it stores with the lines (a restarted master neither loses nor repeats one);
3. forwards SIGTERM to the task's process group, and turns SIGUSR1 into SIGKILL of it (a signal the keeper
   itself cannot catch);
4. when the task ends, kills what it left in its session, writes `exit.json` (`exit_code`, `dropped` lines per
   stream; atomically) and exits.

Standard library only (and two stdlib-only modules of this package), so it starts in a tenth of a second.
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import IO, Any, Dict, List, Optional

from determined.common._process import die_with_parent
from determined.master.rm.log_lines import capped_lines

STREAMS = ("stdout", "stderr")
EXIT_FILE = "exit.json"
SELF_FILE = "keeper.json"  # the keeper's pid and start time, its task's pid: what a master finds without a record
MAX_SPEC_BYTES = 16 * 2**20


def log_path(keeper_dir: str, stream: str) -> str:
    return os.path.join(keeper_dir, f"{stream}.log")


def read_exit(keeper_dir: str) -> Optional[Dict[str, Any]]:
    """What the keeper wrote when its task ended, or None (it still runs, or it was killed first)."""
    try:
        with open(os.path.join(keeper_dir, EXIT_FILE)) as f:
            found = json.load(f)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _write_exit(keeper_dir: str, exit_code: Optional[int], dropped: Dict[str, int], error: str = "") -> None:
    tmp = os.path.join(keeper_dir, EXIT_FILE + ".tmp")
    with open(tmp, "w") as f:
        json.dump({"exit_code": exit_code, "dropped": dropped, "error": error}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(keeper_dir, EXIT_FILE))


def _write_self(keeper_dir: str, task_pid: Optional[int]) -> None:
    tmp = os.path.join(keeper_dir, SELF_FILE + ".tmp")
    with open(tmp, "w") as f:
        json.dump({"pid": os.getpid(), "started": process_start(os.getpid()), "task_pid": task_pid}, f)
    os.replace(tmp, os.path.join(keeper_dir, SELF_FILE))


def _read_self(keeper_dir: str) -> Dict[str, Any]:
    try:
        with open(os.path.join(keeper_dir, SELF_FILE)) as f:
            found = json.load(f)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _copy(pipe: IO[bytes], path: str, line_bytes: int, budget: int, dropped: Dict[str, int], stream: str) -> None:
    """The lines of `pipe` into `path`, each written whole in one write, until `budget` bytes; the rest counted."""
    kept = 0
    with open(path, "ab", buffering=0) as out:
        for line in capped_lines(pipe, line_bytes):
            kept += len(line)
            if kept > budget:  # read on (the task must not block on a full pipe), not kept
                dropped[stream] += 1
                continue
            out.write(f"{time.time():.6f} {line}\n".encode("utf-8", errors="replace"))
    pipe.close()


def _kill_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _answer(message: Dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _detach_output(keeper_dir: str) -> None:
    """Our stdout/stderr (the master's pipe) now go to keeper.log: a dead master's pipe must not end us."""
    fd = os.open(os.path.join(keeper_dir, "keeper.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def run(spec: Dict[str, Any]) -> int:
    keeper_dir = str(spec["dir"])
    os.makedirs(keeper_dir, mode=0o700, exist_ok=True)
    _write_self(keeper_dir, None)
    argv: List[str] = [str(a) for a in spec["argv"]]
    kwargs: Dict[str, Any] = {}
    if spec.get("user") is not None:
        kwargs.update(user=int(spec["user"]), group=int(spec["group"]),
                      extra_groups=[int(g) for g in spec.get("extra_groups") or []])
    if spec.get("umask") is not None:
        kwargs["umask"] = int(spec["umask"])
    dropped = {stream: 0 for stream in STREAMS}
    try:
        child = subprocess.Popen(argv, cwd=str(spec["cwd"]), env={str(k): str(v) for k, v in spec["env"].items()},
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 start_new_session=True, preexec_fn=die_with_parent, **kwargs)
    except (OSError, ValueError, subprocess.SubprocessError) as e:
        _write_exit(keeper_dir, None, dropped, f"{e.__class__.__name__}: {e}")
        _answer({"error": f"{e.__class__.__name__}: {e}"})
        return 1
    _write_self(keeper_dir, child.pid)
    signal.signal(signal.SIGTERM, lambda *_: _kill_group(child.pid, signal.SIGTERM))
    signal.signal(signal.SIGUSR1, lambda *_: _kill_group(child.pid, signal.SIGKILL))
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    line_bytes, budget = int(spec["line_bytes"]), int(spec["budget"])
    copiers = [threading.Thread(target=_copy, args=(pipe, log_path(keeper_dir, stream), line_bytes, budget, dropped,
                                                    stream), daemon=True)
               for stream, pipe in zip(STREAMS, (child.stdout, child.stderr))]
    for copier in copiers:
        copier.start()
    _answer({"pid": child.pid})
    _detach_output(keeper_dir)
    code = child.wait()
    _kill_group(child.pid, signal.SIGKILL)  # what it left in its session
    for copier in copiers:
        copier.join(timeout=5.0)
    _write_exit(keeper_dir, code, dropped)
    return 0


# ------------------------------------------------------------ the master's side

def process_start(pid: int) -> Optional[int]:
    """When process `pid` started (clock ticks since boot, /proc/<pid>/stat field 22), or None when there is no
    such live process (a zombie counts as gone): with the pid, it names one process, never a later one that
    reused the pid."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if not fields or fields[0] in ("Z", "X"):
        return None
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


class KeeperHandle:
    """The master's handle on a task's keeper, Popen-like (`pid`, `poll()`, `wait()`), whether this master started
    it (`popen`) or found it again after a restart (`adopt`)."""

    def __init__(self, pid: int, started: int, keeper_dir: str,
                 popen: "Optional[subprocess.Popen[bytes]]" = None) -> None:
        self.pid = pid
        self.started = started
        self.dir = keeper_dir
        self.popen = popen

    @classmethod
    def adopt(cls, pid: Optional[int], started: Optional[int], keeper_dir: str) -> "Optional[KeeperHandle]":
        """The keeper recorded as (`pid`, `started`), when it still runs; else None."""
        if not pid or started is None or process_start(pid) != started:
            return None
        return cls(pid, started, keeper_dir)

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return process_start(self.pid) == self.started

    def poll(self) -> Optional[int]:
        """None while the keeper runs; then the task's exit code (-1 when the keeper ended before recording it)."""
        if self.alive():
            return None
        found = read_exit(self.dir)
        code = found.get("exit_code") if found else None
        return code if isinstance(code, int) else -1

    @property
    def returncode(self) -> Optional[int]:
        return self.poll()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait until the keeper ended (at most `timeout` s); whether it did."""
        if self.popen is not None:
            try:
                self.popen.wait(timeout)
                return True
            except subprocess.TimeoutExpired:
                return False
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            fd = os.pidfd_open(self.pid)
        except (OSError, AttributeError):
            fd = -1
        try:
            if fd >= 0 and self.alive():  # opened after the check of its start time: the same process
                import select

                select.select([fd], [], [], None if deadline is None else max(0.0, deadline - time.monotonic()))
                return not self.alive()
            while self.alive():
                if deadline is not None and time.monotonic() > deadline:
                    return False
                time.sleep(0.2)
            return True
        finally:
            if fd >= 0:
                os.close(fd)

    def signal(self, signum: int) -> None:
        """SIGTERM: the task gets SIGTERM; SIGKILL: the task's process group gets SIGKILL (through SIGUSR1)."""
        if not self.alive():
            return
        try:
            os.kill(self.pid, signal.SIGUSR1 if signum == signal.SIGKILL else signum)
        except (ProcessLookupError, PermissionError):
            pass

    def kill_keeper(self) -> None:
        """The keeper itself (it does not answer): its task dies with it."""
        if self.alive():
            try:
                os.kill(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def stop_unrecorded(keeper_dir: str) -> bool:
    """End the keeper of `keeper_dir` if one still runs there (a master that died between starting it and
    recording it), with its task, and remove the directory; whether one ran."""
    import shutil

    found = _read_self(keeper_dir)
    handle = KeeperHandle.adopt(found.get("pid"), found.get("started"), keeper_dir)
    if handle is not None:
        handle.signal(signal.SIGKILL)
        if not handle.wait(timeout=5.0):
            handle.kill_keeper()
    shutil.rmtree(keeper_dir, ignore_errors=True)
    return handle is not None


def kill_leftovers(keeper_dir: str, task_id: str) -> int:
    """After a keeper was killed (it could not end its task): SIGKILL what is left of the task's process group (a
    process its shell started outlives the shell), found by the task pid the keeper recorded and checked by the
    task id in the processes' environment, so a reused pid is never signalled. Returns how many were left."""
    task_pid = _read_self(keeper_dir).get("task_pid")
    if not isinstance(task_pid, int) or task_pid <= 1:
        return 0
    marker = f"DET_TASK_ID={task_id}".encode()
    left = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[2]) != task_pid:  # its process group
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker in f.read().split(b"\0"):
                    left += 1
        except (OSError, IndexError, ValueError):
            continue
    if left:
        _kill_group(task_pid, signal.SIGKILL)
    return left


def start(spec: Dict[str, Any], *, python: str = sys.executable, answer_timeout: float = 60.0) -> KeeperHandle:
    """Start a keeper for `spec` (see the module docstring) in a session of its own, and wait for its answer;
    raises RuntimeError with the reason when the task's command could not start."""
    import select

    import shutil

    shutil.rmtree(str(spec["dir"]), ignore_errors=True)  # a fresh one: nothing of an earlier start is tailed
    os.makedirs(str(spec["dir"]), mode=0o700)
    popen = subprocess.Popen([python, "-m", "determined.master.tasks.keeper"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    assert popen.stdin is not None and popen.stdout is not None
    try:
        popen.stdin.write(json.dumps(spec).encode())
        popen.stdin.close()
    except BrokenPipeError:
        pass
    ready, _, _ = select.select([popen.stdout], [], [], answer_timeout)
    line = popen.stdout.readline(1 << 20) if ready else b""
    popen.stdout.close()
    try:
        answer = json.loads(line)
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not isinstance(answer.get("pid"), int):
        if popen.poll() is None:
            popen.kill()
        popen.wait()
        why = answer.get("error") if isinstance(answer, dict) else None
        raise RuntimeError(str(why or f"its keeper process did not answer: {line[:500].decode(errors='replace')!r}"))
    started = process_start(popen.pid)
    return KeeperHandle(popen.pid, started if started is not None else -1, str(spec["dir"]), popen)


def main() -> int:
    raw = sys.stdin.buffer.read(MAX_SPEC_BYTES + 1)
    try:
        spec = json.loads(raw)
        if len(raw) > MAX_SPEC_BYTES or not isinstance(spec, dict):
            raise ValueError("expected one JSON object")
    except ValueError as e:
        _answer({"error": f"the keeper's spec on stdin is not valid: {e}"})
        return 2
    return run(spec)


if __name__ == "__main__":
    sys.exit(main())
