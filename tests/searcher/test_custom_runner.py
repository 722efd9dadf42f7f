"""Custom searchers (Determined 0.19.6 to 0.37) end to end: a user's SearchMethod, run by LocalSearchRunner against
the data dir's master (trials are the master tests' fake trial program), drives an experiment to completion; a
runner killed between saving its answer and posting it resumes from searcher_dir without losing or repeating
anything."""
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
from typing import Any, Dict, Iterator, List

import pytest

from determined import errors, searcher
from determined.common.api import Session
from determined.master import embedded
from determined.master.rm import Slots

from tests.master._helpers import model_def, pass_fake_settings_to_trials

FAKE_TRIAL = [sys.executable, str(pathlib.Path(__file__).resolve().parent.parent / "master" / "fake_trial.py")]

# A small search method as a user writes it: N trials with x = 0.1, 0.1 + 1/N, ...; each trains 10 batches and validates;
# the better half trains on to 20; the search shuts down when every trial closed. Its state is saved as JSON.
METHOD = textwrap.dedent('''
    import json, os, signal, uuid
    from determined import errors, searcher

    class HalfSearch(searcher.SearchMethod):
        def __init__(self, trials):
            self.trials, self.results, self.closed, self.progress_value = trials, {}, [], 0.0

        def initial_operations(self, state):
            ops = []
            for i in range(self.trials):
                rid = uuid.uuid4()
                ops += [searcher.Create(rid, {"x": i / self.trials + 0.1, "global_batch_size": 4}, None),
                        searcher.ValidateAfter(rid, 10)]
            return ops

        def on_trial_created(self, state, request_id):
            assert isinstance(request_id, uuid.UUID)
            return []

        def on_validation_completed(self, state, request_id, metric, train_length):
            self.results.setdefault(str(request_id), []).append([train_length, metric])
            if train_length == 20:
                return [searcher.Close(request_id)]
            firsts = [r[0][1] for r in self.results.values()]
            if len(firsts) < self.trials:
                return []
            cut = sorted(firsts)[self.trials // 2 - 1]
            ops = []
            for rid, res in self.results.items():
                if len(res) == 1 and res[0][0] == 10:
                    res.append("decided")
                    ops.append(searcher.ValidateAfter(uuid.UUID(rid), 20) if res[0][1] <= cut
                               else searcher.Close(uuid.UUID(rid)))
            return ops

        def on_trial_closed(self, state, request_id):
            self.closed.append(str(request_id))
            return [searcher.Shutdown()] if len(self.closed) == self.trials else []

        def on_trial_exited_early(self, state, request_id, exited_reason):
            return [searcher.Shutdown(failure=True)]

        def progress(self, state):
            return len(self.closed) / self.trials

        def save_method_state(self, path):
            path.joinpath("method").write_text(json.dumps([self.trials, self.results, self.closed]))

        def load_method_state(self, path):
            self.trials, self.results, self.closed = json.loads(path.joinpath("method").read_text())
''')

# The runner in a process of its own that dies (SIGKILL) after it saved its answer to the second validation and
# before it posted it: the worst moment.
RUNNER = textwrap.dedent('''
    import os, signal, sys
    from determined import errors, searcher
    from method import HalfSearch

    validations = []
    post = searcher.SearchRunner.post_operations

    def post_or_die(self, session, experiment_id, event, operations):
        if "validationCompleted" in event:
            validations.append(event["id"])
            if len(validations) == 2:
                os.kill(os.getpid(), signal.SIGKILL)
        post(self, session, experiment_id, event, operations)

    searcher.SearchRunner.post_operations = post_or_die
    searcher.LocalSearchRunner(HalfSearch(4), searcher_dir=sys.argv[1]).run(sys.argv[2], model_dir=sys.argv[3])
''')


@pytest.fixture
def user_code(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    code = tmp_path / "code"
    (code / "model").mkdir(parents=True)
    (code / "method.py").write_text(METHOD)
    (code / "runner.py").write_text(RUNNER)
    (code / "model" / "model.py").write_text("class T:\n    pass\n")
    import yaml

    (code / "config.yaml").write_text(yaml.safe_dump({
        "entrypoint": "model:T", "max_restarts": 0,
        "searcher": {"name": "custom", "metric": "loss", "smaller_is_better": True, "unit": "batches"}}))
    monkeypatch.syspath_prepend(str(code))
    return code


@pytest.fixture
def master(det_data_dir: pathlib.Path, tmp_path: pathlib.Path,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[embedded.EmbeddedMaster]:
    """The data dir's master, running the fake trial program: LocalSearchRunner finds it through the data dir."""
    fake = tmp_path / "fake"
    fake.mkdir()
    monkeypatch.setenv("FAKE_DIR", str(fake))
    pass_fake_settings_to_trials(monkeypatch)
    with embedded.start(det_data_dir, slots=Slots(gpus=[], cpu_count=4), trial_command=FAKE_TRIAL,
                        preemption_timeout=20) as em:
        yield em


def trials_of(session: Session, exp_id: int) -> List[Dict[str, Any]]:
    return list(session.get(f"/experiments/{exp_id}")["trials"])


def check_search(session: Session, exp_id: int, n: int) -> None:
    """The HalfSearch of `n` trials ended as it should: n trials, the better half trained to 20 batches."""
    exp = session.get(f"/experiments/{exp_id}")["experiment"]
    assert exp["state"] == "COMPLETED" and exp["progress"] == 1.0
    trials = sorted(trials_of(session, exp_id), key=lambda t: t["hparams"]["x"])
    assert len(trials) == n and all(t["state"] == "COMPLETED" for t in trials)
    # loss = (x - 0.5)^2 + 1/batches: the trials nearest x = 0.5 are the better half
    by_distance = sorted(trials, key=lambda t: abs(t["hparams"]["x"] - 0.5))
    assert [t["total_batches"] for t in by_distance] == [20] * (n // 2) + [10] * (n - n // 2)


def test_a_user_search_method_drives_an_experiment_to_completion(
        master: embedded.EmbeddedMaster, user_code: pathlib.Path, tmp_path: pathlib.Path) -> None:
    from method import HalfSearch  # type: ignore[import-not-found]

    runner = searcher.LocalSearchRunner(HalfSearch(4), searcher_dir=tmp_path / "searcher")
    exp_id = runner.run(str(user_code / "config.yaml"), model_dir=str(user_code / "model"))
    check_search(master.session(), exp_id, 4)
    assert runner.state.experiment_completed and len(runner.state.trials_closed) == 4
    assert (tmp_path / "searcher" / "experiment_id.txt").read_text() == str(exp_id)
    # the journal holds every answer of the runner, as any search's events
    events = master.master
    with events.read() as s:
        from sqlalchemy import select

        from determined.master.db import SearcherEvent

        kinds = [e.event["kind"] for e in s.scalars(select(SearcherEvent).where(SearcherEvent.experiment_id == exp_id))]
    assert kinds.count("operations_posted") >= 4 + 4 + 4  # created, validated, closed: one answer each at least


def test_a_killed_runner_resumes_from_searcher_dir(
        master: embedded.EmbeddedMaster, user_code: pathlib.Path, tmp_path: pathlib.Path) -> None:
    searcher_dir = tmp_path / "searcher"
    child = subprocess.run([sys.executable, str(user_code / "runner.py"), str(searcher_dir),
                            str(user_code / "config.yaml"), str(user_code / "model")],
                           cwd=user_code, timeout=120,  # DET_MASTER: the runner talks to it (no master imported)
                           env={**os.environ, "PYTHONPATH": str(user_code), "DET_MASTER": master.url})
    assert child.returncode == -signal.SIGKILL
    exp_id = int((searcher_dir / "experiment_id.txt").read_text())
    session = master.session()
    assert session.get(f"/experiments/{exp_id}")["experiment"]["state"] == "ACTIVE"
    pending = session.get(f"/experiments/{exp_id}/searcher_events")["searcherEvents"]
    assert pending and "validationCompleted" in pending[0]  # the answer to it was saved, never posted

    from method import HalfSearch

    runner = searcher.LocalSearchRunner(HalfSearch(4), searcher_dir=searcher_dir)
    assert runner.run(str(user_code / "config.yaml"), model_dir=str(user_code / "model")) == exp_id
    check_search(session, exp_id, 4)  # no trial lost, none made twice, each promotion decided once


def test_posted_operations_are_checked(master: embedded.EmbeddedMaster, user_code: pathlib.Path) -> None:
    import yaml

    session = master.session()
    cfg = yaml.safe_load((user_code / "config.yaml").read_text())
    exp_id = int(session.post("/experiments", {"config": cfg, "model_definition": model_def()})["experiment"]["id"])
    [initial] = session.get(f"/experiments/{exp_id}/searcher_events")["searcherEvents"]
    assert initial == {"id": 1, "initialOperations": {}}
    bad = [
        ({"searcherOperations": [{"closeTrial": {"requestId": "nobody"}}], "triggeredByEvent": {"id": 1}},
         "no trial with request id nobody"),
        ({"searcherOperations": [{"createTrial": {"requestId": "a", "hyperparams": "{"}}], "triggeredByEvent": {"id": 1}},
         "not valid JSON"),
        ({"searcherOperations": [{"explode": {}}], "triggeredByEvent": {"id": 1}}, "unknown operation"),
        ({"searcherOperations": [], "triggeredByEvent": {}}, "triggeredByEvent.id"),
    ]
    for body, message in bad:
        with pytest.raises(errors.APIError, match=message):
            session.post(f"/experiments/{exp_id}/searcher_operations", body)
    assert session.get(f"/experiments/{exp_id}/searcher_events")["searcherEvents"] == [initial]  # nothing changed
    body = {"searcherOperations": [{"createTrial": {"requestId": "a", "hyperparams": '{"x": 0.5}'}},
                                   {"setSearcherProgress": {"progress": 0.25}}], "triggeredByEvent": {"id": 1}}
    assert session.post(f"/experiments/{exp_id}/searcher_operations", body) == {"taken": 2}
    assert session.post(f"/experiments/{exp_id}/searcher_operations", body) == {"taken": 0}  # answered already
    assert session.get(f"/experiments/{exp_id}")["experiment"]["progress"] == 0.25
    [created] = session.get(f"/experiments/{exp_id}/searcher_events", {"timeout_seconds": 5})["searcherEvents"]
    assert created == {"id": 2, "trialCreated": {"requestId": "a"}}
    session.post(f"/experiments/{exp_id}/pause")
    assert session.get(f"/experiments/{exp_id}/searcher_events")["searcherEvents"] == [
        created, {"id": -1, "experimentInactive": {"experimentState": "PAUSED"}}]
    more = {"searcherOperations": [{"createTrial": {"requestId": "b", "hyperparams": '{"x": 0.1}'}}],
            "triggeredByEvent": {"id": 2}}
    assert session.post(f"/experiments/{exp_id}/searcher_operations", more) == {"taken": 1}  # kept while paused
    assert {t["state"] for t in trials_of(session, exp_id)} == {"PAUSED"} and len(trials_of(session, exp_id)) == 2
    session.post(f"/experiments/{exp_id}/kill")
    events = session.get(f"/experiments/{exp_id}/searcher_events")["searcherEvents"]
    assert events[-1]["experimentInactive"]["experimentState"] in ("CANCELED", "STOPPING_CANCELED")
