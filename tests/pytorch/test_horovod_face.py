"""`determined.horovod.hvd` in one process (one slot): Horovod's one-process answers, and clear refusals.

The two-rank behaviour runs inside a PyTorchTrial in tests/distributed/test_ddp_training.py
(test_horovod_handle_of_0_20_trials_runs_over_the_process_group).
"""
import pytest
import torch

from determined import errors, horovod


@pytest.fixture
def hvd(monkeypatch: pytest.MonkeyPatch) -> horovod._PolyHorovod:
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "DET_CROSS_RANK", "DET_CROSS_SIZE"):
        monkeypatch.delenv(name, raising=False)
    return horovod._PolyHorovod()


def test_one_process_collectives_return_their_input(hvd: horovod._PolyHorovod) -> None:
    hvd.init()
    assert (hvd.size(), hvd.rank(), hvd.local_size(), hvd.local_rank(), hvd.cross_size(), hvd.cross_rank()) == (
        1, 0, 1, 0, 1, 0)
    t = torch.tensor([3.0, 5.0], requires_grad=True)
    out = hvd.allreduce(t, name="x")
    assert torch.equal(out, torch.tensor([3.0, 5.0])) and out is not t and not out.requires_grad
    assert hvd.allreduce(torch.tensor([2.0]), op=hvd.Sum, postscale_factor=3.0).item() == 6.0
    assert torch.equal(hvd.allgather(torch.ones(2, 3)), torch.ones(2, 3))
    assert hvd.broadcast(torch.tensor([7]), root_rank=0).item() == 7
    assert hvd.broadcast_object({"a": 1}) == {"a": 1} and hvd.allgather_object(4) == [4]
    model = torch.nn.Linear(2, 1)
    before = model.weight.detach().clone()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    assert torch.equal(model.weight, before)


def test_types_and_refusals_name_the_alternative(hvd: horovod._PolyHorovod) -> None:
    with pytest.raises(errors.DeterminedError, match="tf.distribute"):
        hvd.require_horovod_type("tensorflow", "a Keras trial")
    hvd.require_horovod_type("torch", "the trial")
    with pytest.raises(errors.DeterminedError, match="The reason for the first call was 'the trial'"):
        hvd.require_horovod_type("tensorflow.keras", "later")
    with pytest.raises(ValueError, match="unknown horovod type"):
        hvd.require_horovod_type("mxnet", "x")
    with pytest.raises(AttributeError, match="DistributedOptimizer.*wrap_optimizer"):
        hvd.DistributedOptimizer
    with pytest.raises(errors.DeterminedError, match="Adasum"):
        hvd.allreduce(torch.ones(1), op=hvd.Adasum)


def test_a_worker_without_the_process_group_is_told_where_hvd_works(
        hvd: horovod._PolyHorovod, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert not hvd.is_initialized()
    with pytest.raises(errors.DeterminedError, match="inside a PyTorchTrial"):
        hvd.allreduce(torch.ones(1))


def test_module_level_handle_is_the_one_trial_code_imports() -> None:
    from determined.horovod import hvd as imported

    assert imported is horovod.hvd and "allreduce" in dir(imported)
