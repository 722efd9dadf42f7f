"""DeepSpeedTrialContext: what a DeepSpeedTrial uses to register its DeepSpeed engines and its data-parallel layout."""
import logging
from typing import Any, Dict, List, NoReturn, Optional

import deepspeed

from determined import errors
from determined.pytorch._context import PyTorchTrialContext
from determined.pytorch.deepspeed._mpu import ModelParallelUnit, make_data_parallel_mpu, make_deepspeed_mpu

logger = logging.getLogger("determined.pytorch")

# optimizations.* keys that mean nothing to a DeepSpeedTrial, with their defaults (a set value is logged).
_IGNORED_OPTIMIZATIONS = {
    "average_aggregated_gradients": True,
    "gradient_compression": False,
    "tensor_fusion_threshold": 64,
    "tensor_fusion_cycle_time": 5,
    "autotune_tensor_fusion": False,
}


class DeepSpeedTrialContext(PyTorchTrialContext):
    """The context of a DeepSpeedTrial.

    Build the DeepSpeed engine with ``deepspeed.initialize(model=..., model_parameters=..., config=...)`` (the
    engine owns the optimizer, the LR scheduler, mixed precision and gradient accumulation) and register it with
    :meth:`wrap_model_engine`, so that Determined checkpoints it and reads its batch sizes. Besides, as for a
    PyTorchTrial: ``to_device``, ``wrap_reducer``, the TensorBoard writer, ``get_hparams``/``get_data_config``, the
    current batch and epoch. Mixed precision and gradient aggregation are set in the DeepSpeed config, not in the
    experiment config's ``optimizations``.
    """

    def __init__(self, core_context: Any, config: Dict[str, Any], hparams: Dict[str, Any], trial_seed: int) -> None:
        _check_optimizations(config.get("optimizations") or {})
        super().__init__(core_context, config, hparams, trial_seed)
        self.models: List[Any] = []
        self._mpu = make_data_parallel_mpu(self.distributed)
        self._called_set_mpu = False
        self._train_micro_batch_size_per_gpu: Optional[int] = None
        self._num_micro_batches_per_slot: Optional[int] = None
        self._use_pipeline_parallel = False
        self._manual_grad_accumulation = False
        self._average_training_metrics = bool((config.get("optimizations") or {}).get("average_training_metrics"))

    # -- the engines ---------------------------------------------------------------------------------

    def wrap_model_engine(self, model: Any) -> Any:
        """Register a DeepSpeed engine (what ``deepspeed.initialize`` returned first); returns it.

        The first engine registered sets the batch sizes (``train_micro_batch_size_per_gpu``,
        ``num_micro_batches_per_slot`` = its gradient_accumulation_steps) and, for a PipelineEngine, the
        data-parallel layout. Every engine is saved and restored with the trial's checkpoints.
        """
        if not isinstance(model, deepspeed.DeepSpeedEngine):
            raise errors.InvalidTrialError(
                f"wrap_model_engine() takes a DeepSpeed engine, got {type(model).__name__}: build it with "
                "engine, optimizer, _, lr_scheduler = deepspeed.initialize(model=model, model_parameters=..., "
                "config=ds_config) and wrap the engine"
            )
        model = model.to(self.device)
        if isinstance(model, deepspeed.PipelineEngine):
            self._use_pipeline_parallel = True
            if not self.models:
                self._mpu = make_deepspeed_mpu(model.mpu)
            else:
                logger.warning("the data-parallel layout is that of the first engine registered; this "
                               "PipelineEngine's is not used")
        micro_batch = int(model.train_micro_batch_size_per_gpu())
        accumulation = int(model.gradient_accumulation_steps())
        if not self.models:
            self._train_micro_batch_size_per_gpu, self._num_micro_batches_per_slot = micro_batch, accumulation
        elif (micro_batch, accumulation) != (self._train_micro_batch_size_per_gpu, self._num_micro_batches_per_slot):
            logger.warning(
                "engine %d has train_micro_batch_size_per_gpu %d and gradient_accumulation_steps %d, the first "
                "engine %s and %s: batches are counted with the first engine's", len(self.models) + 1, micro_batch,
                accumulation, self._train_micro_batch_size_per_gpu, self._num_micro_batches_per_slot,
            )
        self.models.append(model)
        return model

    def set_mpu(self, mpu: ModelParallelUnit) -> None:
        """Use a custom data-parallel layout (for model parallelism outside DeepSpeed's PipelineEngine); call it
        once, after wrap_model_engine()."""
        if not self.models:
            raise errors.InvalidTrialError("set_mpu(): call wrap_model_engine() first, then set_mpu()")
        if self._called_set_mpu:
            raise errors.InvalidTrialError("set_mpu() was called twice; a DeepSpeedTrial has one layout")
        if not isinstance(mpu, ModelParallelUnit):
            raise errors.InvalidTrialError(
                f"set_mpu() takes a determined.pytorch.deepspeed.ModelParallelUnit, got {type(mpu).__name__}"
            )
        if self.distributed.rank == 0 and not mpu.should_report_metrics and not self._average_training_metrics:
            raise errors.InvalidTrialError(
                "set_mpu(): the chief does not report metrics in this layout; set optimizations."
                "average_training_metrics: true in the experiment config so that the metrics of the other ranks "
                "reach it"
            )
        self._called_set_mpu = True
        self._mpu = mpu

    def disable_auto_grad_accumulation(self) -> None:
        """Call train_batch() once per batch instead of gradient_accumulation_steps times: your train_batch then
        trains on all the micro batches of the batch itself."""
        self._manual_grad_accumulation = True

    def disable_dataset_reproducibility_checks(self) -> None:
        """Allow build_training_data_loader()/build_validation_data_loader() to return any iterable (a torch
        DataLoader, the loader of ``deepspeed.initialize(training_data=...)``): Determined then iterates it as it
        is, repeating the training data, without sharding it or skipping what was trained before a resume."""
        self.experimental.disable_dataset_reproducibility_checks()

    @property
    def use_pipeline_parallel(self) -> bool:
        """Whether the first engine is a PipelineEngine (its train_batch() consumes a whole batch)."""
        return self._use_pipeline_parallel

    def get_train_micro_batch_size_per_gpu(self) -> int:
        """The first engine's train_micro_batch_size_per_gpu: the batch size of the data loaders."""
        if self._train_micro_batch_size_per_gpu is None:
            raise errors.InvalidTrialError("call wrap_model_engine() before asking for train_micro_batch_size_per_gpu")
        return self._train_micro_batch_size_per_gpu

    @property
    def train_micro_batch_size_per_gpu(self) -> int:
        return self.get_train_micro_batch_size_per_gpu()

    def get_num_micro_batches_per_slot(self) -> int:
        """The first engine's gradient_accumulation_steps: micro batches per batch on each slot."""
        if self._num_micro_batches_per_slot is None:
            raise errors.InvalidTrialError("call wrap_model_engine() before asking for num_micro_batches_per_slot")
        return self._num_micro_batches_per_slot

    @property
    def num_micro_batches_per_slot(self) -> int:
        return self.get_num_micro_batches_per_slot()

    # -- what a PyTorchTrial has and a DeepSpeedTrial does not -----------------------------------------

    def _not_for_deepspeed(self, what: str) -> NoReturn:
        raise errors.InvalidTrialError(
            f"context.{what}() is PyTorchTrial's; in a DeepSpeedTrial the DeepSpeed engine owns the model, optimizer, "
            "LR scheduler and mixed precision: pass them to deepspeed.initialize(...) (or configure them in the "
            "DeepSpeed config), register the engine with context.wrap_model_engine(engine), and call "
            "engine.backward(loss) and engine.step() in train_batch"
        )

    def wrap_model(self, model: Any) -> Any:
        self._not_for_deepspeed("wrap_model")

    def wrap_optimizer(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        self._not_for_deepspeed("wrap_optimizer")

    def wrap_lr_scheduler(self, lr_scheduler: Any, *args: Any, **kwargs: Any) -> Any:
        self._not_for_deepspeed("wrap_lr_scheduler")

    def wrap_scaler(self, scaler: Any) -> Any:
        self._not_for_deepspeed("wrap_scaler")

    def configure_apex_amp(self, *args: Any, **kwargs: Any) -> Any:
        self._not_for_deepspeed("configure_apex_amp")

    def backward(self, *args: Any, **kwargs: Any) -> None:
        self._not_for_deepspeed("backward")

    def step_optimizer(self, *args: Any, **kwargs: Any) -> None:
        self._not_for_deepspeed("step_optimizer")


def _check_optimizations(optimizations: Dict[str, Any]) -> None:
    if (optimizations.get("mixed_precision") or "O0") != "O0":
        raise errors.InvalidTrialError(
            "optimizations.mixed_precision does not apply to a DeepSpeedTrial: enable mixed precision in the "
            'DeepSpeed config ("fp16": {"enabled": true} or "bf16": {"enabled": true}) and remove it from the '
            "experiment config"
        )
    if int(optimizations.get("aggregation_frequency") or 1) > 1:
        raise errors.InvalidTrialError(
            "optimizations.aggregation_frequency does not apply to a DeepSpeedTrial: set gradient_accumulation_steps "
            "in the DeepSpeed config and remove aggregation_frequency from the experiment config"
        )
    for key, default in _IGNORED_OPTIMIZATIONS.items():
        if key in optimizations and optimizations[key] != default:
            logger.warning("optimizations.%s=%r has no effect on a DeepSpeedTrial", key, optimizations[key])
