import pathlib

import pytest

import determined as det
from determined import core, errors


class _NoCollectives:
    def allgather(self, obj):  # type: ignore[no-untyped-def]
        raise AssertionError("no collective expected")

    def close(self) -> None:
        pass


def _context(tmp_path: pathlib.Path, hparams: dict, size: int = 1) -> det.TrialContext:
    distributed = core.DistributedContext(rank=0, size=size, local_size=size, collectives=_NoCollectives())
    config = {"searcher": {"metric": "loss"}, "data": {"url": "http://x"}}
    ctx = core._make_local_context(str(tmp_path), [], config, hparams, trial_seed=7, distributed=distributed)
    return det.TrialContext(ctx, config, hparams, 7)


def test_accessors(tmp_path: pathlib.Path) -> None:
    ctx = _context(tmp_path, {"global_batch_size": 32, "lr": 0.1})
    assert ctx.get_hparams() == {"global_batch_size": 32, "lr": 0.1}
    assert ctx.get_hparam("lr") == 0.1
    assert ctx.get_data_config() == {"url": "http://x"}
    assert ctx.get_experiment_config()["searcher"] == {"metric": "loss"}
    assert ctx.get_trial_seed() == 7
    assert ctx.get_trial_id() == 0 and ctx.get_experiment_id() == 0
    assert ctx.get_per_slot_batch_size() == 32 and ctx.get_global_batch_size() == 32
    assert ctx.distributed.get_rank() == 0
    assert ctx.get_stop_requested() is False
    ctx.set_stop_requested(True)
    assert ctx.get_stop_requested() is True
    with pytest.raises(errors.DeterminedError, match="takes a bool"):
        ctx.set_stop_requested("yes")  # type: ignore[arg-type]


def test_hparam_errors(tmp_path: pathlib.Path) -> None:
    ctx = _context(tmp_path, {"global_batch_size": 32, "lr": 0.1, "dropout": 0.5})
    with pytest.raises(KeyError, match="'momentum' is not in the experiment config.*dropout, global_batch_size, lr"):
        ctx.get_hparam("momentum")
    with pytest.raises(errors.DeterminedError, match=r"get_per_slot_batch_size\(\).*get_global_batch_size\(\)"):
        ctx.get_hparam("global_batch_size")


def test_batch_sizes_across_slots(tmp_path: pathlib.Path) -> None:
    ctx = _context(tmp_path, {"global_batch_size": 32}, size=3)
    assert ctx.get_per_slot_batch_size() == 10
    assert ctx.get_global_batch_size() == 30
    assert _context(tmp_path, {"global_batch_size": 64.0}, size=4).get_per_slot_batch_size() == 16
    with pytest.raises(errors.DeterminedError, match=r"global_batch_size \(2\) must be at least the number of slots \(3\)"):
        _context(tmp_path, {"global_batch_size": 2}, size=3)
    with pytest.raises(errors.InvalidTrialError, match="global_batch_size: got 'big'; a positive int"):
        _context(tmp_path, {"global_batch_size": "big"})
    missing = _context(tmp_path, {"lr": 1})  # a trial that never asks for its batch size needs none (0.38)
    with pytest.raises(errors.InvalidTrialError, match="global_batch_size: missing; the trial asks for its batch size"):
        missing.get_per_slot_batch_size()
    with pytest.raises(errors.InvalidTrialError, match="add it under hyperparameters, e.g."):
        missing.get_global_batch_size()
