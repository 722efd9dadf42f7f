"""The master's half of a custom search (determined.searcher._custom) and the JSON the runner exchanges with it."""
import json
import uuid

import pytest

from determined import searcher
from determined.config import InvalidExperimentConfig, load_experiment_config
from determined.searcher import Close, Create, CustomSearch, ExitedReason, Progress, SearchContext, Shutdown, ValidateAfter
from determined.searcher._wire import WireError, operation_to_wire, operations_from_wire


def test_the_config_takes_a_custom_searcher_with_its_unit() -> None:
    cfg = load_experiment_config({"entrypoint": "model_def:T",
                                  "searcher": {"name": "custom", "metric": "validation_loss", "unit": "epochs"}})
    assert cfg["searcher"] == {"name": "custom", "metric": "validation_loss", "smaller_is_better": True,
                               "unit": "epochs", "source_trial_id": None, "source_checkpoint_uuid": None}
    method = searcher.make_search_method(cfg["searcher"])
    assert isinstance(method, CustomSearch) and method.unit == "epochs"
    assert searcher.planned_trials(cfg) == 0
    assert "its search runner (LocalSearchRunner) decides" in searcher.format_preview(searcher.preview(cfg))
    with pytest.raises(InvalidExperimentConfig, match="searcher.unit"):
        load_experiment_config({"entrypoint": "model_def:T",
                                "searcher": {"name": "custom", "metric": "loss", "unit": "steps"}})


def test_events_queue_until_acknowledged_and_posted_operations_come_back() -> None:
    ctx = SearchContext(0, {})
    method = CustomSearch()
    assert method.initial_operations(ctx) == []
    assert method.pending_events() == [{"id": 1, "initialOperations": {}}]
    ops = [Create("a", {"x": 1}), ValidateAfter("a", 5), Progress(0.5)]
    assert method.on_operations_posted(ctx, 1, ops) == ops[:2]  # Progress is taken here
    assert method.progress() == 0.5 and method.pending_events() == []
    assert method.on_operations_posted(ctx, 1, ops) == []  # an answer repeated after a runner's restart
    method.on_trial_created(ctx, "a")
    method.on_trial_progress(ctx, "a", 0.2)
    method.on_trial_progress(ctx, "a", 0.4)  # coalesced: one pending report per trial, the newest
    method.on_validation_completed(ctx, "a", 0.25, 5)
    method.on_trial_exited_early(ctx, "a", ExitedReason.ERRORED)
    kinds = [next(k for k in e if k != "id") for e in method.pending_events()]
    assert kinds == ["trialCreated", "trialProgress", "validationCompleted", "trialExitedEarly"]
    assert method.pending_events()[1]["trialProgress"] == {"requestId": "a", "partialUnits": 0.4}
    restored = CustomSearch()
    restored.restore(json.loads(json.dumps(method.snapshot())))
    assert restored.pending_events() == method.pending_events()
    assert restored.on_operations_posted(ctx, 4, [Close("a")]) == [Close("a")]  # acknowledges 2 to 4
    assert [e["id"] for e in restored.pending_events()] == [5]


def test_posted_operations_are_checked_against_the_trials() -> None:
    method = CustomSearch()
    problems = method.check_operations([Create("a", {}), ValidateAfter("a", 0), Close("b"), Create("c", {})],
                                       known=["c"])
    assert problems == [
        "searcherOperations[1]: length must be a positive number of batches, got 0",
        "searcherOperations[2]: no trial with request id b; create it first (Create)",
        "searcherOperations[3]: a trial with request id c exists already; use a new id (e.g. uuid.uuid4())",
    ]


def test_operations_round_trip_through_the_wire_format() -> None:
    rid = uuid.uuid4()
    ops = [Create(rid, {"lr": 0.1, "nested": {"a": [1, 2]}}, {"uuid": "ckpt"}), ValidateAfter(rid, 7), Close(rid),
           Shutdown(cancel=True), Progress(0.75)]
    wire = [operation_to_wire(op) for op in ops]
    assert wire[1] == {"trialOperation": {"validateAfter": {"requestId": str(rid), "length": "7"}}}
    back = operations_from_wire(json.loads(json.dumps(wire)))
    assert back == [Create(str(rid), {"lr": 0.1, "nested": {"a": [1, 2]}}, {"uuid": "ckpt"}),
                    ValidateAfter(str(rid), 7), Close(str(rid)), Shutdown(cancel=True), Progress(0.75)]
    assert searcher.operation_from_dict(searcher.operation_to_dict(ops[0])) == back[0]  # uuid ids stored as text


@pytest.mark.parametrize("bad,message", [
    ({"shutDown": {}, "closeTrial": {"requestId": "a"}}, "exactly one of"),
    ({"trialOperation": {"validateAfter": {"requestId": "a", "length": -1}}}, "positive integer"),
    ({"createTrial": {"requestId": "x" * 200, "hyperparams": "{}"}}, "at most 128"),
    ({"createTrial": {"requestId": "a", "hyperparams": "[1]"}}, "mapping of hyperparameter names"),
    ({"setSearcherProgress": {"progress": "half"}}, "a number from 0 to 1"),
    ({"createTrial": {"requestId": "a", "hyperparams": "{}", "checkpoint": {"path": "/etc"}}}, "uuid"),
])
def test_bad_operations_are_refused_with_the_field_named(bad: dict, message: str) -> None:
    with pytest.raises(WireError, match=message):
        operations_from_wire([bad])
    with pytest.raises(WireError, match="more than"):
        operations_from_wire([{"closeTrial": {"requestId": "a"}}] * 10_001)
