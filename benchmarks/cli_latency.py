"""How long `det`'s read commands take, as whole processes, against `det --help` measured in the same run.

A small data dir (no master running on it) is filled through the master's own API: finished, running and
paused experiments with trials that reported metrics, validations, checkpoints and log lines, and a model
with a version. Then each command runs `--repeats` times as a fresh process (interleaved with the others,
so the machine's load drifts evenly over all of them), and the script prints each median and its ratio to
the median of `det --help`. Target: every read command <= 1.5x `det --help`.

With `--running-master`, a master runs on the data dir while the commands run (`det master up` on 127.0.0.1,
any free port, started by the script and stopped by its pid at the end) and DET_MASTER stays unset: what
`det master up` users have. (The experiments still running are paused first, so the master runs no trial
while the commands are timed.)

    .venv/bin/python benchmarks/cli_latency.py                  # 15 repeats
    .venv/bin/python benchmarks/cli_latency.py --repeats 31 --keep DIR
    .venv/bin/python benchmarks/cli_latency.py --running-master
"""
import argparse
import contextlib
import os
import re
import signal
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any, Dict, Iterator, List, Sequence, Tuple

REPO = pathlib.Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _model_def() -> str:
    """A model dir holding `model.py`, packed as `det experiment create` packs one."""
    from determined.common.context import pack_model_dir_b64

    with tempfile.TemporaryDirectory() as model_dir:
        (pathlib.Path(model_dir) / "model.py").write_text("class T:\n    pass\n")
        return pack_model_dir_b64(model_dir)


def _config(name: str, searcher: Dict[str, Any]) -> Dict[str, Any]:
    return {"description": name, "entrypoint": "model:T", "labels": ["bench"], "max_restarts": 1,
            "searcher": {"metric": "loss", **searcher},
            "hyperparameters": {"global_batch_size": 16, "lr": {"type": "log", "minval": -4, "maxval": -1},
                                "width": {"type": "categorical", "vals": [32, 64, 128]}}}


def fill_data_dir(data_dir: pathlib.Path, pause_all: bool = False) -> Dict[str, Any]:
    """Experiments, trials, metrics, checkpoints, logs and a model, written through the master's API in-process;
    with `pause_all`, every experiment that has not ended is paused (a master started on the data dir then runs
    nothing).

    Returns the ids the commands read: an experiment, a trial and a checkpoint uuid.
    """
    from determined.master import embedded

    session = embedded.in_process_session(data_dir)
    master = session._client.app.state.master
    searches = [
        ("finished random", {"name": "random", "max_length": {"batches": 400}, "max_trials": 6}),
        ("asha search", {"name": "adaptive_asha", "max_length": {"batches": 800}, "max_trials": 8, "divisor": 2}),
        ("a single run", {"name": "single", "max_length": {"batches": 400}}),
    ]
    first_trial, checkpoint_uuid, exp_ids = 0, "", []
    for name, searcher in searches:
        exp = session.post("/experiments", {"config": _config(name, searcher), "model_definition": _model_def()})
        exp_id = exp["experiment"]["id"]
        exp_ids.append(exp_id)
        for trial in session.get(f"/experiments/{exp_id}")["trials"]:
            tid = trial["id"]
            first_trial = first_trial or tid
            op = session.get(f"/trials/{tid}/searcher/operation")
            length = op.get("length")
            if not length:
                continue
            for step in range(50, length + 1, 50):
                session.post(f"/trials/{tid}/training_metrics",
                             {"steps_completed": step, "metrics": {"loss": 1.0 / step, "lr": 0.01}})
            loss = 0.1 + (tid % 7) / 20
            session.post(f"/trials/{tid}/validation_metrics",
                         {"steps_completed": length, "metrics": {"loss": loss, "accuracy": 1 - loss}})
            checkpoint_uuid = str(uuid.uuid4())
            session.post(f"/trials/{tid}/checkpoints",
                         {"uuid": checkpoint_uuid, "steps_completed": length, "resources": {"model.pt": 123456},
                          "framework": "torch", "format": "pickle", "metadata": {}})
            session.post(f"/trials/{tid}/searcher/completed_operation", {"length": length, "metric": loss})
            import datetime

            now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
            with master.write() as s:  # log lines as the resource manager stores them
                from determined.master.db import TrialLog

                s.add_all([TrialLog(trial_id=tid, timestamp=now, stream="stdout", message=f"batch {b}: loss {1 / b:.4f}")
                           for b in range(1, 201)])
    session.post(f"/experiments/{exp_ids[-1]}/pause")
    if pause_all:
        for exp_id in exp_ids:
            if session.get(f"/experiments/{exp_id}")["experiment"]["state"] == "ACTIVE":
                session.post(f"/experiments/{exp_id}/pause")
    session.post("/models/bench-model", {"description": "a model", "metadata": {"team": "bench"}})
    session.post("/models/bench-model/versions", {"checkpoint_uuid": checkpoint_uuid})
    master.stop()
    return {"experiment": exp_ids[1], "trial": first_trial, "checkpoint": checkpoint_uuid}


def commands(ids: Dict[str, Any]) -> List[Tuple[str, List[str]]]:
    return [
        ("det --help", ["--help"]),
        ("experiment list", ["experiment", "list"]),
        ("experiment describe", ["experiment", "describe", str(ids["experiment"])]),
        ("trial describe", ["trial", "describe", str(ids["trial"])]),
        ("trial logs", ["trial", "logs", str(ids["trial"])]),
        ("model list", ["model", "list"]),
        ("checkpoint describe", ["checkpoint", "describe", ids["checkpoint"]]),
    ]


@contextlib.contextmanager
def running_master(data_dir: pathlib.Path, log_path: pathlib.Path, timeout: float = 120.0) -> Iterator[str]:
    """`det master up` on the data dir (127.0.0.1, a free port) for the life of the block; yields its URL. It is
    stopped by its pid (SIGTERM, as Ctrl-C) at the end."""
    env = {**os.environ, "DET_DATA_DIR": str(data_dir)}
    for key in ("DET_MASTER", "DET_MASTER_ADDR"):
        env.pop(key, None)
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "determined", "master", "up", "--host", "127.0.0.1",
                                 "--port", "0", "--data-dir", str(data_dir)], env=env, stdout=log,
                                stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(r"Master serving at (http://\S+)", log_path.read_text())
            if found:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"det master up did not start:\n{log_path.read_text()}")
            time.sleep(0.2)
        yield found.group(1)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()


def time_commands(data_dir: pathlib.Path, cmds: Sequence[Tuple[str, List[str]]], repeats: int) -> Dict[str, List[float]]:
    env = {**os.environ, "DET_DATA_DIR": str(data_dir), "COLUMNS": "120"}
    env.pop("DET_MASTER", None)
    # As an installed package runs: its modules' bytecode is cached (a shell that sets PYTHONDONTWRITEBYTECODE would
    # have every run compile every module it imports, which charges a command for each module it adds).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    det = [sys.executable, "-m", "determined"]
    times: Dict[str, List[float]] = {name: [] for name, _ in cmds}
    for name, argv in cmds:  # a warm-up of each (the OS's file cache, the bytecode cache)
        subprocess.run(det + argv, env=env, capture_output=True, check=True)
    for _ in range(repeats):
        for name, argv in cmds:
            start = time.perf_counter()
            subprocess.run(det + argv, env=env, capture_output=True, check=True)
            times[name].append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--keep", default=None, help="fill this data dir (kept) instead of a temporary one")
    parser.add_argument("--running-master", action="store_true",
                        help="time the commands with `det master up` running on the data dir and DET_MASTER unset")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = pathlib.Path(args.keep or tmp) / "data"
        ids = fill_data_dir(data_dir, pause_all=args.running_master)
        cmds = commands(ids)
        with contextlib.ExitStack() as stack:
            if args.running_master:
                url = stack.enter_context(running_master(data_dir, pathlib.Path(tmp) / "master.log"))
                print(f"a master runs on the data dir at {url} (det master up); DET_MASTER unset")
            times = time_commands(data_dir, cmds, args.repeats)
    base = statistics.median(times["det --help"])
    print(f"{'command':<22} {'median s':>9} {'min s':>7} {'/ det --help':>12}")
    worst = 0.0
    for name, _ in cmds:
        median = statistics.median(times[name])
        ratio = median / base
        if name != "det --help":
            worst = max(worst, ratio)
        print(f"{name:<22} {median:9.3f} {min(times[name]):7.3f} {ratio:12.2f}")
    print(f"worst read command: {worst:.2f}x det --help (target <= 1.5x); {args.repeats} repeats each, interleaved")


if __name__ == "__main__":
    main()
