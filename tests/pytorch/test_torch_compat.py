"""torch 1.x idioms of Trial code on the torch 2.x installed here (determined/pytorch/_torch_compat.py)."""
import io

import pytest
import torch

import determined.pytorch  # noqa: F401 -- installs the shims
from torch.optim import lr_scheduler


def _optimizer() -> torch.optim.Optimizer:
    return torch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=0.1)


def test_reduce_lr_on_plateau_takes_verbose_and_prints_each_reduction(capsys: pytest.CaptureFixture) -> None:
    """0.20's word_language_model: ReduceLROnPlateau(optimizer, "min", factor=..., patience=..., verbose=True)."""
    opt = _optimizer()
    sched = lr_scheduler.ReduceLROnPlateau(opt, "min", factor=0.5, patience=0, verbose=True)
    sched.step(1.0)
    sched.step(2.0)  # no improvement: the rate halves
    assert opt.param_groups[0]["lr"] == pytest.approx(0.05)
    assert "Adjusting learning rate of group 0 to 5.0000e-02." in capsys.readouterr().out
    quiet = lr_scheduler.ReduceLROnPlateau(_optimizer(), "min", factor=0.5, patience=0, verbose=False)
    quiet.step(1.0)
    quiet.step(2.0)
    assert capsys.readouterr().out == ""


def test_step_lr_and_a_subclass_passing_verbose_to_its_base(capsys: pytest.CaptureFixture) -> None:
    opt = _optimizer()
    sched = lr_scheduler.StepLR(opt, step_size=1, gamma=0.1, verbose=True)
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.01)
    assert capsys.readouterr().out.count("Adjusting learning rate of group 0 to 1.0000e-02.") == 1

    base = getattr(lr_scheduler, "LRScheduler", None) or lr_scheduler._LRScheduler

    class Halving(base):  # type: ignore[misc, valid-type]
        def __init__(self, optimizer: torch.optim.Optimizer, last_epoch: int = -1, verbose: bool = False) -> None:
            super().__init__(optimizer, last_epoch, verbose)  # torch 1.x's positional order

        def get_lr(self) -> list:
            return [g["lr"] * (0.5 if self.last_epoch > 0 else 1.0) for g in self.optimizer.param_groups]

    opt2 = _optimizer()
    halving = Halving(opt2, verbose=True)
    opt2.step()
    halving.step()
    assert opt2.param_groups[0]["lr"] == pytest.approx(0.05)
    assert "to 5.0000e-02" in capsys.readouterr().out


def test_a_verbose_scheduler_still_checkpoints_and_restores() -> None:
    """The verbose flag is not kept on the scheduler: its state_dict (its __dict__) stays picklable."""
    opt = _optimizer()
    sched = lr_scheduler.StepLR(opt, step_size=1, gamma=0.5, verbose=True)
    opt.step()
    sched.step()
    buf = io.BytesIO()
    torch.save(sched.state_dict(), buf)
    buf.seek(0)
    restored = lr_scheduler.StepLR(_optimizer(), step_size=1, gamma=0.5)
    restored.load_state_dict(torch.load(buf, weights_only=False))
    assert restored.last_epoch == sched.last_epoch == 1


def _topk_accuracy(output: torch.Tensor, target: torch.Tensor, topk: tuple) -> list:
    """The accuracy of PyTorch's ImageNet example of the torch 1.4 era, as 0.12/0.13 NAS and DARTS code copied it."""
    maxk = max(topk)
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))
    return [correct[:k].view(-1).float().sum(0).item() for k in topk]


def test_comparisons_of_a_transposed_tensor_are_contiguous_as_in_torch_1_4() -> None:
    torch.manual_seed(0)
    output, target = torch.randn(16, 10), torch.randint(0, 10, (16,))
    # torch itself lays the result out after the transposed input, and the old idiom's view fails on it
    pred = output.topk(5, 1, True, True)[1].t()
    raw = torch._C.TensorBase.eq(pred, target.view(1, -1).expand_as(pred))
    assert not raw.is_contiguous()
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        raw[:5].view(-1)
    top1, top5 = _topk_accuracy(output, target, (1, 5))
    ranks = (output.argsort(1, descending=True) == target[:, None]).float().argmax(1)
    assert top1 == float((ranks < 1).sum()) and top5 == float((ranks < 5).sum())
    for name in ("eq", "ne", "lt", "le", "gt", "ge"):
        result = getattr(pred, name)(3)
        assert result.is_contiguous()
        assert torch.equal(result, getattr(torch._C.TensorBase, name)(pred, 3))
    same = output.eq(0.5)  # a contiguous input's result is torch's own, not copied
    assert same.is_contiguous() and torch.equal(same, torch._C.TensorBase.eq(output, 0.5))
