"""One order of "best" with deliberate ties: GC, the SDK, the CLI's ranking and the run's summary agree.

The documented order (docs/sdk.md, determined/common/checkpoint_order.py): the searcher metric in its
direction, then more batches first, then the lower trial id, then the uuid. Only COMPLETED checkpoints are "best".
Rows are made through the trial protocol routes, in an order chosen so that row order, insertion order and uuid
order all disagree with it; the same test runs on PostgreSQL in the suite's second stage.
"""
import io
import pathlib
from typing import Any, Dict, List, Optional, Tuple

from determined.common.api import Session
from determined.experimental import _follow
from determined.experimental.client import Determined
from determined.experimental.client._records import describe_experiment
from determined.master import in_process_session

from .test_checkpoint_routes import make_experiment, report


def _uuid(head: str) -> str:
    return f"{head * 8}-0000-4000-8000-000000000000"


def _summary(session: Any, experiment_id: int) -> str:
    from rich.console import Console

    out = io.StringIO()
    _follow.print_summary(session, describe_experiment(session, experiment_id), Console(file=out, width=250))
    return out.getvalue()


def _stored_best(session: Session, exp_id: int) -> Tuple[Optional[int], Optional[float], Dict[int, Any]]:
    """The experiment's stored best trial and value, and each trial's stored best value (what the API sends)."""
    desc = session.get(f"/experiments/{exp_id}")
    exp = desc["experiment"]
    return exp["best_trial_id"], exp["best_validation"], {t["id"]: t["best_validation"] for t in desc["trials"]}


def _validate(session: Session, trial_id: int, steps: int, loss: float) -> bool:
    answer = session.post(f"/trials/{trial_id}/validation_metrics", {"steps_completed": steps, "metrics": {"loss": loss}})
    return bool(answer["is_best"])


def _keep(session: Session, exp_id: int, **policy: int) -> List[str]:
    preview = session.get(f"/experiments/{exp_id}/preview_gc", policy)
    return sorted(c["uuid"] for c in preview["keep"])


def test_ties_break_the_same_way_everywhere(det_data_dir: pathlib.Path) -> None:
    session = in_process_session(det_data_dir)
    desc = make_experiment(session, trials=3)  # searcher metric `loss`, smaller is better
    exp_id = desc["experiment"]["id"]
    t1, t2, t3 = sorted(t["id"] for t in desc["trials"])
    # Every validation below has loss 0.2 but for c10. Reported in an order, and with uuids, that disagree with
    # the documented order: t2 reaches 0.2 first; uuids rise against it.
    b20 = report(session, det_data_dir, t2, 20, loss=0.2, uuid=_uuid("1"))
    a10 = report(session, det_data_dir, t1, 10, loss=0.2, uuid=_uuid("0"))
    a20 = report(session, det_data_dir, t1, 20, loss=0.2, uuid=_uuid("f"))
    c20y = report(session, det_data_dir, t3, 20, loss=0.2, uuid=_uuid("c"))
    c20x = report(session, det_data_dir, t3, 20, uuid=_uuid("4"))  # a second checkpoint at the same steps
    c10 = report(session, det_data_dir, t3, 10, loss=0.5, uuid=_uuid("2"))
    best_first = [a20, b20, c20x, c20y, a10, c10]  # 0.2 at 20 by trial then uuid, 0.2 at 10, then 0.5
    # The stored best (the experiment's best_trial_id, what the UI and `det e describe` show) is the same: t2
    # reached 0.2 first, but t1's 0.2 at batch 20 ranks first.
    assert _stored_best(session, exp_id) == (t1, 0.2, {t1: 0.2, t2: 0.2, t3: 0.2})

    # GC (through preview_gc: the same function that deletes) keeps the first of that order.
    none = {"save_experiment_best": 0, "save_trial_best": 0, "save_trial_latest": 0}
    assert _keep(session, exp_id, **{**none, "save_experiment_best": 1}) == [a20]
    assert _keep(session, exp_id, **{**none, "save_experiment_best": 3}) == sorted([a20, b20, c20x])
    assert _keep(session, exp_id, **{**none, "save_trial_best": 1}) == sorted([a20, b20, c20x])
    session.close()

    d = Determined()
    exp = d.get_experiment(exp_id)
    assert [c.uuid for c in exp.list_checkpoints()] == best_first
    assert exp.top_checkpoint().uuid == a20
    assert [c.uuid for c in exp.top_n_checkpoints(3)] == [a20, b20, c20x]
    assert d.get_trial(t1).top_checkpoint().uuid == a20, "the later of two equal checkpoints"
    assert d.get_trial(t3).top_checkpoint().uuid == c20x, "same metric and steps: the uuid decides"
    assert [c.uuid for c in d.get_trial(t3).list_checkpoints()] == [c20x, c20y, c10]

    text = _summary(d._session, exp_id)
    assert f"Best trial: {t1}  loss = 0.2" in text, text
    assert f"Best checkpoint: {a20} (trial {t1}, batch 20, loss = 0.2)" in text, text

    # The best is deleted (once the run ended, GC keeping everything): every reader moves to the next one, never
    # printing or returning a DELETED checkpoint.
    d._session.patch(f"/experiments/{exp_id}", {"checkpoint_storage": {"save_trial_latest": 10}})
    exp.cancel()
    assert [c.uuid for c in exp.list_checkpoints()] == best_first, "GC kept them all"
    d.get_checkpoint(a20).delete()
    assert exp.top_checkpoint().uuid == b20
    assert [c.uuid for c in exp.list_checkpoints()] == best_first[1:]
    assert d.get_trial(t1).top_checkpoint().uuid == a10
    text = _summary(d._session, exp_id)
    assert f"Best checkpoint: {b20} (trial {t2}, batch 20, loss = 0.2)" in text, text
    assert f"Best trial: {t1}  loss = 0.2" in text, "trial 1's validation at batch 20 still ranks first"
    session = in_process_session(det_data_dir)
    assert _keep(session, exp_id, **{**none, "save_experiment_best": 1}) == [b20]
    session.close()


def test_larger_is_better_keeps_the_tie_breaks(det_data_dir: pathlib.Path) -> None:
    """With smaller_is_better false only the metric's direction turns; more batches and the lower trial still win."""
    session = in_process_session(det_data_dir)
    desc = make_experiment(session, trials=2, searcher={"smaller_is_better": False})
    exp_id = desc["experiment"]["id"]
    t1, t2 = sorted(t["id"] for t in desc["trials"])
    b30 = report(session, det_data_dir, t2, 30, loss=0.9, uuid=_uuid("0"))
    a30 = report(session, det_data_dir, t1, 30, loss=0.9, uuid=_uuid("e"))
    a10 = report(session, det_data_dir, t1, 10, loss=0.1, uuid=_uuid("1"))
    unvalidated = report(session, det_data_dir, t2, 40, uuid=_uuid("2"))
    assert _keep(session, exp_id, save_experiment_best=1, save_trial_best=0, save_trial_latest=0) == [a30]
    session.close()
    d = Determined()
    exp = d.get_experiment(exp_id)
    assert [c.uuid for c in exp.list_checkpoints()] == [a30, b30, a10, unvalidated]
    assert [c.uuid for c in exp.top_n_checkpoints(2)] == [a30, b30]
    assert _stored_best(d._session, exp_id) == (t1, 0.9, {t1: 0.9, t2: 0.9})
    text = _summary(d._session, exp_id)
    assert f"Best trial: {t1}  loss = 0.9" in text and f"Best checkpoint: {a30} (trial {t1}" in text, text


def test_the_stored_best_follows_the_order_as_reports_come(det_data_dir: pathlib.Path) -> None:
    """Report by report, the stored best and each report's `is_best` follow the order, ties included; a report at
    batches already reported (a restarted run) replaces the earlier one, as it does for the best checkpoint."""
    session = in_process_session(det_data_dir)
    desc = make_experiment(session, trials=3)
    exp_id = desc["experiment"]["id"]
    t1, t2, t3 = sorted(t["id"] for t in desc["trials"])
    assert _stored_best(session, exp_id) == (None, None, {t1: None, t2: None, t3: None})
    assert _validate(session, t2, 10, 0.2) is True
    assert _validate(session, t3, 10, 0.2) is False, "a tie on the metric and batches: the lower trial stays best"
    assert _stored_best(session, exp_id)[:2] == (t2, 0.2)
    assert _validate(session, t1, 10, 0.2) is True, "a tie on the metric and batches: the lower trial becomes best"
    assert _stored_best(session, exp_id)[:2] == (t1, 0.2)
    assert _validate(session, t3, 20, 0.2) is True, "a tie on the metric: more batches rank first"
    assert _stored_best(session, exp_id)[:2] == (t3, 0.2)
    assert _validate(session, t2, 5, 0.2) is False and _validate(session, t2, 30, 0.3) is False
    assert _stored_best(session, exp_id) == (t3, 0.2, {t1: 0.2, t2: 0.2, t3: 0.2})
    assert _validate(session, t3, 25, 0.15) is True
    # t3 reports batch 25 again, worse (a restarted run): its 0.15 no longer counts, and its 0.2 at batch 20 ranks
    # first again.
    assert _validate(session, t3, 25, 0.4) is False
    assert _stored_best(session, exp_id) == (t3, 0.2, {t1: 0.2, t2: 0.2, t3: 0.2})
    assert _validate(session, t2, 30, 0.2) is True, "batch 30 reported again, now the best"
    assert _stored_best(session, exp_id) == (t2, 0.2, {t1: 0.2, t2: 0.2, t3: 0.2})
    assert _validate(session, t3, 40, 0.1) is True
    assert _stored_best(session, exp_id) == (t3, 0.1, {t1: 0.2, t2: 0.2, t3: 0.1})
    assert session.get(f"/trials/{t1}/searcher/best_validation")["metric"] == 0.1
    session.close()


def _checkpoint_json(uuid: str, trial_id: int, steps: int, value: Any, state: str = "COMPLETED") -> Dict[str, Any]:
    return {"uuid": uuid, "trial_id": trial_id, "steps_completed": steps, "state": state,
            "validation_metrics": {} if value is None else {"m": value}}


def test_the_order_itself() -> None:
    from determined.common import checkpoint_order
    from determined.experimental.client import _ranking

    rows = [
        _checkpoint_json(_uuid("9"), 2, 10, 0.5),
        _checkpoint_json(_uuid("8"), 1, 10, 0.5),
        _checkpoint_json(_uuid("7"), 1, 10, 0.5),
        _checkpoint_json(_uuid("6"), 1, 20, 0.5),
        _checkpoint_json(_uuid("5"), 3, 30, 0.7),
        _checkpoint_json(_uuid("4"), 3, 40, float("nan")),  # no usable value: not ranked
        _checkpoint_json(_uuid("3"), 3, 50, True),  # a boolean is not a metric value
        _checkpoint_json(_uuid("0"), 1, 90, 0.1, state="DELETED"),
    ]
    ranked = [c["uuid"] for c in _ranking.ranked(rows, "m", smaller_is_better=True)]
    assert ranked == [_uuid("6"), _uuid("7"), _uuid("8"), _uuid("9"), _uuid("5")]
    # Any input order gives the same answer.
    assert [c["uuid"] for c in _ranking.ranked(rows[::-1], "m", smaller_is_better=True)] == ranked
    assert [c["uuid"] for c in _ranking.ranked(rows, "m", smaller_is_better=False)][:2] == [_uuid("5"), _uuid("6")]
    assert [c["uuid"] for c in _ranking.best_per_trial(rows, "m", True)] == [_uuid("6"), _uuid("9"), _uuid("5")]
    key = checkpoint_order.checkpoint_key
    assert key(None, True, 100, 1, "a") > key(1e300, True, 0, 9, "z"), "no value ranks last"
    assert key(float("inf"), False, 0, 1, "a") < key(1.0, False, 0, 1, "a")
    assert checkpoint_order.metric_value(float("nan")) is None and checkpoint_order.metric_value(False) is None
    assert checkpoint_order.metric_value(3) == 3.0
