"""determined.pytorch.lightning.LightningAdapter (Determined 0.13 to 0.23): a LightningModule (with a DataModule, a
logged metric, an LR scheduler and a GAN's two optimizers) trains as a PyTorchTrial, its loss falls, and a
checkpoint restores it exactly."""
import pathlib
from typing import Any, Dict

import pytest
import torch

pl = pytest.importorskip("pytorch_lightning")

from _pytorch_runs import make_config, run_trial  # noqa: E402

from determined import errors  # noqa: E402
from determined.pytorch import DataLoader, PyTorchTrialContext  # noqa: E402
from determined.pytorch.lightning import LightningAdapter  # noqa: E402


def blobs(n: int, seed: int) -> torch.utils.data.TensorDataset:
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=g)
    x = torch.randn(n, 4, generator=g) + 2.0 * y[:, None].float()
    return torch.utils.data.TensorDataset(x, y)


class Blobs(pl.LightningDataModule):
    def __init__(self, batch_size: int) -> None:
        super().__init__()
        self.batch_size = batch_size
        self.dims = (4,)  # what Lightning 1.5's size() returned (restored by the adapter's shims)

    def setup(self, stage: Any = None) -> None:
        self.train, self.val = blobs(64, 0), blobs(32, 1)

    def train_dataloader(self) -> Any:
        return torch.utils.data.DataLoader(self.train, batch_size=self.batch_size)

    def val_dataloader(self) -> Any:
        return torch.utils.data.DataLoader(self.val, batch_size=self.batch_size)


class Classifier(pl.LightningModule):
    def __init__(self, lr: float) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        self.epochs_started = 0
        self.restored_note = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self(x), y)
        self.log("train_step", float(self.global_step))
        return {"loss": loss}

    def validation_step(self, batch: Any, batch_idx: int) -> Dict[str, Any]:
        x, y = batch
        logits = self(x)
        self.log("val_acc", (logits.argmax(1) == y).float().mean())
        return {"val_loss": torch.nn.functional.cross_entropy(logits, y)}

    def on_train_epoch_start(self) -> None:
        self.epochs_started += 1

    def on_save_checkpoint(self, checkpoint: Dict[str, Any]) -> None:
        checkpoint["note"] = f"epoch {self.current_epoch}"

    def on_load_checkpoint(self, checkpoint: Dict[str, Any]) -> None:
        self.restored_note = checkpoint.get("note")

    def configure_optimizers(self) -> Any:
        opt = torch.optim.SGD(self.parameters(), lr=self.hparams.lr)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": torch.optim.lr_scheduler.StepLR(opt, 1, 0.9),
                                                   "interval": "step"}}


class ClassifierTrial(LightningAdapter):
    def __init__(self, context: PyTorchTrialContext) -> None:
        self.dm = Blobs(context.get_per_slot_batch_size())
        assert self.dm.size() == (4,) and self.dm.size(0) == 4
        super().__init__(context, lightning_module=Classifier(lr=context.get_hparam("lr")))

    def build_training_data_loader(self) -> DataLoader:
        self.dm.setup()
        dl = self.dm.train_dataloader()
        return DataLoader(dl.dataset, batch_size=dl.batch_size)

    def build_validation_data_loader(self) -> DataLoader:
        self.dm.setup()
        dl = self.dm.val_dataloader()
        return DataLoader(dl.dataset, batch_size=dl.batch_size)


class TinyGAN(pl.LightningModule):
    """Two optimizers: training_step takes optimizer_idx; only the stepping network's parameters get gradients."""

    def __init__(self) -> None:
        super().__init__()
        self.generator = torch.nn.Linear(2, 4)
        self.discriminator = torch.nn.Linear(4, 1)
        self.step_of = -1
        self.discriminator_grads_in_generator_steps: list = []

    def training_step(self, batch: Any, batch_idx: int, optimizer_idx: int) -> Any:
        real, _ = batch
        self.step_of = optimizer_idx
        fake = self.generator(torch.randn(real.shape[0], 2).type_as(real))  # on the batch's device, as Lightning code does
        bce = torch.nn.functional.binary_cross_entropy_with_logits
        if optimizer_idx == 0:
            return {"loss": bce(self.discriminator(fake), torch.ones(real.shape[0], 1).type_as(real))}
        d_real = bce(self.discriminator(real), torch.ones(real.shape[0], 1).type_as(real))
        d_fake = bce(self.discriminator(fake.detach()), torch.zeros(real.shape[0], 1).type_as(real))
        return {"loss": (d_real + d_fake) / 2}

    def on_after_backward(self) -> None:
        if self.step_of == 0:  # the generator's step: the discriminator is frozen (toggled), it gets no gradient
            self.discriminator_grads_in_generator_steps.append(self.discriminator.weight.grad)

    def validation_step(self, batch: Any, batch_idx: int) -> Any:
        real, _ = batch
        return torch.nn.functional.binary_cross_entropy_with_logits(self.discriminator(real), torch.ones(len(real), 1).type_as(real))

    def configure_optimizers(self) -> Any:
        return [torch.optim.Adam(self.generator.parameters(), 0.01), torch.optim.Adam(self.discriminator.parameters(), 0.01)], []


class GANTrial(LightningAdapter):
    def __init__(self, context: PyTorchTrialContext) -> None:
        self.gan = TinyGAN()
        super().__init__(context, lightning_module=self.gan)

    def build_training_data_loader(self) -> DataLoader:
        return DataLoader(blobs(32, 2), batch_size=8)

    def build_validation_data_loader(self) -> DataLoader:
        return DataLoader(blobs(16, 3), batch_size=8)


def config(metric: str = "val_loss", **hparams: Any) -> Dict[str, Any]:
    return make_config(metric, hyperparameters={"global_batch_size": 8, **hparams},
                       records_per_epoch=64, min_validation_period={"batches": 8})


def test_a_lightning_module_trains_and_its_checkpoint_restores_it(tmp_path: pathlib.Path) -> None:
    cfg = config(lr=0.5)
    ctx = run_trial(ClassifierTrial, tmp_path, [16], config=cfg, hparams={"global_batch_size": 8, "lr": 0.5})
    losses = [v["metrics"]["val_loss"] for v in ctx.train.validation_history]
    assert len(losses) == 2 and losses[-1] < losses[0] < 0.6  # the loss falls (chance: ln 2 = 0.69)
    assert ctx.train.validation_history[-1]["metrics"]["val_acc"] > 0.8  # logged with self.log
    last = ctx.train.training_history[-1]["metrics"]
    assert "train_step" in last and "loss" in last
    uuid = ctx.checkpoint.reported[-1]["uuid"]
    state = torch.load(tmp_path / uuid / "state_dict.pth", weights_only=False)
    assert state["lr_schedulers_state_dict"][0]["last_epoch"] == 16  # stepped every batch ("interval": "step")

    resumed = run_trial(ClassifierTrial, tmp_path, [24], config=cfg, hparams={"global_batch_size": 8, "lr": 0.5},
                        latest_checkpoint=uuid, steps_completed=16)
    again = torch.load(tmp_path / resumed.checkpoint.reported[-1]["uuid"] / "state_dict.pth", weights_only=False)
    whole = run_trial(ClassifierTrial, tmp_path / "whole", [24], config=cfg, hparams={"global_batch_size": 8, "lr": 0.5})
    straight = torch.load(tmp_path / "whole" / whole.checkpoint.reported[-1]["uuid"] / "state_dict.pth",
                          weights_only=False)
    for name, tensor in straight["models_state_dict"][0].items():
        assert torch.equal(tensor, again["models_state_dict"][0][name]), name  # resumed exactly
    assert again["note"] == "epoch 2"  # on_save_checkpoint wrote into the checkpoint (epochs of 8 batches)


def test_two_optimizers_step_their_own_networks(tmp_path: pathlib.Path) -> None:
    trials = []
    original = GANTrial.__init__

    def keep(self: GANTrial, context: PyTorchTrialContext) -> None:
        original(self, context)
        trials.append(self)

    GANTrial.__init__ = keep  # type: ignore[method-assign]
    try:
        ctx = run_trial(GANTrial, tmp_path, [4], config=config("loss"))
    finally:
        GANTrial.__init__ = original  # type: ignore[method-assign]
    assert trials[0].gan.discriminator_grads_in_generator_steps == [None] * 4
    metrics = ctx.train.training_history[-1]["metrics"]
    assert {"opt0_loss", "opt1_loss"} <= set(metrics)  # the same name from both optimizers, told apart
    assert ctx.train.validation_history[-1]["metrics"]["loss"] > 0


def test_what_needs_a_lightning_trainer_is_refused_by_name() -> None:
    class ManualOptimization(Classifier):
        def optimizer_step(self, *args: Any, **kwargs: Any) -> None:
            pass

    with pytest.raises(errors.InvalidTrialError, match="overrides optimizer_step"):
        LightningAdapter.__init__(object.__new__(ClassifierTrial), None, ManualOptimization(0.1))  # type: ignore
    with pytest.raises(errors.InvalidTrialError, match="precision"):
        LightningAdapter.__init__(object.__new__(ClassifierTrial), None, Classifier(0.1), precision=64)  # type: ignore
