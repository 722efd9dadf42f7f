"""DeepSpeedTrial: the class users subclass to train a DeepSpeed engine (Determined 0.19-0.38)."""
import abc
import pathlib
from typing import Any, Dict, Iterator, Optional, Union

import torch

from determined import errors
from determined._trial import Trial
from determined.pytorch._callback import PyTorchCallback
from determined.pytorch._data import DataLoader
from determined.pytorch.deepspeed._context import DeepSpeedTrialContext


class DeepSpeedTrial(Trial):
    """DeepSpeed trials are created by subclassing this abstract class.

    ``__init__(context)`` builds the model (and optionally its optimizer and LR scheduler, else the DeepSpeed config
    names them), passes them to ``deepspeed.initialize`` and registers the engine with
    ``context.wrap_model_engine``. ``train_batch(dataloader_iter, epoch_idx, batch_idx)`` draws a micro batch with
    ``next(dataloader_iter)``, runs ``engine(...)``, ``engine.backward(loss)`` and ``engine.step()`` (a
    PipelineEngine: ``engine.train_batch(dataloader_iter)``) and returns its metrics. One Determined batch is
    ``gradient_accumulation_steps`` calls of train_batch (one call for a PipelineEngine, or after
    ``context.disable_auto_grad_accumulation()``), i.e. ``train_batch_size`` records over all slots.
    """

    trial_context_class = DeepSpeedTrialContext

    @abc.abstractmethod
    def __init__(self, context: DeepSpeedTrialContext) -> None:
        """Build the DeepSpeed engine(s) and register them with ``context.wrap_model_engine``."""
        self.context = context

    @abc.abstractmethod
    def train_batch(
        self, dataloader_iter: Optional[Iterator[Any]], epoch_idx: int, batch_idx: int
    ) -> Union[torch.Tensor, Dict[str, Any]]:
        """Train on one micro batch drawn from `dataloader_iter` (a PipelineEngine: on a whole batch) and return
        the loss or a dict of metrics. `batch_idx` counts Determined batches per slot since the start of training;
        `dataloader_iter` is None on ranks that build no data loader (see ModelParallelUnit)."""

    @abc.abstractmethod
    def build_training_data_loader(self) -> Optional[DataLoader]:
        """The training data: a determined.pytorch.DataLoader whose batch size is
        ``context.train_micro_batch_size_per_gpu`` (any iterable after
        ``context.disable_dataset_reproducibility_checks()``)."""

    @abc.abstractmethod
    def build_validation_data_loader(self) -> Optional[DataLoader]:
        """The validation data: a determined.pytorch.DataLoader (any iterable after
        ``context.disable_dataset_reproducibility_checks()``)."""

    @abc.abstractmethod
    def evaluate_batch(self, dataloader_iter: Optional[Iterator[Any]], batch_idx: int) -> Dict[str, Any]:
        """The validation metrics of one batch drawn from `dataloader_iter` (a PipelineEngine: ``gradient_accumulation
        _steps`` micro batches, e.g. ``engine.eval_batch(dataloader_iter)``); averaged over the batches of all slots.
        Custom reductions: ``context.wrap_reducer``."""

    def build_callbacks(self) -> Dict[str, PyTorchCallback]:
        """Named PyTorchCallbacks to run during training; their state_dict() is checkpointed under the name."""
        return {}

    def save(self, context: DeepSpeedTrialContext, path: pathlib.Path) -> None:
        """Save the engines into the checkpoint directory `path`; runs on every rank (ZeRO shards are per rank).
        By default ``engine.save_checkpoint(path, tag=f"model{i}")`` for each engine i."""
        for i, engine in enumerate(context.models):
            engine.save_checkpoint(str(path), tag=f"model{i}")

    def load(self, context: DeepSpeedTrialContext, load_path: pathlib.Path) -> None:
        """Restore the engines from the checkpoint directory `load_path`; runs on every rank. By default
        ``engine.load_checkpoint(load_path, tag=f"model{i}")`` for each engine i."""
        for i, engine in enumerate(context.models):
            try:
                loaded, _ = engine.load_checkpoint(str(load_path), tag=f"model{i}")
            except AssertionError as e:
                raise errors.DeterminedError(
                    f"DeepSpeed could not load engine {i} from the checkpoint at {load_path} (tag model{i}): {e}"
                ) from e
            if loaded is None:
                raise errors.DeterminedError(
                    f"the checkpoint at {load_path} holds no DeepSpeed checkpoint model{i} for engine {i}: was it "
                    "saved by this trial with the same number of engines?"
                )
