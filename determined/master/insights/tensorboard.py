"""TensorBoard instances on experiments' event files: started as local processes on 127.0.0.1, listed, killed.

An instance is recorded as `<state dir>/<id>.json` (`{"id", "pid", "port", "url", "experiment_ids", "logdir",
"start_time"}`) with its output in `<id>.log`; the state dir is `<data dir>/tensorboards`. The event files are
those trials write (determined/core/_tensorboard.py); `fill_event_files` writes the missing ones from the
master's metrics, through the same REST API as every client.
"""
import contextlib
import dataclasses
import datetime
import importlib.util
import json
import os
import pathlib
import secrets
import signal
import socket
import subprocess
import sys
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence

import httpx

from determined import errors
from determined.common import tfevents as events

STATE_DIR = "tensorboards"
INSTALL_HINT = "pip install determined-revived[tensorboard]"


@dataclasses.dataclass
class TensorBoardInstance:
    id: str
    pid: int
    port: int
    url: str
    experiment_ids: List[int]
    logdir: str
    start_time: str

    def to_json(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


def require_tensorboard() -> None:
    """Raise a DeterminedError saying how to install TensorBoard when it is missing."""
    if importlib.util.find_spec("tensorboard") is None:
        raise errors.DeterminedError(f"TensorBoard is not installed in this environment; install it with `{INSTALL_HINT}`")


# ---------------------------------------------------------------- event files


def delete_event_files(master_data_dir: pathlib.Path, experiment_id: int) -> bool:
    """Remove the event files of an experiment's trials (`<data dir>/tensorboard/experiment_<E>`; Determined 0.38's
    DeleteTensorboardFiles); True when there were some. `det tensorboard start` writes them again from the
    master's metrics, and running trials go on writing theirs."""
    import shutil

    folder = events.experiment_dir(pathlib.Path(master_data_dir) / events.TENSORBOARD_DIR, experiment_id)
    if not folder.is_dir():
        return False
    shutil.rmtree(folder)
    return True



def event_root(master_data_dir: Optional[str], local_data_dir: pathlib.Path, master_url: str) -> pathlib.Path:
    """Where the event files of a master's trials are: `<its data dir>/tensorboard` when that dir is on this
    machine, else a cache under the local data dir (filled from the master's metrics)."""
    if master_data_dir and pathlib.Path(master_data_dir).is_dir():
        return pathlib.Path(master_data_dir) / events.TENSORBOARD_DIR
    name = "".join(c if c.isalnum() else "_" for c in master_url)
    return local_data_dir / "tensorboard-cache" / name


def _to_epoch(iso: Optional[str]) -> Optional[float]:
    if not iso:
        return None
    try:
        value = datetime.datetime.fromisoformat(iso.rstrip("Z"))
    except ValueError:
        return None
    return value.replace(tzinfo=datetime.timezone.utc).timestamp()


def write_trial_events(directory: pathlib.Path, trial: Mapping[str, Any],
                       groups: Optional[Mapping[str, Sequence[Mapping[str, Any]]]] = None) -> int:
    """Write a `GET /trials/{id}` answer's training and validation metrics, and the records of any other metric
    `groups` (`{group: GET /trials/{id}/metrics?group= records}`), as event files; returns the count."""
    rows = [("training", r) for r in trial.get("training_metrics") or []]
    rows += [("validation", r) for r in trial.get("validation_metrics") or []]
    rows += [(group, r) for group, records in (groups or {}).items() for r in records]
    if not rows:
        return 0
    writer = events.EventFileWriter(directory)
    try:
        for group, row in sorted(rows, key=lambda gr: (gr[1]["steps_completed"], gr[0] != "training")):
            events.write_metrics(writer, group, row["steps_completed"], row.get("metrics") or {},
                                 _to_epoch(row.get("end_time")))
    finally:
        writer.close()
    return len(rows)


def fill_event_files(session: Any, experiment_id: int, root: pathlib.Path) -> pathlib.Path:
    """The experiment's logdir under `root`, with event files written from the master's metrics for every trial
    that has none yet (trials that ran on another machine, or before their experiment wrote event files)."""
    described = session.get(f"/experiments/{experiment_id}")
    logdir = events.experiment_dir(root, experiment_id)
    logdir.mkdir(parents=True, exist_ok=True)
    for trial in described["trials"]:
        directory = events.trial_dir(root, experiment_id, trial["id"])
        if not events.has_event_files(directory):
            answer = session.get(f"/trials/{trial['id']}")
            groups = {g: session.get(f"/trials/{trial['id']}/metrics", params={"group": g})["metrics"]
                      for g in answer.get("metric_groups") or [] if g not in ("training", "validation")}
            write_trial_events(directory, answer, groups)
    return logdir


# ---------------------------------------------------------------- processes


def _state_dir(data_dir: "str | os.PathLike[str]") -> pathlib.Path:
    path = pathlib.Path(data_dir) / STATE_DIR
    path.mkdir(parents=True, exist_ok=True)
    return path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().split(")")[-1].split()[0] == "Z":
                return False
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"tensorboard" in f.read()
    except OSError:
        return True


def start(data_dir: "str | os.PathLike[str]", logdirs: Mapping[int, pathlib.Path], *, port: Optional[int] = None,
          timeout: float = 90.0) -> TensorBoardInstance:
    """Start TensorBoard on 127.0.0.1 over `logdirs` ({experiment id: logdir}) and wait until it answers."""
    require_tensorboard()
    if not logdirs:
        raise errors.DeterminedError("no experiment given: name at least one experiment id")
    state = _state_dir(data_dir)
    port = port or _free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        if sock.connect_ex(("127.0.0.1", port)) == 0:
            raise errors.DeterminedError(f"port {port} on 127.0.0.1 is already in use; choose another with --port")
    instance_id = secrets.token_hex(4)
    if len(logdirs) == 1:
        (logdir,) = logdirs.values()
        logdir_args = ["--logdir", str(logdir)]
        logdir_text = str(logdir)
    else:
        logdir_text = ",".join(f"experiment_{e}:{d}" for e, d in sorted(logdirs.items()))
        logdir_args = ["--logdir_spec", logdir_text]
    command = [sys.executable, "-m", "determined.master.insights.tensorboard", *logdir_args, "--host", "127.0.0.1", "--port", str(port),
               "--load_fast", "false", "--reload_interval", "5"]
    log_path = state / f"{instance_id}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            raise errors.DeterminedError(f"TensorBoard exited with code {proc.returncode} before serving:\n{tail}")
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            _terminate(proc.pid)
            raise errors.DeterminedError(f"TensorBoard did not answer on {url} within {timeout:.0f} s; see {log_path}")
        time.sleep(0.3)
    instance = TensorBoardInstance(id=instance_id, pid=proc.pid, port=port, url=url, experiment_ids=sorted(logdirs),
                                   logdir=logdir_text, start_time=datetime.datetime.now().isoformat(timespec="seconds"))
    try:
        (state / f"{instance_id}.json").write_text(json.dumps(instance.to_json()))
    except OSError:
        _terminate(proc.pid)
        raise
    return instance


def list_instances(data_dir: "str | os.PathLike[str]") -> List[TensorBoardInstance]:
    """The recorded instances whose process still runs (records of dead ones are removed)."""
    found = []
    for path in sorted(_state_dir(data_dir).glob("*.json")):
        try:
            instance = TensorBoardInstance(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            continue
        if _alive(instance.pid):
            found.append(instance)
        else:
            _forget(path)
    return found


def _forget(record: pathlib.Path) -> None:
    for path in (record, record.with_suffix(".log")):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _terminate(pid: int, grace: float = 10.0) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        if not _alive(pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def kill(data_dir: "str | os.PathLike[str]", instance_id: str) -> TensorBoardInstance:
    """Stop a TensorBoard instance by its id and remove its record."""
    running = {i.id: i for i in list_instances(data_dir)}
    instance = running.get(instance_id)
    if instance is None:
        known = ", ".join(sorted(running)) or "none runs"
        raise errors.DeterminedError(f"no TensorBoard with id {instance_id!r} runs (running: {known}); "
                                     "see `det tensorboard list`")
    _terminate(instance.pid)
    _forget(_state_dir(data_dir) / f"{instance_id}.json")
    return instance


# ---------------------------------------------------------------- the TensorBoard process itself


def _install_pkg_resources_shim() -> None:
    """TensorBoard 2.15 (the one TensorFlow 2.15 needs) imports `pkg_resources`, which setuptools 81+ no longer
    ships; give it the two functions it uses, on importlib.metadata, when the real module is missing."""
    if importlib.util.find_spec("pkg_resources") is not None:
        return
    from importlib import metadata
    import types

    class _EntryPoint:
        def __init__(self, entry_point: Any) -> None:
            self.name = entry_point.name
            self._entry_point = entry_point

        def resolve(self) -> Any:
            return self._entry_point.load()

        load = resolve

    def iter_entry_points(group: str, name: Optional[str] = None) -> List[_EntryPoint]:
        return [_EntryPoint(ep) for ep in metadata.entry_points(group=group) if name in (None, ep.name)]

    def parse_version(version: str) -> Any:
        from packaging.version import Version

        return Version(version)

    shim = types.ModuleType("pkg_resources")
    shim.iter_entry_points = iter_entry_points  # type: ignore[attr-defined]
    shim.parse_version = parse_version  # type: ignore[attr-defined]
    sys.modules["pkg_resources"] = shim


def main(argv: List[str]) -> None:
    """`python -m determined.master.insights.tensorboard ARGS`: TensorBoard's own command line, runnable without pkg_resources."""
    _install_pkg_resources_shim()
    from tensorboard import main as tensorboard_main

    sys.argv = ["tensorboard", *argv]
    tensorboard_main.run_main()


if __name__ == "__main__":
    main(sys.argv[1:])
