"""The master's side of a custom search (Determined 0.19.6 to 0.37): the events a search runner fetches and the
operations it posts back. JSON in and out; the search method itself is determined.searcher's `custom` method,
driven by experiment.feed_searcher like every other one."""
from typing import Any, Dict, List

from sqlalchemy import select
from sqlalchemy.orm import Session

from determined import searcher
from determined.master.lifecycle import states
from determined.master.db import Checkpoint, Experiment, Trial
from determined.master.lifecycle.experiment import feed_searcher, load_searcher
from determined.master.problems import RequestProblem
from determined.searcher._custom import CustomSearch, experiment_inactive, is_custom
from determined.searcher._wire import WireError, operations_from_wire

# Events are queued while the experiment runs; the runner sees that it stopped running from this event.
_RUNNING = (states.ACTIVE, states.STOPPING_COMPLETED, states.STOPPING_ERROR)


def _custom_method(exp: Experiment) -> CustomSearch:
    if not is_custom(exp.config.get("searcher")):
        raise RequestProblem(400, f"experiment {exp.id} does not have a custom searcher",
                             [f"searcher.name: is {exp.config.get('searcher', {}).get('name')!r}; only an experiment "
                              "with searcher.name: custom talks to a search runner"])
    method = load_searcher(exp).method
    assert isinstance(method, CustomSearch)
    return method


def runner_events(exp: Experiment) -> List[Dict[str, Any]]:
    """The events the runner has not acknowledged, then `experimentInactive` when the experiment is paused or over."""
    events = _custom_method(exp).pending_events() if exp.searcher_snapshot is not None else []
    if exp.state not in _RUNNING:
        events.append(experiment_inactive(exp.state))
    return events


def post_operations(s: Session, exp: Experiment, body: Any) -> int:
    """Carry out the operations a runner posted in answer to an event (also while the experiment is paused: its new
    trials wait, paused); returns how many were taken (0 for a repeated answer, or for an experiment whose search is
    over or that is being cancelled: then the event is only acknowledged)."""
    method = _custom_method(exp)
    if not isinstance(body, dict):
        raise RequestProblem(400, "invalid searcher operations", ["body: expected {searcherOperations: [...], "
                                                                  "triggeredByEvent: {id: <event id>}}"])
    trigger = body.get("triggeredByEvent")
    event_id = trigger.get("id") if isinstance(trigger, dict) else None
    if isinstance(event_id, bool) or not isinstance(event_id, int):
        raise RequestProblem(400, "invalid searcher operations",
                             ["triggeredByEvent.id: expected the id of the event the operations answer"])
    try:
        ops = operations_from_wire(body.get("searcherOperations", []))
    except WireError as e:
        raise RequestProblem(400, "invalid searcher operations", [str(e)]) from None
    if exp.searcher_shutdown or exp.state in states.EXPERIMENT_TERMINAL or exp.state == states.STOPPING_CANCELED:
        if method.acknowledge(event_id):  # the search is over: nothing more is carried out
            snapshot = dict(exp.searcher_snapshot or {})
            snapshot["method"] = method.snapshot()
            exp.searcher_snapshot = snapshot
        return 0
    if not any(e["id"] == event_id for e in method.pending_events()):
        return 0  # answered before (a runner that resumed posts its last answer again)
    known = list(s.scalars(select(Trial.request_id).where(Trial.experiment_id == exp.id)))
    problems = method.check_operations([op for op in ops if not isinstance(op, searcher.Progress)], known)
    for i, op in enumerate(ops):
        if isinstance(op, searcher.Create) and op.checkpoint is not None:
            ckpt = s.scalars(select(Checkpoint).where(Checkpoint.uuid == op.checkpoint["uuid"])).first()
            if ckpt is None or ckpt.state != states.COMPLETED:
                problems.append(f"searcherOperations[{i}].createTrial.checkpoint: no completed checkpoint "
                                f"{op.checkpoint['uuid']}")
    if problems:
        raise RequestProblem(400, "invalid searcher operations", problems)
    feed_searcher(s, exp, [("operations_posted", {"event_id": event_id,
                                                  "operations": [searcher.operation_to_dict(op) for op in ops]})])
    return len(ops)
