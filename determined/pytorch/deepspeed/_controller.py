"""DeepSpeedTrialController: drives a DeepSpeedTrial with the PyTorchTrial loop (reports, validation periods,
checkpoint policy, stopping) and DeepSpeed's engines, checkpoints and process group."""
import datetime
import json
import logging
import os
import pathlib
import socket
import time
from typing import Any, Dict, Iterable, Iterator, List, Optional, Type

import deepspeed
import numpy as np
import torch
import torch.distributed as dist

from determined import core, errors
from determined._trial import construct_trial
from determined._trial_loop import BatchLoop
from determined.core._distributed import collective_timeout
from determined.pytorch import _checkpoint, _distributed
from determined.pytorch._callback import Callbacks
from determined.pytorch._context import _pick_device
from determined.pytorch._controller import PyTorchTrialController, _check_loader, _plain, _repeat
from determined.pytorch._data import DataLoader
from determined.pytorch._reducer import MetricAccumulator, Reducer
from determined.pytorch._training_metrics import TrainingMetrics, metrics_of_train_batch
from determined.pytorch.deepspeed import _shims
from determined.pytorch.deepspeed._context import DeepSpeedTrialContext
from determined.pytorch.deepspeed._trial import DeepSpeedTrial

logger = logging.getLogger("determined.pytorch")

FORMAT = "deepspeed"
LOAD_DATA_FILE = _checkpoint.LOAD_DATA_FILE


def state_file(rank: int) -> str:
    """The file of a checkpoint that holds rank `rank`'s loop state (RNG, callbacks, counters)."""
    return f"det_state_dict_rank{rank}.pth"


def init_distributed(distributed: core.DistributedContext) -> None:
    """Make DeepSpeed's communication ready: the torch.distributed process group of the trial's ranks (gloo on CPU,
    nccl on GPU; one rank alone too, as DeepSpeed always needs one), then ``deepspeed.init_distributed`` on it.

    On CPU slots DeepSpeed runs with its CPU accelerator (DS_ACCELERATOR=cpu unless the trial set another), without
    its shared-memory op (see _shims.skip_shm_comm_op).
    """
    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
        _shims.skip_shm_comm_op()
    for name, value in (("RANK", distributed.rank), ("WORLD_SIZE", distributed.size),
                        ("LOCAL_RANK", distributed.local_rank), ("LOCAL_SIZE", distributed.local_size)):
        os.environ.setdefault(name, str(value))
    device = _pick_device(distributed.local_rank)
    if not (dist.is_available() and dist.is_initialized()):
        if distributed.size > 1:
            _distributed.init_process_group(distributed, device)
        else:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind(("127.0.0.1", 0))
                port = sock.getsockname()[1]
            if device.type == "cuda":
                torch.cuda.set_device(device)
            dist.init_process_group(backend=_distributed.backend_for(device), init_method=f"tcp://127.0.0.1:{port}",
                                    rank=0, world_size=1, timeout=datetime.timedelta(seconds=collective_timeout()))
    deepspeed.init_distributed(dist_backend=_distributed.backend_for(device), auto_mpi_discovery=False)


class DeepSpeedTrialController(PyTorchTrialController):
    """Trains, validates and checkpoints a DeepSpeedTrial as the searcher operations of its core context ask.

    The loop, reports, validation periods, checkpoint policy and stopping are PyTorchTrial's. One batch is
    ``gradient_accumulation_steps`` calls of train_batch (one for a PipelineEngine or with manual accumulation),
    each on a micro batch of ``train_micro_batch_size_per_gpu`` records; the training data is sharded over the
    data-parallel ranks of the layout (ModelParallelUnit). Checkpoints hold every engine's own DeepSpeed checkpoint
    (``trial.save``, every rank writes its shards) and each rank's RNG and callback state; a resume restores both
    and continues at the exact micro batch.
    """

    context: DeepSpeedTrialContext
    # Every rank takes part in a checkpoint: all must agree whether a validation was the best (checkpoint_policy).
    _broadcast_validation_was_best = True

    def __init__(self, trial_class: Type[Any], context: DeepSpeedTrialContext, trial: Any = None) -> None:
        """`trial`: the user's trial, already built with `context` (the Trainer API); else it is built here."""
        BatchLoop.__init__(self, trial_class, context)
        name = trial_class.__name__
        if not isinstance(context, DeepSpeedTrialContext):
            raise errors.InvalidTrialError(
                f"{name} got a {type(context).__name__}; a DeepSpeedTrial needs a DeepSpeedTrialContext (leave "
                "trial_context_class as it is, or subclass DeepSpeedTrialContext)"
            )
        self._read_config(context.get_experiment_config())
        self._evaluate_method = "evaluate_batch"
        self.trial = construct_trial(trial_class, context) if trial is None else trial
        if not context.models:
            raise errors.InvalidTrialError(
                f"{name} registered no DeepSpeed engine: in __init__, engine, _, _, _ = deepspeed.initialize(...) "
                "and self.engine = context.wrap_model_engine(engine)"
            )
        self.callbacks = Callbacks(self.trial.build_callbacks(), name)
        context._callbacks = self.callbacks.by_name
        self._rank = context.distributed.rank
        self._size = context.distributed.size
        self._mpu = context._mpu
        self._calls_per_batch = 1 if context.use_pipeline_parallel or context._manual_grad_accumulation \
            else context.num_micro_batches_per_slot
        self.training_loader: Optional[Iterable[Any]] = None
        self.validation_loader: Optional[Iterable[Any]] = None
        if self._mpu.should_build_data_loader:
            own_loaders = context.experimental._data_repro_checks_disabled
            self.training_loader = _check_loader(
                self.trial.build_training_data_loader(), name, "build_training_data_loader", own_loaders)
            self.validation_loader = _check_loader(
                self.trial.build_validation_data_loader(), name, "build_validation_data_loader", own_loaders)
        self._epoch_len = self._agreed_epoch_len()
        context._epoch_len = self._epoch_len
        self._batches_since_report = TrainingMetrics()
        self._train_iterator: Optional[Iterator[Any]] = None
        self._next_stop_check = 0
        self._last_stop_check = (time.monotonic(), 0)
        self._share_checkpoints = False  # every rank takes part in every checkpoint and hears its uuid
        self._records_since_report: Optional[int] = 0
        self._report_started = time.monotonic()

    @classmethod
    def pre_execute_hook(cls, trial_seed: int, distributed: Any) -> None:
        """Seed torch and join DeepSpeed's process group (unless DET_MANUAL_INIT_DISTRIBUTED is set: the trial
        then calls deepspeed.init_distributed itself)."""
        torch.manual_seed(trial_seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(trial_seed)
        cls.join_process_group(distributed)

    @classmethod
    def join_process_group(cls, distributed: Any) -> None:
        """DeepSpeed's process group, also for one rank (unless DET_MANUAL_INIT_DISTRIBUTED is set)."""
        if not os.environ.get("DET_MANUAL_INIT_DISTRIBUTED"):
            init_distributed(distributed)

    # -- DeepSpeed Autotune --------------------------------------------------------------------------

    def _run_operations(self) -> bool:
        """The searcher's operations; a DeepSpeed Autotune trial (hyperparameter `_use_dsat_mode`) runs only until
        DeepSpeed's engine has measured it (docs/dsat.md)."""
        if self.context.get_hparams().get("_use_dsat_mode"):
            return self._run_autotuning()
        return super()._run_operations()

    def _run_autotuning(self) -> bool:
        """Train batches until the engine's autotuning exits (it wrote the model's profile or its speed to a JSON
        file): report that file as the trial's validation metrics and searcher metric, and end when the search
        closes the trial."""
        from determined.pytorch.dsat import dsat_reporting_context

        searcher = self.context.get_experiment_config().get("searcher") or {}
        if searcher.get("name") != "custom":
            raise errors.InvalidTrialError(
                "hyperparameter _use_dsat_mode is for the trials of DeepSpeed Autotune (searcher.name: custom, run "
                "by python3 -m determined.pytorch.dsat); remove it from the config")
        op = next(iter(self.core.searcher.operations()))
        try:
            for _ in range(op._batches):
                with dsat_reporting_context(self.core, op):
                    self._train_one_batch()
        except SystemExit:
            if not op.completed and self._rank == 0:
                raise errors.InvalidTrialError(
                    "the DeepSpeed engine exited without writing its autotuning results (model_info.json or "
                    "autotuning_metric.json in the working directory)") from None
            return True
        raise errors.InvalidTrialError(
            f"DeepSpeed Autotune: the engine trained {op._batches} batches without stopping for autotuning; build its "
            "config with det.pytorch.dsat.get_ds_config_from_hparams(context.get_hparams()) (or merge "
            "hyperparameter overwrite_deepspeed_args into it), which carries the autotuning section")

    # -- data ----------------------------------------------------------------------------------------

    def _rank_micro_batches(self, loader: Optional[Iterable[Any]]) -> Optional[int]:
        if loader is None:
            return None
        if isinstance(loader, DataLoader):
            return loader.per_rank_len(self._mpu.data_parallel_world_size)
        try:
            return len(loader)  # type: ignore[arg-type]
        except TypeError:
            return None

    def _agreed_epoch_len(self) -> Optional[int]:
        """Batches per epoch: the smallest count of micro batches of the ranks' training loaders, in batches."""
        lengths = [n for n in self._allgather(self._rank_micro_batches(self.training_loader)) if n is not None]
        if not lengths:
            return None
        if min(lengths) != max(lengths):
            logger.warning("the ranks' training loaders have %s micro batches per epoch; epochs count the fewest",
                           lengths)
        return max(1, min(lengths) // self._calls_per_batch)

    def _training_iterator(self) -> Optional[Iterator[Any]]:
        if self.training_loader is None:
            return None
        if self._train_iterator is None:
            if isinstance(self.training_loader, DataLoader):
                self._train_iterator = iter(self.training_loader.get_data_loader(
                    repeat=True,
                    skip=self.steps_completed * self.context.num_micro_batches_per_slot,
                    num_replicas=self._mpu.data_parallel_world_size,
                    rank=self._mpu.data_parallel_rank,
                    seed=self.context.get_trial_seed(),
                ))
            else:
                self._train_iterator = _repeat(self.training_loader)
        return self._train_iterator

    # -- training ------------------------------------------------------------------------------------

    def _train_one_batch(self) -> None:
        context = self.context
        batch_idx = self.steps_completed
        epoch_len = self._epoch_len
        epoch_idx, index_in_epoch = divmod(batch_idx, epoch_len) if epoch_len else (0, batch_idx)
        if not len(self._batches_since_report):
            context._reducers.reset()
            self._report_started = time.monotonic()
        context._current_batch_idx = batch_idx
        if epoch_len and index_in_epoch == 0:
            self.callbacks.training_epoch_start(epoch_idx)
        iterator = self._training_iterator()
        outputs = []
        for _ in range(self._calls_per_batch):
            output = self.trial.train_batch(iterator, epoch_idx, batch_idx)
            if self._mpu.should_report_metrics:
                outputs.append(metrics_of_train_batch(output, self.trial_class.__name__))
        self._check_accumulation()
        self._batches_since_report.add(_mean_of_micro_batches(outputs))
        if self._records_since_report is not None:
            self._records_since_report += context.train_micro_batch_size_per_gpu * context.num_micro_batches_per_slot
        self.steps_completed = batch_idx + 1
        if epoch_len and index_in_epoch == epoch_len - 1:
            self.callbacks.fire("on_training_epoch_end", epoch_idx)

    def _check_accumulation(self) -> None:
        engine = self.context.models[0]
        if self.context.use_pipeline_parallel:
            return
        micro_steps = int(getattr(engine, "micro_steps", 0))
        if micro_steps % self.context.num_micro_batches_per_slot:
            raise errors.InvalidTrialError(
                f"after batch {self.steps_completed}, the engine has trained {micro_steps} micro batches, not a "
                f"multiple of gradient_accumulation_steps ({self.context.num_micro_batches_per_slot}): train_batch "
                "must call engine.backward(loss) and engine.step() once per call"
                + (" and, with disable_auto_grad_accumulation(), once per micro batch of the batch"
                   if self.context._manual_grad_accumulation else "")
            )

    # -- validation ----------------------------------------------------------------------------------

    def _evaluate_batches(self) -> Dict[str, Any]:
        """evaluate_batch(iterator, idx) for the number of batches every rank has (a PipelineEngine's takes
        gradient_accumulation_steps micro batches each), averaged over the batches of all ranks."""
        per_call = self.context.num_micro_batches_per_slot if self.context.use_pipeline_parallel else 1
        loader = self.validation_loader
        if isinstance(loader, DataLoader):
            loader = loader.get_data_loader(repeat=False, skip=0, num_replicas=self._mpu.data_parallel_world_size,
                                            rank=self._mpu.data_parallel_rank, seed=self.context.get_trial_seed())
        mine = self._rank_micro_batches(loader)
        counts = [n // per_call for n in self._allgather(mine) if n is not None]
        if not counts:
            raise errors.InvalidTrialError(
                "the validation data loaders have no length: give the validation dataset a __len__ so that every "
                "rank runs the same number of evaluate_batch calls"
            )
        if min(counts) != max(counts):
            logger.warning("the ranks' validation loaders have %s batches; every rank validates on the fewest", counts)
        iterator = iter(loader) if loader is not None else None
        keep_outputs = self.callbacks.any_overrides("on_validation_epoch_end")
        outputs: List[Any] = []
        accumulator = MetricAccumulator()
        self.callbacks.fire("on_validation_epoch_start")
        batches = min(counts)
        if self._max_validation_batches is not None:
            batches = min(batches, self._max_validation_batches)
        for batch_idx in range(batches):
            output = self.trial.evaluate_batch(iterator, batch_idx)
            if not self._mpu.should_report_metrics:
                continue
            if not isinstance(output, dict):
                raise errors.InvalidTrialError(
                    f"{self.trial_class.__name__}.evaluate_batch() must return a dict of metric name -> value, got "
                    f"{type(output).__name__}"
                )
            accumulator.add(output)
            if keep_outputs:
                outputs.append(output)
        self.callbacks.fire("on_validation_epoch_end", outputs)
        return self._combined_validation_metrics(accumulator, Reducer.AVG)

    # -- checkpoints ---------------------------------------------------------------------------------

    def _loop_state(self) -> Dict[str, Any]:
        return {
            "rng_state": _checkpoint.capture_rng_state(self.context.device),
            "callbacks": self.callbacks.state_dicts(),
            "steps_completed": self.steps_completed,
            "last_validation": self._last_validation,
        }

    def _load_data(self) -> Dict[str, Any]:
        return {
            "trial_type": "DeepSpeedTrial",
            "trial_cls_spec": _checkpoint.trial_class_spec(self.trial_class),
            "framework": _checkpoint.framework(),
            "format": FORMAT,
            "deepspeed_version": deepspeed.__version__,
            "hparams": self.context.get_hparams(),
            "trial_seed": self.context.get_trial_seed(),
            "experiment_config": self.context.get_experiment_config(),
            "num_engines": len(self.context.models),
            "slots": self._size,
        }

    def _checkpoint(self) -> None:
        """Every rank at once: its loop state, then trial.save (the engines' checkpoints); one checkpoint."""
        metadata = self._checkpoint_metadata(_checkpoint.framework(), FORMAT)
        with self.core.checkpoint.store_path(metadata, shard=True) as (path, uuid):
            state = self._loop_state()
            self.callbacks.fire("on_checkpoint_save_start", state)
            torch.save(state, str(path / state_file(self._rank)))
            if self._rank == 0:
                with open(path / LOAD_DATA_FILE, "w") as f:
                    json.dump(self._load_data(), f, indent=2, default=str)
                self._write_checkpoint_extras(path)
            self.trial.save(self.context, path)
            self.callbacks.checkpoint_write_end(str(path))
        self._last_checkpoint = self.steps_completed
        self.callbacks.fire("on_checkpoint_upload_end", uuid)

    def _restore(self) -> None:
        uuid = self.core.info.latest_checkpoint
        if uuid is None:
            return
        state = self._load_checkpoint(uuid)
        self._resume_at_platform_steps(state)
        logger.info("restored checkpoint %s at %d batches", uuid, self.steps_completed)

    def _load_checkpoint(self, uuid: str) -> Optional[Dict[str, Any]]:
        """Load checkpoint `uuid` on every rank: the engines (trial.load), this rank's RNG and callback states;
        returns its loop state (None for a checkpoint without one: only the engines are loaded)."""
        with self.core.checkpoint.restore_path(uuid) as path:
            state = _read_loop_state(path, self._rank)
            if state is not None:
                self.callbacks.fire("on_checkpoint_load_start", state)
            self.trial.load(self.context, path)
            self._read_checkpoint_extras(path, state or {})
        if state is not None:
            self.callbacks.load_state_dicts(state.get("callbacks") or {})
            if "rng_state" in state:
                _checkpoint.restore_rng_state(state["rng_state"], self.context.device)
        return state


def _read_loop_state(path: pathlib.Path, rank: int) -> Optional[Dict[str, Any]]:
    """This rank's loop state in the checkpoint at `path` (the chief's when the checkpoint has fewer ranks), or
    None when it has none (a checkpoint of another kind of trial: only the engines are loaded)."""
    for candidate in (path / state_file(rank), path / state_file(0)):
        if candidate.is_file():
            state = torch.load(str(candidate), map_location="cpu", weights_only=False)
            if not isinstance(state, dict):
                raise errors.DeterminedError(f"{candidate} does not hold a dict; it is not a DeepSpeedTrial checkpoint")
            return state
    return None


def _mean_of_micro_batches(outputs: List[Dict[str, Any]]) -> Dict[str, Any]:
    """One batch's metrics from those of its micro batches (train_batch calls): the mean of each metric."""
    if len(outputs) == 1:
        return outputs[0]
    names: List[str] = []
    for output in outputs:
        names.extend(n for n in output if n not in names)
    combined: Dict[str, Any] = {}
    for name in names:
        values = [o[name] for o in outputs if name in o]
        if all(isinstance(v, torch.Tensor) and v.numel() == 1 for v in values):
            combined[name] = torch.stack([v.detach().reshape(()).to(torch.float64) for v in values]).mean()
        else:
            mean = np.mean(np.asarray([_plain(v) for v in values], dtype=np.float64), axis=0)
            combined[name] = float(mean) if np.ndim(mean) == 0 else mean.tolist()
    return combined


DeepSpeedTrial.trial_controller_class = DeepSpeedTrialController
