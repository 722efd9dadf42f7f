"""Config fields of Determined 0.14-0.38 on the whole master with real trial processes (the fake trial program of
test_local_master): log_policies, preemption_timeout, a config sent as YAML text."""
import os
import pathlib
from typing import Any, Dict

import pytest

from determined.common.api import Session

from ._helpers import config
from .test_local_master import create, fake_dir, start, state, trials, wait_for  # noqa: F401  (fake_dir: a fixture)


def test_an_experiments_preemption_timeout_replaces_the_masters(tmp_path: pathlib.Path, fake_dir: pathlib.Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_HANG_AT", "5")  # the trial stops answering at batch 5: only the kill ends it
    with start(tmp_path / "data", preemption_timeout=600) as em:
        s = em.session()
        exp_id = create(s, config(max_trials=1, length=40, preemption_timeout=1))
        pid = int(wait_for(lambda: (fake_dir / "pid-1").exists() and (fake_dir / "pid-1").read_text(),
                           message="the trial to hang"))
        s.post(f"/experiments/{exp_id}/pause")

        def gone() -> bool:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            return False

        wait_for(gone, timeout=60, message="the hung trial killed after the experiment's 1 s, not the master's 600 s")
        wait_for(lambda: state(s, exp_id) == "PAUSED", message="experiment PAUSED")


def _ended(session: Session, exp_id: int) -> Dict[str, Any]:
    wait_for(lambda: state(session, exp_id) in ("COMPLETED", "ERROR"), message=f"experiment {exp_id} ended")
    [trial] = trials(session, exp_id)
    return trial


def test_cancel_retries_stops_restarts_and_labels_the_trial(tmp_path: pathlib.Path, fake_dir: pathlib.Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CRASH_TRIAL", "1,2")  # trials 1 and 2 fail after their first report
    with start(tmp_path / "data") as em:
        s = em.session()
        # Trial 1's log line "fake trial 1 starts at batch 0" matches a cancel_retries policy.
        policies = [{"name": "doomed", "pattern": r"fake trial \d+ starts", "action": "cancel_retries"},
                    {"pattern": "a line on stderr", "action": {"type": "exclude_node"}}]  # the 0.26.4-0.37 form
        first = create(s, config(max_trials=1, length=30, max_restarts=3, log_policies=policies))
        # A label-only policy changes nothing else: trial 2 is restarted up to max_restarts, each run labelled.
        second = create(s, config(max_trials=1, length=30, max_restarts=1,
                                  log_policies=[{"name": "stderr seen", "pattern": "line on stderr"}]))

        trial = _ended(s, first)
        assert trial["id"] == 1 and trial["state"] == "ERROR"
        assert trial["restarts"] == 0  # not restarted although max_restarts is 3
        assert trial["log_policy_matched"] == "doomed"
        matches = {(m["name"], m["action"]) for m in trial["log_policy_matches"]}
        assert matches == {("doomed", "cancel_retries"), (None, "exclude_node")}
        assert all(m["node"] and m["allocation_id"] for m in trial["log_policy_matches"])
        doomed = [m for m in trial["log_policy_matches"] if m["name"] == "doomed"][0]
        assert doomed["line"] == "fake trial 1 starts at batch 0"

        trial = _ended(s, second)
        assert trial["id"] == 2 and trial["state"] == "ERROR" and trial["log_policy_matched"] == "stderr seen"
        runs = {m["allocation_id"] for m in trial["log_policy_matches"]}
        assert len(runs) == 2 and {m["name"] for m in trial["log_policy_matches"]} == {"stderr seen"}  # 1 restart

        # The default policies (CUDA OOM, ECC Error) label only what they match: nothing here.
        third = create(s, config(max_trials=1, length=10))
        trial = _ended(s, third)
        assert trial["state"] == "COMPLETED" and trial["log_policy_matched"] is None
        exp = s.get(f"/experiments/{third}")["experiment"]
        assert [p["name"] for p in exp["config"]["log_policies"]] == ["CUDA OOM", "ECC Error"]


def test_the_master_reads_a_config_sent_as_yaml_text(tmp_path: pathlib.Path, fake_dir: pathlib.Path) -> None:
    text = (
        "name: from text\nentrypoint: model:T\nmax_restarts: 0\n"
        "hyperparameters:\n  global_batch_size: 4\n  x: {type: double, minval: 1e-1, maxval: .5}\n"
        "searcher: {name: random, metric: loss, max_length: 10, max_trials: 1}\n"
        "checkpoint_storage: {type: gcs, bucket: far-away, save_trial_best: 3}\n"
    )
    from ._helpers import model_def

    with start(tmp_path / "data") as em:
        s = em.session()
        exp = s.post("/experiments", {"config": text, "model_definition": model_def()})["experiment"]
        assert exp["name"] == "from text" and exp["config"]["hyperparameters"]["x"]["minval"] == 0.1
        storage = exp["config"]["checkpoint_storage"]  # gcs cannot be reached: the master's default, with save_*
        assert storage["type"] == "shared_fs" and storage["host_path"] == str(tmp_path / "data")
        assert storage["save_trial_best"] == 3
        trial = _ended(s, exp["id"])
        assert trial["state"] == "COMPLETED" and 0.1 <= trial["hparams"]["x"] <= 0.5
        from determined import errors

        with pytest.raises(errors.APIError) as info:
            s.post("/experiments", {"config": "a: &a [*a]\n", "model_definition": model_def()})
        assert info.value.status_code == 400 and "an alias refers to a value that contains it" in str(info.value)
