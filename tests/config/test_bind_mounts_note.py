"""Issue 33: `bind_mounts` are honoured by a master that runs trials in a sandbox (rm/sandbox.py) and by no other:
the note that names them says which, for the master the config goes to (`sandboxed`, from its GET /master/info,
or DET_SANDBOXED inside a trial's sandbox); and `det master up` says whose accounts trials run as."""
import pathlib

import pytest

from determined.cli.master import _describe_trial_user
from determined.config import load_experiment_config, no_effect_notes
from determined.master.rm.trial_env import TrialUser

MOUNTS = [{"host_path": "/data", "container_path": "/mnt/data"}]


def _bind_notes(config: dict, **kwargs: object) -> list:
    return [n for n in no_effect_notes(config, **kwargs) if n.startswith("bind_mounts")]  # type: ignore[arg-type]


def test_the_bind_mounts_note_is_true_for_the_master(minimal, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DET_SANDBOXED", raising=False)
    config = load_experiment_config(minimal(bind_mounts=MOUNTS))
    assert _bind_notes(config, sandboxed=True) == []  # a sandboxed server honours them
    [note] = _bind_notes(config, sandboxed=False)
    assert "has no effect on this master" in note and "trial_user or bubblewrap" in note
    [note] = _bind_notes(config)  # the master is not known
    assert "honoured only by a master that runs trials in a sandbox" in note
    monkeypatch.setenv("DET_SANDBOXED", "1")  # what a trial in its sandbox sees
    assert _bind_notes(config) == []
    assert _bind_notes(load_experiment_config(minimal()), sandboxed=False) == []  # none asked for


def test_master_info_says_whether_trials_are_sandboxed(tmp_path: pathlib.Path) -> None:
    from tests.auth._helpers import InProcessMaster

    info = InProcessMaster(tmp_path).session().get("/master/info")
    assert info["trials_sandboxed"] is False  # no resource manager here, no sandbox


def test_the_trials_run_as_line_names_linked_users() -> None:
    line = _describe_trial_user(TrialUser("dettrial", 990, 990, (990,), ""))
    assert line.startswith("each user's linked OS account (det user link-with-agent-user), else dettrial (uid 990")
    assert "link-with-agent-user" in _describe_trial_user(None) and "not used" in _describe_trial_user(None)
