import logging
import os
import pathlib
import signal

import numpy as np
import pytest

from determined import core, errors


def _ctx(tmp_path: pathlib.Path, lengths=(3, 7), smaller_is_better=True) -> core.Context:
    config = {"searcher": {"name": "single", "metric": "loss", "smaller_is_better": smaller_is_better}}
    return core._make_local_context(str(tmp_path / "ckpts"), list(lengths), config, {"lr": 0.5}, trial_seed=11)


def test_local_round_trip(tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="determined.core")
    with _ctx(tmp_path) as ctx:
        assert ctx.is_local
        assert ctx.info.hparams == {"lr": 0.5} and ctx.info.trial_seed == 11
        assert ctx.info.latest_checkpoint is None and ctx.info.steps_completed == 0
        assert ctx.distributed.get_size() == 1
        uuids = []
        losses = {3: 2.0, 7: 1.0}
        for op in ctx.searcher.operations():
            ctx.train.report_training_metrics(op.length, {"loss": np.float32(losses[op.length])}, [{"loss": 1}])
            ctx.train.report_validation_metrics(op.length, {"loss": losses[op.length]})
            assert ctx.train.last_validation_was_best
            with ctx.checkpoint.store_path({"steps_completed": op.length, "framework": "x"}) as (path, uuid):
                (path / "weights").write_text(f"after {op.length}")
                (path / "code").mkdir()
                (path / "code" / "model.py").write_text("pass")
            uuids.append(uuid)
            op.report_progress(op.length)
            op.report_completed(losses[op.length])
            with pytest.raises(errors.DeterminedError, match="already reported"):
                op.report_completed(1.0)

        assert ctx.searcher.completed_operations == [{"length": 3, "metric": 2.0}, {"length": 7, "metric": 1.0}]
        assert [t["steps_completed"] for t in ctx.train.training_history] == [3, 7]
        assert ctx.train.training_history[0]["metrics"] == {"loss": 2.0}
        assert isinstance(ctx.train.training_history[0]["metrics"]["loss"], float)
        assert ctx.train.training_history[0]["batch_metrics"] == [{"loss": 1}]
        reported = ctx.checkpoint.reported
        assert [r["uuid"] for r in reported] == uuids
        assert reported[1]["resources"].pop("metadata.json") > 0
        assert reported[1]["resources"] == {"code/": 0, "code/model.py": 4, "weights": 7}
        assert reported[1]["metadata"] == {"steps_completed": 7, "framework": "x"}
        assert reported[1]["framework"] == "x"
        for uuid, length in zip(uuids, (3, 7)):
            with ctx.checkpoint.restore_path(uuid) as path:
                assert (path / "weights").read_text() == f"after {length}"
        dst = tmp_path / "dl"
        ctx.checkpoint.download(uuids[0], str(dst))
        assert (dst / "code" / "model.py").read_text() == "pass"
    assert "validation metrics after 7 batches" in caplog.text


def test_is_best_follows_smaller_is_better(tmp_path: pathlib.Path) -> None:
    ctx = _ctx(tmp_path, smaller_is_better=False)
    answers = []
    for value in (1.0, 0.5, 2.0, float("nan"), 2.0):
        ctx.train.report_validation_metrics(1, {"loss": value})
        answers.append(ctx.train.last_validation_was_best)
    assert answers == [True, False, True, False, False]
    # without the searcher metric a validation is recorded (as Determined 0.26/0.38 did) but never the best
    ctx.train.report_validation_metrics(2, {"acc": 1.0})
    assert ctx.train.last_validation_was_best is False


def test_metric_values_are_cleaned(tmp_path: pathlib.Path) -> None:
    ctx = _ctx(tmp_path)
    ctx.train.report_training_metrics(
        1,
        {
            "np": np.float64(1.5),
            "int": np.int64(3),
            "arr": np.array([2.5]),
            "nan": float("nan"),
            "inf": np.float32("inf"),
            "text": "hello",
            "nested": {"a": [np.float32(0.5), float("-inf")]},
            "flag": True,
        },
    )
    metrics = ctx.train.training_history[-1]["metrics"]
    assert metrics == {
        "np": 1.5, "int": 3, "arr": 2.5, "nan": None, "inf": None, "text": "hello",
        "nested": {"a": [0.5, None]}, "flag": True,
    }
    assert type(metrics["int"]) is int
    with pytest.raises(TypeError, match="not a number nor JSON-serialisable"):
        ctx.train.report_training_metrics(1, {"bad": object()})


def test_store_path_failure_reports_nothing(tmp_path: pathlib.Path) -> None:
    ctx = _ctx(tmp_path)
    with pytest.raises(RuntimeError, match="boom"):
        with ctx.checkpoint.store_path({"steps_completed": 1}) as (path, uuid):
            (path / "half").write_text("x")
            raise RuntimeError("boom")
    assert ctx.checkpoint.reported == []
    assert not (tmp_path / "ckpts" / uuid).exists()
    assert not path.exists()
    # Off the platform nothing resumes from a checkpoint, so steps_completed is optional (as Determined 0.38).
    with ctx.checkpoint.store_path({"epoch": 2}) as (path, uuid):
        (path / "w").write_text("1")
    assert ctx.checkpoint.reported[-1]["steps_completed"] == 0
    assert ctx.checkpoint.get_metadata(uuid) == {"epoch": 2}


def test_upload_an_existing_directory(tmp_path: pathlib.Path) -> None:
    ctx = _ctx(tmp_path)
    src = tmp_path / "mine"
    src.mkdir()
    (src / "f").write_text("data")
    uuid = ctx.checkpoint.upload(str(src), {"steps_completed": 4, "format": "raw"})
    assert (tmp_path / "ckpts" / uuid / "f").read_text() == "data"
    assert ctx.checkpoint.reported[0]["steps_completed"] == 4
    assert ctx.checkpoint.reported[0]["format"] == "raw"


def test_searcher_requires_completion(tmp_path: pathlib.Path) -> None:
    ctx = _ctx(tmp_path)
    ops = ctx.searcher.operations()
    first = next(ops)
    assert first.length == 3
    with pytest.raises(errors.DeterminedError, match="was not reported completed"):
        next(ops)
    with pytest.raises(errors.DeterminedError, match="finite number"):
        first.report_completed(float("nan"))


def test_sigterm_preempts_and_stops_the_operations(tmp_path: pathlib.Path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    ctx = _ctx(tmp_path, lengths=(1, 2, 3))
    ctx.preempt.close()
    ctx.preempt = core.PreemptContext(None, "local", watch_sigterm=True)
    ctx.searcher = core.SearcherContext(None, 0, ctx.distributed, ctx.preempt, local_lengths=[1, 2, 3])
    try:
        seen = []
        for op in ctx.searcher.operations():
            seen.append(op.length)
            assert not ctx.preempt.should_preempt()
            os.kill(os.getpid(), signal.SIGTERM)
            assert ctx.preempt.should_preempt()
        assert seen == [1]  # the unfinished operation is dropped once preempted
    finally:
        ctx.close()
    assert signal.getsignal(signal.SIGTERM) == before


def test_early_exit_reasons(tmp_path: pathlib.Path) -> None:
    ctx = _ctx(tmp_path)
    ctx.train.report_early_exit("INVALID_HP")
    assert ctx.train.early_exit_reason == "INVALID_HP"
    with pytest.raises(errors.DeterminedError, match="ERRORED, USER_CANCELED, INVALID_HP"):
        ctx.train.report_early_exit("BORED")


def test_init_without_master_is_local(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DET_DATA_DIR", str(tmp_path / "data"))
    config = {"searcher": {"name": "single", "metric": "m", "max_length": {"batches": 9}}}
    with core.init(config=config, checkpoint_dir=str(tmp_path / "checkpoints")) as ctx:
        assert ctx.is_local
        assert [op.length for op in _complete_all(ctx)] == [9]
        with ctx.checkpoint.store_path({"steps_completed": 9}) as (path, uuid):
            (path / "x").write_text("1")
    assert (tmp_path / "checkpoints" / uuid / "x").exists()
    with core.init() as ctx:  # Determined 0.38 off the platform: one operation of 1, checkpoints in the data dir
        assert [op.length for op in _complete_all(ctx)] == [1]
        with ctx.checkpoint.store_path() as (path, uuid):
            (path / "y").write_text("2")
    assert (tmp_path / "data" / "checkpoints" / uuid / "y").read_text() == "2"


def test_init_rejects_local_arguments_inside_a_trial(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DET_TRIAL_ID", "1")
    with pytest.raises(errors.DeterminedError, match="checkpoint_dir cannot be given inside a trial"):
        core.init(checkpoint_dir="/tmp/x")
    with pytest.raises(errors.DeterminedError, match="DET_MASTER is not"):
        core.init()


def test_resume_from_a_local_checkpoint(tmp_path: pathlib.Path) -> None:
    first = _ctx(tmp_path)
    with first.checkpoint.store_path({"steps_completed": 3}) as (path, uuid):
        (path / "state").write_text("3")
    second = core._make_local_context(
        str(tmp_path / "ckpts"), [5], {}, {}, latest_checkpoint=uuid, steps_completed=3
    )
    assert second.info.latest_checkpoint == uuid and second.info.steps_completed == 3
    with second.checkpoint.restore_path(uuid) as path:
        assert (path / "state").read_text() == "3"
    with pytest.raises(errors.DeterminedError, match="is not a directory"):
        core._make_local_context(str(tmp_path / "ckpts"), [5], {}, {}, latest_checkpoint="missing")
    with pytest.raises(errors.DeterminedError, match="ints >= 0"):
        core._make_local_context(str(tmp_path / "ckpts"), [-1], {}, {})


def _complete_all(ctx: core.Context):  # type: ignore[no-untyped-def]
    done = []
    for op in ctx.searcher.operations():
        op.report_completed(0.0)
        done.append(op)
    return done


def test_distributed_context() -> None:
    d = core.DistributedContext()
    assert (d.get_rank(), d.get_size(), d.get_local_rank(), d.get_local_size()) == (0, 1, 0, 1)
    assert (d.get_cross_rank(), d.get_cross_size()) == (0, 1)
    assert d.allgather({"a": 1}) == [{"a": 1}]
    assert d.gather(5) == [5]
    assert d.broadcast("x") == "x"
    with pytest.raises(errors.DeterminedError, match="rank must be an int in"):
        core.DistributedContext(rank=2, size=2)
    with pytest.raises(errors.DeterminedError, match="chief_ip is required"):
        core.DistributedContext(rank=1, size=2, local_size=1, cross_rank=1, cross_size=2)


class _FakeCollectives:
    """Stands in for a launcher's backend: rank 0's object is 'chief', others are what this rank gave."""

    def __init__(self, rank: int, size: int) -> None:
        self.rank, self.size = rank, size

    def allgather(self, obj):  # type: ignore[no-untyped-def]
        return [("chief-value" if r == 0 else obj) if r != self.rank else obj for r in range(self.size)]

    def close(self) -> None:
        pass


def test_gather_and_broadcast_use_the_backend() -> None:
    worker = core.DistributedContext(rank=1, size=2, collectives=_FakeCollectives(1, 2))
    assert worker.gather("mine") is None
    assert worker.broadcast("ignored") == "chief-value"
    chief = core.DistributedContext(rank=0, size=2, collectives=_FakeCollectives(0, 2))
    assert chief.gather("c") == ["c", "c"]
    assert chief.allgather(1) == [1, 1]


def test_non_chief_ranks_do_not_report(tmp_path: pathlib.Path) -> None:
    worker = core.DistributedContext(rank=1, size=2, collectives=_FakeCollectives(1, 2))
    ctx = core._make_local_context(str(tmp_path), [], {}, {}, distributed=worker)
    ctx.train.report_training_metrics(1, {"loss": 1.0})
    ctx.train.report_validation_metrics(1, {"loss": 1.0})
    assert ctx.train.training_history == [] and ctx.train.validation_history == []
    with pytest.raises(errors.DeterminedError, match="chief \\(rank 0\\) only; this is rank 1"):
        with ctx.checkpoint.store_path({"steps_completed": 1}):
            pass
