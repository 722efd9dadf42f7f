"""The foreground run of `det experiment create` on its own embedded master (issue 34, item 8): it prints where its
web UI is at the start and, at its end, that the UI is gone and how to see it again; SIGTERM pauses the experiment
as Ctrl-C does (nothing is left ACTIVE with no master); a kill after a run that died anyway ends CANCELED with a
fixed duration; `-d` with no master to detach to is refused before anything is created."""
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
import urllib.request
from typing import Any, Dict, List

import yaml

from determined.master import embedded
from tests.client._cli import cli_fails, det
from tests.master._helpers import config
from tests.server._server import FAKE_TRIAL_ENV, SERVE_FAKE, wait_for


def _experiment(tmp_path: pathlib.Path, gate: pathlib.Path, length: int = 20) -> List[str]:
    """A config of one fake trial (tests/master/fake_trial.py) that trains only once `gate` exists, and a model dir."""
    fake_dir = tmp_path / "fake"
    fake_dir.mkdir(exist_ok=True)
    variables = [f"FAKE_GATE={gate}", f"FAKE_DIR={fake_dir}", *(f"{k}={v}" for k, v in FAKE_TRIAL_ENV.items())]
    cfg = config(max_trials=1, length=length, environment={"environment_variables": variables})
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(cfg))
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "model.py").write_text("class T:\n    pass\n")
    return [str(tmp_path / "exp.yaml"), str(model)]


def _start(tmp_path: pathlib.Path, argv: List[str], name: str = "run") -> "subprocess.Popen[str]":
    fake_dir = tmp_path / "fake"
    fake_dir.mkdir(exist_ok=True)
    env = {**os.environ, **FAKE_TRIAL_ENV, "FAKE_DIR": str(fake_dir), "DET_HARNESS_PRESTART": "0",
           "DET_FORK_SERVER": "0", "DET_CPU_SLOTS": "1"}
    out = open(tmp_path / f"{name}.out", "w")
    return subprocess.Popen([sys.executable, str(SERVE_FAKE), "experiment", "create", *argv], env=env, stdout=out,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)


def _describe(experiment_id: int) -> Dict[str, Any]:
    import json

    proc = det("experiment", "describe", str(experiment_id), "--json")
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    return answer[0] if isinstance(answer, list) else answer


def _state(experiment_id: int) -> str:
    d = _describe(experiment_id)
    return str((d.get("experiment") or d)["state"])


def _ui_url(out: str) -> str:
    found = re.search(r"(http://127\.0\.0\.1:\d+)/experiments/(\d+)", out)
    assert found, out
    return found.group(0)


def test_the_run_prints_its_ui_then_that_it_is_gone_and_how_to_see_it_again(
        det_data_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    gate = tmp_path / "gate"
    run = _start(tmp_path, _experiment(tmp_path, gate))
    output = (tmp_path / "run.out").read_text
    try:
        wait_for(lambda: "/experiments/" in output(), 90, "the UI's address")
        url = _ui_url(output())
        with urllib.request.urlopen(url, timeout=10) as page:  # served while the run lasts
            assert page.status == 200
        gate.touch()
        assert run.wait(120) == 0, output()
    finally:
        if run.poll() is None:
            run.kill()
    out = output()
    assert f"Web UI: {url}" in out, out
    tail = " ".join(out[out.index("Best") if "Best" in out else 0:].split())
    assert "the web UI at" in tail and "has stopped with this command" in tail, out
    assert f"det master up --data-dir {det_data_dir.resolve()}" in tail, out
    assert f"/experiments/{url.rsplit('/', 1)[1]}" in tail.split("has stopped")[1], out


def test_sigterm_pauses_the_experiment_as_ctrl_c_does(det_data_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    run = _start(tmp_path, _experiment(tmp_path, tmp_path / "never"))
    output = (tmp_path / "run.out").read_text
    try:
        wait_for(lambda: "/experiments/" in output(), 90, "the UI's address")
        experiment_id = int(_ui_url(output()).rsplit("/", 1)[1])
        wait_for(lambda: (tmp_path / "fake" / "events.log").exists() or "RUNNING" in output(), 60, "a running trial")
        time.sleep(1.0)
        run.send_signal(signal.SIGTERM)
        code = run.wait(120)
    finally:
        if run.poll() is None:
            run.kill()
    out = output()
    assert code == 0, out
    assert f"Pausing experiment {experiment_id}" in out, out
    assert _state(experiment_id) == "PAUSED"
    assert not (det_data_dir / "master.lock").exists()
    proc = det("experiment", "kill", str(experiment_id))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _state(experiment_id) == "CANCELED"


def test_a_kill_after_the_run_died_ends_canceled_with_an_end_time(
        det_data_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """SIGKILL leaves the experiment ACTIVE with a run recorded as live and no master: a later kill must end it
    (CANCELED, an end time: a duration that stops growing), not leave it STOPPING_CANCELED for ever."""
    run = _start(tmp_path, _experiment(tmp_path, tmp_path / "never"))
    output = (tmp_path / "run.out").read_text
    children: List[int] = []
    try:
        wait_for(lambda: "/experiments/" in output(), 90, "the UI's address")
        experiment_id = int(_ui_url(output()).rsplit("/", 1)[1])
        wait_for(lambda: (tmp_path / "fake" / "events.log").exists(), 60, "a running trial")
        children = _descendants(run.pid)
        run.send_signal(signal.SIGKILL)
        run.wait(30)
    finally:
        if run.poll() is None:
            run.kill()
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert _state(experiment_id) == "ACTIVE"
    proc = det("experiment", "kill", str(experiment_id))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    described = _describe(experiment_id)
    exp = described.get("experiment") or described
    assert exp["state"] == "CANCELED", described
    assert exp.get("end_time"), described


def _descendants(pid: int) -> List[int]:
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for task in pathlib.Path(f"/proc/{parent}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


def test_detach_without_a_master_is_refused_before_anything_is_created(
        det_data_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    argv = _experiment(tmp_path, tmp_path / "never")
    cli_fails(det("experiment", "create", "-d", *argv), "no master is running to detach to",
              "det master up", "drop -d")
    assert "No experiments yet" in det("experiment", "list").stdout


def test_detach_with_a_master_running_on_the_data_dir_leaves_the_experiment_to_it(
        det_data_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    gate = tmp_path / "gate"
    trial = (sys.executable, str(pathlib.Path(__file__).resolve().parents[1] / "master" / "fake_trial.py"))
    master = embedded.start(det_data_dir, trial_command=trial)
    try:
        proc = det("experiment", "create", "-d", *_experiment(tmp_path, gate))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        experiment_id = int(re.search(r"Created experiment (\d+)", proc.stdout).group(1))  # type: ignore[union-attr]
        assert f"{master.url}/experiments/{experiment_id}" in proc.stdout, proc.stdout
        assert _state(experiment_id) == "ACTIVE"
    finally:
        master.stop()
