"""Foreground masters of `det experiment activate` (issue 19, row 11): when the command that became the data dir's
master ends, the experiments other commands activated on it are handed over to those commands, or run to their
end when no command follows them any more; nothing is left ACTIVE with nothing running it."""
import os
import pathlib
import signal
import subprocess
import sys
from typing import Dict, List

from determined.master import Master
from determined.master.lifecycle import actions
from tests.master._helpers import config, model_def

from tests.server._server import FAKE_TRIAL_ENV, SERVE_FAKE, wait_for


def _paused_experiments(data_dir: pathlib.Path, gates: List[pathlib.Path]) -> List[int]:
    """A paused experiment of one trial per gate; its trial trains only once its gate exists."""
    import base64

    master = Master(data_dir, run_scheduler=False)
    try:
        ids = []
        for gate in gates:
            extra = {"environment": {"environment_variables": [f"FAKE_GATE={gate}"]}}
            canonical = actions.canonical_config(config(max_trials=1, length=10, **extra), str(master.data_dir))
            with master.write() as s:
                exp = actions.create_experiment(s, canonical, base64.b64decode(model_def()), activate=False)
                s.flush()
                ids.append(int(exp.id))
        return ids
    finally:
        master.stop()


def _states(data_dir: pathlib.Path) -> Dict[int, str]:
    from sqlalchemy import select

    from determined.master.db import Experiment

    master = Master(data_dir, run_scheduler=False)
    try:
        with master.read() as s:
            return {int(e.id): str(e.state) for e in s.scalars(select(Experiment))}
    finally:
        master.stop()


def test_two_foreground_activations_hand_over_and_leave_nothing_active(
        det_data_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    gates = [tmp_path / f"gate-{name}" for name in ("first", "handed", "orphan")]
    first, handed, orphan = _paused_experiments(det_data_dir, gates)
    fake_dir = tmp_path / "fake"
    fake_dir.mkdir()
    env = {**os.environ, **FAKE_TRIAL_ENV, "FAKE_DIR": str(fake_dir), "FAKE_SLEEP": "0.05", "DET_CPU_SLOTS": "3"}

    def activate(experiment_id: int, name: str) -> "subprocess.Popen[str]":
        out = open(tmp_path / f"{name}.out", "w")
        return subprocess.Popen([sys.executable, str(SERVE_FAKE), "experiment", "activate", str(experiment_id)],
                                env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)

    def output(name: str) -> str:
        return (tmp_path / f"{name}.out").read_text()

    owner = activate(first, "owner")  # becomes the data dir's master
    wait_for(lambda: "Activated experiment" in output("owner"), 60, "the first command's master")
    follower = activate(handed, "follower")  # uses it, and follows its experiment
    quitter = activate(orphan, "quitter")  # uses it, then dies without a word
    wait_for(lambda: "Activated experiment" in output("follower") and "Activated experiment" in output("quitter"), 60,
             "both activations on the first master")
    quitter.send_signal(signal.SIGKILL)
    quitter.wait()
    gates[0].touch()  # the first command's own experiment ends
    try:
        wait_for(lambda: "started on this master by another det command" in output("owner"), 60, "the orphan")
        gates[2].touch()  # the experiment nobody follows ends, on the first command's master
        assert owner.wait(120) == 0, output("owner")
        gates[1].touch()  # the followed experiment ends, on the follower's own master
        assert follower.wait(120) == 0, output("follower")
    finally:
        for proc in (owner, follower):
            if proc.poll() is None:
                proc.kill()
    assert f"Experiment(s) {orphan}, started on this master by another det command" in output("owner"), output("owner")
    assert f"Experiment(s) {handed} move(s) to the det command that follows it" in output("owner"), output("owner")
    assert f"The master running experiment {handed} stopped; it runs here from now on" in output("follower")
    assert _states(det_data_dir) == {first: "COMPLETED", handed: "COMPLETED", orphan: "COMPLETED"}
