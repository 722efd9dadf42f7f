"""Incremental downsampling (determined/master/insights/curves.py's `Summary`): a curve maintained from reports as
they arrive, in batches, kept and loaded again (a master restart) in the middle, equals the curve rebuilt from every
point (`downsample`); through the master, the curves route answers what downsampling the full series gives after
reports in batches, a restart, a rollback and a replaced report, without reading a trial's points again when it
only reported new ones. Runs on PostgreSQL too (DET_TEST_DB=postgres)."""
import math
import random
from typing import Any, Dict, List

import pytest
from sqlalchemy import event, select

from determined.master.db import Trial
from determined.master.insights import curves
from determined.master.lifecycle import allocations, experiment

from ._helpers import config, model_def
from .test_curves_kept import _assert_downsampled, _curves, _experiment, _report, _start


class _Row:
    def __init__(self, step: int, metrics: Dict[str, Any]) -> None:
        self.steps_completed, self.metrics = step, metrics


def _render(row: _Row) -> str:
    return f'{{"s":{row.steps_completed}}}'


def _rebuilt(rows: List[_Row], max_points: int) -> str:
    return "[" + ",".join(_render(rows[i]) for i in curves.downsample([r.metrics for r in rows], max_points)) + "]"


def _random_points(rng: random.Random, n: int) -> List[_Row]:
    makers = [lambda: rng.gauss(0, 1), lambda: rng.randint(-3, 3), lambda: rng.choice([0.5, 0.5, 2.0]),
              lambda: True, lambda: "text", lambda: math.nan, lambda: None]
    return [_Row(i, {k: rng.choice(makers)() for k in rng.sample("abc", rng.randint(0, 3))}) for i in range(n)]


@pytest.mark.parametrize("seed", range(40))
def test_a_summary_fed_in_batches_equals_the_curve_rebuilt_from_every_point(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([0, 1, 3, 10, 50, 300, 2000])
    max_points = rng.choice([4, 5, 10, 20, 51, 200])
    rows = _random_points(rng, n)
    summary = curves.Summary(max_points, _render)
    fed = 0
    while fed < n:
        batch = rows[fed:fed + rng.randint(1, max(1, n // 5))]
        summary.extend(batch)
        fed += len(batch)
        if rng.random() < 0.3:  # a restart: the summary kept in the database and loaded again
            summary = curves.Summary.loads(summary.dumps(), _render)
        assert summary.answer()[0] == _rebuilt(rows[:fed], max_points), (fed, max_points)
    names = sorted({k for r in rows for k, v in r.metrics.items() if curves.numeric(v)})
    assert summary.answer() == (_rebuilt(rows, max_points), names)
    assert summary.count == n


def test_a_summary_keeps_the_extremes_within_the_point_bound() -> None:
    rng = random.Random(1)
    values = [rng.gauss(0, 1) for _ in range(100_000)]
    values[12_345], values[77_777] = 80.0, -80.0
    summary = curves.Summary(20, _render)
    for start in range(0, len(values), 997):
        summary.extend([_Row(i, {"loss": values[i]}) for i in range(start, min(len(values), start + 997))])
    kept = [int(p["s"]) for p in __import__("json").loads(summary.answer()[0])]
    assert kept[0] == 0 and kept[-1] == len(values) - 1 and 12_345 in kept and 77_777 in kept
    assert 12 <= len(kept) <= 20  # at most max_points per metric, and most of the budget used
    assert len(summary.dumps()) < 20_000  # what is kept does not grow with the series


def test_the_route_maintains_curves_incrementally_across_batches_and_a_restart(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    app, api, exp_id, [(t1, tok1), (t2, tok2)] = _experiment(data)
    rng = random.Random(3)
    step = 0
    for batch in range(3):
        for _ in range(rng.randint(5, 30)):
            step += 1
            _report(api, t1, tok1, step, rng.gauss(1.0, 0.5))
            if step % 3 == 0:
                _report(api, t2, tok2, step, rng.gauss(2.0, 0.5))
            if step % 7 == 0:
                _report(api, t1, tok1, step, rng.gauss(0.5, 0.1), "validation")
        _assert_downsampled(api, exp_id, _curves(api, exp_id))
    app.state.master.stop()
    app, api = _start(data)
    _assert_downsampled(api, exp_id, _curves(api, exp_id))  # loaded from the kept summaries
    with monkeypatch.context() as patch:  # new reports after the restart: only they are read and folded in
        patch.setattr(curves, "downsample", lambda *a: pytest.fail("a trial's points were all read again"))
        for _ in range(10):
            step += 1
            _report(api, t1, tok1, step, rng.gauss(1.0, 0.5))
            _report(api, t2, tok2, step, 9.0 if step % 4 == 0 else rng.gauss(1.0, 0.5))
            _report(api, t2, tok2, step, 0.25, "validation")
            answer = _curves(api, exp_id)
        assert answer[t2]["training"][-1]["steps_completed"] == step
    _assert_downsampled(api, exp_id, answer)
    app.state.master.stop()


def test_a_restart_before_any_read_folds_in_only_the_reports_since_the_kept_curve(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    app, api, exp_id, [(t1, tok1), (t2, tok2)] = _experiment(data)
    for step in range(1, 31):
        _report(api, t1, tok1, step, 1.0 / step)
    _curves(api, exp_id)
    app.state.master.stop()
    app, api = _start(data)
    for step in range(31, 61):  # reported before any read of the restarted master
        _report(api, t1, tok1, step, -1.0 if step == 45 else 1.0 / step)
    with monkeypatch.context() as patch:
        patch.setattr(curves, "downsample", lambda *a: pytest.fail("a trial's points were all read again"))
        answer = _curves(api, exp_id)
    _assert_downsampled(api, exp_id, answer)
    assert any(p["metrics"]["loss"] == -1.0 for p in answer[t1]["training"])
    app.state.master.stop()


def test_a_rollback_or_a_replaced_report_rebuilds_the_curve(tmp_path: Any) -> None:
    data = tmp_path / "data"
    app, api, exp_id, [(t1, tok1), _] = _experiment(data)
    for step in range(1, 41):
        _report(api, t1, tok1, step, 1.0 / step)
    _curves(api, exp_id)
    _report(api, t1, tok1, 5, 70.0)  # a report at a step already stored replaces it
    answer = _curves(api, exp_id)
    _assert_downsampled(api, exp_id, answer)
    assert 70.0 in {p["metrics"]["loss"] for p in answer[t1]["training"]}
    with app.state.master.write() as s:  # no checkpoint: a rollback removes every report
        experiment.rollback_to_checkpoint(s, experiment.get_experiment(s, exp_id), s.get(Trial, t1))
    for step in range(1, 11):  # the run reports the same steps again, other values
        _report(api, t1, tok1, step, 3.0 * step)
    answer = _curves(api, exp_id)
    _assert_downsampled(api, exp_id, answer)
    assert answer[t1]["training"][-1]["metrics"]["loss"] == 30.0
    app.state.master.stop()
    app, api = _start(data)  # and the kept curve is that one
    assert _curves(api, exp_id) == answer
    with app.state.master.read() as s:
        assert s.scalars(select(Trial.id).where(Trial.id == t1)).first() == t1
    app.state.master.stop()


def test_a_validation_is_folded_into_the_kept_curve_as_it_is_stored(tmp_path: Any) -> None:
    """A validation stored (and a training report, for the other group) reaches the kept curves at its commit: the
    next read answers without reading any trial's points (no catch-up query), and answers what downsampling each
    full series gives. A validation that replaces a stored one (the same step) is read again."""
    data = tmp_path / "data"
    app, api, exp_id, [(t1, tok1), (t2, tok2)] = _experiment(data)
    for step in range(1, 21):
        _report(api, t1, tok1, step, 1.0 / step)
        _report(api, t2, tok2, step, 2.0 / step)
    _report(api, t1, tok1, 10, 0.5, "validation")
    _curves(api, exp_id)  # the curves of this point count exist from here on
    statements: List[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    engine = app.state.master.engine
    event.listen(engine, "before_cursor_execute", seen)
    try:
        for step in range(21, 41):
            _report(api, t1, tok1, step, 1.0 / step)
            if step % 5 == 0:
                _report(api, t1, tok1, step, -9.0 if step == 30 else 1.0 / step, "validation")
                _report(api, t2, tok2, step, 0.1 * step, "validation")
        statements.clear()
        answer = _curves(api, exp_id)
        read = [q for q in statements if "training_metrics" in q or "validation_metrics" in q]
        assert read == [], read  # neither group of either trial was caught up from the database
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    _assert_downsampled(api, exp_id, answer)
    assert -9.0 in {p["metrics"]["loss"] for p in answer[t1]["validation"]}
    assert answer[t2]["validation"][-1]["steps_completed"] == 40
    _report(api, t2, tok2, 40, 70.0, "validation")  # replaces the stored validation at step 40
    answer = _curves(api, exp_id)
    _assert_downsampled(api, exp_id, answer)
    assert [p["metrics"]["loss"] for p in answer[t2]["validation"] if p["steps_completed"] == 40] == [70.0]
    app.state.master.stop()


def test_curves_behind_are_caught_up_with_two_queries_for_all_trials(tmp_path: Any) -> None:
    """Kept curves of several trials that are behind (reports stored after a restart, before any read) are brought
    up to date with two queries per group (the counts before, the points after), not one or two per trial."""
    data = tmp_path / "data"
    app, api = _start(data)
    exp = api.post("/experiments", {"config": config(max_trials=5), "model_definition": model_def()})
    exp_id, runs = exp["experiment"]["id"], []
    with app.state.master.write() as s:
        for trial in s.scalars(select(Trial).where(Trial.experiment_id == exp_id)):
            runs.append((trial.id, allocations.start_allocation(s, trial)[1]))
    assert len(runs) == 5
    for step in range(1, 11):
        for tid, token in runs:
            _report(api, tid, token, step, tid / step)
    _curves(api, exp_id)  # kept in the database
    app.state.master.stop()
    app, api = _start(data)
    for tid, token in runs:  # stored before any read of the restarted master: its curves are behind
        _report(api, tid, token, 11, -float(tid))
        _report(api, tid, token, 11, 0.5, "validation")
    statements: List[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    engine = app.state.master.engine
    event.listen(engine, "before_cursor_execute", seen)
    try:
        answer = _curves(api, exp_id)
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    for table in ("training_metrics", "validation_metrics"):
        assert len([q for q in statements if f"FROM {table}" in q]) == 2, (table, statements)
    _assert_downsampled(api, exp_id, answer)
    assert all(answer[tid]["training"][-1]["metrics"]["loss"] == -float(tid) for tid, _ in runs)
    app.state.master.stop()
