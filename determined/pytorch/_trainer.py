"""The Trainer API of Determined 0.21-0.38: `det.pytorch.init()` and `Trainer(trial, context).fit(...)`.

`init()` builds the core context and the PyTorchTrialContext a script hands to its PyTorchTrial; `fit()` trains
that trial with the PyTorch controller's own loop (the one that runs `module:Class` entrypoints), told when to
stop, report, validate and checkpoint by the Batch/Epoch periods given to `fit()` instead of the config's.
The same script runs as `python train.py` (no platform: the arguments decide) and as an experiment's entrypoint
(the trial's config, seed, checkpoints and preemption).
"""
import collections.abc
import contextlib
import logging
import os
import pathlib
import pickle
import shutil
import sys
import warnings
from typing import Any, Dict, Iterator, List, Optional, Tuple, Type, Union

from determined import core
from determined._trial_loop import NEVER, Period, Schedule
from determined._execution import _seed_python_and_numpy
from determined.config import searcher_drives_trials
from determined.pytorch._context import PyTorchTrialContext
from determined.pytorch._controller import PyTorchTrialController

logger = logging.getLogger("determined.pytorch")

TRIAL_STATE_FILE = "trial_state.pkl"
CODE_DIR = "code"
# A checkpoint's code/ is the directory of the trial's module; one bigger than this (or with more files) is left
# out, with a warning, rather than copied into every checkpoint.
MAX_CODE_BYTES = 96 * 1024 * 1024
MAX_CODE_FILES = 2000


class TrainUnit:
    """A length or period of training: `Batch(n)` / `Epoch(n)` (every n, or n in total as `max_length`), or a
    container of counts (`Batch([5, 30])`: at those counts). A value below 1 means every batch."""

    def __init__(self, value: Union[int, collections.abc.Container]) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, collections.abc.Container)) or isinstance(
                value, (str, bytes)):
            raise TypeError(f"{type(self).__name__}(value): value must be an int or a container of ints (a list, a "
                            f"set, a range), got {value!r}")
        self.value = value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r})"

    def __eq__(self, other: Any) -> bool:
        return type(self) is type(other) and self.value == other.value

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self.value)))

    def should_stop(self, step_num: int) -> bool:
        """Whether the count `step_num` (of batches for Batch, of epochs for Epoch) is one of this unit's."""
        if isinstance(self.value, int):
            return self.value < 1 or (step_num > 0 and step_num % self.value == 0)
        return step_num in self.value

    @staticmethod
    def _from_searcher_length(length: Any, global_batch_size: Optional[int]) -> "TrainUnit":
        """The unit of a config's `searcher.max_length` ({batches: n}, {epochs: n} or {records: n})."""
        if not isinstance(length, dict) or len(length) != 1:
            raise ValueError(
                f"searcher.max_length is {length!r}, a length without a unit; call fit(max_length=pytorch.Batch(n)) "
                "or pytorch.Epoch(n) in the script, or give max_length as {batches: n} or {epochs: n}"
            )
        (unit, n), = length.items()
        if unit == "batches":
            return Batch(int(n))
        if unit == "epochs":
            return Epoch(int(n))
        if unit == "records":
            if not global_batch_size:
                raise ValueError("searcher.max_length is in records: the hyperparameter global_batch_size is needed "
                                 "to turn it into batches (or call fit(max_length=pytorch.Batch(n)))")
            return Batch(max(int(n) // int(global_batch_size), 1))
        raise ValueError(f"searcher.max_length has the unknown unit {unit!r}: use batches, epochs or records")


class Batch(TrainUnit):
    """A number of batches (per slot: every slot trains that many)."""


class Epoch(TrainUnit):
    """A number of epochs: passes over the training data loader (its length on each slot)."""


class _UnitPeriod(Period):
    """A TrainUnit as a loop's Period: Batch counts fire after their batch, Epoch counts after an epoch's last."""

    def __init__(self, unit: TrainUnit, epoch_len: Optional[int]) -> None:
        self.unit = unit
        self.epoch_len = epoch_len

    def fires(self, batches: int) -> bool:
        if isinstance(self.unit, Epoch):
            if not self.epoch_len or batches % self.epoch_len:
                return False
            return self.unit.should_stop(batches // self.epoch_len)
        return self.unit.should_stop(batches)

    def next_firing(self, batches: int) -> Optional[int]:
        scale = 1
        if isinstance(self.unit, Epoch):
            if not self.epoch_len:
                return NEVER
            scale = self.epoch_len
        value = self.unit.value
        if isinstance(value, int):
            if value < 1:
                return batches + 1 if scale == 1 else (batches // scale + 1) * scale
            return (batches // (value * scale) + 1) * value * scale
        later = [int(v) * scale for v in value if int(v) * scale > batches]
        return min(later) if later else NEVER


class _FitOperation:
    """The one length fit() trains to, in the shape of a searcher operation for the loop."""

    def __init__(self, batches: int, controller: "_FitController") -> None:
        self._batches = batches
        self._controller = controller
        self.completed = False

    def _report_batches(self, batches: int) -> None:
        """Progress goes to the platform at reporting boundaries and at the end (as in Determined 0.38)."""
        schedule = self._controller._schedule
        if self._batches > 0 and (batches >= self._batches or (schedule and schedule.reporting.fires(batches))):
            self._controller.core.train.report_progress(min(1.0, batches / self._batches))

    def report_completed(self, searcher_metric: Any) -> None:
        """Nothing is sent: the search follows the validation metrics (Determined 0.38)."""
        self.completed = True


class FitControllerMixin:
    """What a controller does when `fit()` runs it (mixed into the PyTorch and DeepSpeed controllers): it adds
    `batches`/`epochs` to every report, writes the Trainer's checkpoint files (trial_state.pkl, code/, `is_trainer`
    in load_data.json) and resumes from the counters a checkpoint holds. The controller supplies
    `_load_checkpoint(uuid)` (load a checkpoint, return its loop state) and calls `_write_checkpoint_extras` /
    `_read_checkpoint_extras` while a checkpoint's directory is there."""

    _loaded_trial_state: Optional[Dict[str, Any]] = None
    # The trial's code files (root, files) to copy into every checkpoint's code/, listed at the first checkpoint.
    _code: Optional[Tuple[pathlib.Path, List[pathlib.Path]]] = None

    def _counters(self) -> Dict[str, Any]:
        epoch_len = self._epoch_len
        return {"batches": self.steps_completed, "epochs": self.steps_completed // epoch_len if epoch_len else 0}

    def _load_data(self) -> Dict[str, Any]:
        return {**super()._load_data(), "is_trainer": True}  # type: ignore[misc]

    def _own_trial_id(self) -> Optional[int]:
        return None if self.core.is_local else int(self.core.info.trial_id)

    def _write_checkpoint_extras(self, path: Any) -> None:
        counters = self._counters()
        trial_state = {
            "trial_id": self._own_trial_id(),
            "last_ckpt": self.steps_completed,
            "step_id": self.steps_completed,
            "last_val": self._last_validation,
            "batches_trained": counters["batches"],
            "epochs_trained": counters["epochs"],
        }
        with open(pathlib.Path(path) / TRIAL_STATE_FILE, "wb") as f:
            pickle.dump(trial_state, f)
        if self._code is None:
            self._code = _code_files(self.trial_class)
        root, files = self._code
        for full in files:
            dest = pathlib.Path(path) / CODE_DIR / full.relative_to(root)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(full, dest)

    def _read_checkpoint_extras(self, path: Any, state: Dict[str, Any]) -> None:
        file = pathlib.Path(path) / TRIAL_STATE_FILE
        self._loaded_trial_state = None
        if file.is_file():
            with open(file, "rb") as f:
                self._loaded_trial_state = pickle.load(f)

    def _resume_from(self, uuid: str) -> None:
        """Load checkpoint `uuid` and set the counters: the platform's when it is the trial's latest checkpoint;
        the checkpoint's own when it was written by this trial (or, off the platform, by any local run); else
        (a warm start from another trial's checkpoint) from zero."""
        state = self._load_checkpoint(uuid)
        if not self.core.is_local and uuid == self.core.info.latest_checkpoint:
            self._resume_at_platform_steps(state)
        else:
            trial_state = self._loaded_trial_state
            if trial_state is not None and trial_state.get("trial_id") == self._own_trial_id():
                self.steps_completed = int(trial_state.get("batches_trained") or 0)
                self._last_validation = trial_state.get("last_val")
            elif trial_state is None and self.core.is_local and state and "steps_completed" in state:
                self.steps_completed = int(state["steps_completed"])  # a checkpoint of a Trial class run locally
                self._last_validation = state.get("last_validation")
            else:
                self.steps_completed, self._last_validation = 0, None
            self._last_checkpoint = self.steps_completed
        logger.info("restored checkpoint %s; training continues from batch %d", uuid, self.steps_completed)


class _FitController(FitControllerMixin, PyTorchTrialController):
    """The PyTorch controller as `fit()` runs it."""


def _code_root(trial_class: type) -> Optional[pathlib.Path]:
    """The directory the trial's module is imported from (that of a script run as __main__ too)."""
    module = sys.modules.get(trial_class.__module__)
    file = getattr(module, "__file__", None)
    if not file:
        return None
    root = pathlib.Path(file).resolve().parent
    for _ in range(trial_class.__module__.count(".") if trial_class.__module__ != "__main__" else 0):
        root = root.parent
    return root


def _code_files(trial_class: type) -> Tuple[pathlib.Path, List[pathlib.Path]]:
    """The trial's code directory and its files (honouring .detignore), which every checkpoint's code/ holds so
    that load_trial_from_checkpoint_path can import the trial class from the checkpoint alone; no files when the
    trial comes from an installed package or the directory is too big."""
    from determined.common.context import _ignored, _read_detignore

    root = _code_root(trial_class)
    if root is None or any(part in ("site-packages", "dist-packages") for part in root.parts):
        return pathlib.Path("."), []
    patterns = _read_detignore(root)
    files: List[pathlib.Path] = []
    size = 0
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = pathlib.Path(dirpath).relative_to(root).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and not _ignored(rel_dir + d, True, patterns)]
        for name in filenames:
            full = pathlib.Path(dirpath) / name
            if _ignored(rel_dir + name, False, patterns) or not full.is_file():
                continue
            files.append(full)
            size += full.stat().st_size
            if len(files) > MAX_CODE_FILES or size > MAX_CODE_BYTES:
                logger.warning(
                    "the checkpoint has no code/: %s (the trial's code directory) holds over %d files or %d MiB; "
                    "list what the trial does not need in a .detignore file there", root, MAX_CODE_FILES,
                    MAX_CODE_BYTES // 2**20)
                return root, []
    return root, files


class TrainerContextMixin:
    """The hyperparameters of a Trainer API context are what its `init(hparams=...)` was given (mixed into the
    PyTorch and DeepSpeed trial contexts that `init()` builds)."""

    _hparams_given = True
    _init_name = "det.pytorch.init()"

    def get_hparam(self, name: str) -> Any:
        if not self._hparams_given:
            raise ValueError(
                f"context.get_hparam({name!r}): {self._init_name} was given no hyperparameters (on the platform "
                "too, as in Determined 0.38): pass hparams=det.get_cluster_info().trial.hparams to init(), or give "
                "them to your trial's constructor"
            )
        return super().get_hparam(name)  # type: ignore[misc]


class _TrainerTrialContext(TrainerContextMixin, PyTorchTrialContext):
    """The PyTorchTrialContext of `init()`."""


@contextlib.contextmanager
def trainer_context(
    context_class: Type[PyTorchTrialContext],
    controller_class: Type[PyTorchTrialController],
    launcher: str,
    hparams: Optional[Dict[str, Any]],
    exp_conf: Optional[Dict[str, Any]],
    distributed: Optional[core.DistributedContext],
    enable_tensorboard_logging: bool,
) -> Iterator[Any]:
    """The core context and the trial context (`context_class`, with TrainerContextMixin) of a Trainer API
    `init()`, as `det.pytorch.init` documents it; `controller_class` seeds torch and joins the process group, and
    `launcher` is the module the error for a multi-slot trial without a launcher names."""
    init_name = getattr(context_class, "_init_name", "init()")
    on_platform = bool(os.environ.get("DET_TRIAL_ID"))
    if on_platform and distributed is not None:
        logger.info("%s: distributed=... is ignored inside a trial: the launcher's ranks are used", init_name)
        distributed = None
    with core.init(distributed=distributed, preempt_mode=core.PreemptMode.WorkersAskChief,
                   tensorboard_mode=core.TensorboardMode.MANUAL) as core_context:
        info = core_context.info
        if on_platform:
            config: Dict[str, Any] = dict(info.config)
            slots = int((config.get("resources") or {}).get("slots_per_trial") or 1)
            if slots > 1 and core_context.distributed.size == 1:
                raise ValueError(
                    f"the trial has {slots} slots but this process is the only one: run the script through a "
                    f"launcher, e.g. entrypoint: python3 -m {launcher} python3 train.py"
                )
            seed = int(info.trial_seed)
            _seed_python_and_numpy(seed)
            controller_class.pre_execute_hook(seed, core_context.distributed)
        else:
            config, seed = dict(exp_conf or {}), 0
            controller_class.join_process_group(core_context.distributed)
        context = context_class(core_context, config, dict(hparams or {}), seed)
        context._hparams_given = hparams is not None  # type: ignore[attr-defined]
        context.set_enable_tensorboard_logging(bool(enable_tensorboard_logging))
        try:
            yield context
        finally:
            if context._tensorboard_writer is not None:
                context._tensorboard_writer.flush()


@contextlib.contextmanager
def init(
    *,
    hparams: Optional[Dict[str, Any]] = None,
    exp_conf: Optional[Dict[str, Any]] = None,
    distributed: Optional[core.DistributedContext] = None,
    aggregation_frequency: int = 1,
    enable_tensorboard_logging: bool = True,
) -> Iterator[PyTorchTrialContext]:
    """The PyTorchTrialContext of a Trainer API script, as a context manager: ``with det.pytorch.init() as ctx:``.

    On the platform (inside a trial) the experiment config is the trial's (`exp_conf` is ignored), `distributed`
    is ignored (a launcher's workers join each other and a torch.distributed process group), and `random`,
    numpy and torch are seeded with the trial seed; `hparams` are NOT filled in (as in 0.38): pass
    ``det.get_cluster_info().trial.hparams``. Off the platform the arguments are used as they are and nothing is
    seeded; checkpoints go to ``checkpoints/`` in the data directory and metrics to the log.
    `aggregation_frequency`: batches whose gradients are summed per optimizer step.
    `enable_tensorboard_logging`: whether reported metrics are written to TensorBoard files.
    """
    if isinstance(aggregation_frequency, bool) or not isinstance(aggregation_frequency, int) or \
            aggregation_frequency < 1:
        raise ValueError(f"init(aggregation_frequency=...) must be an int >= 1, got {aggregation_frequency!r}")
    with trainer_context(_TrainerTrialContext, PyTorchTrialController, "determined.launch.torch_distributed",
                         hparams, exp_conf, distributed, enable_tensorboard_logging) as context:
        context._aggregation_frequency = aggregation_frequency
        yield context


_POLICIES = ("best", "all", "none")


def _check_unit(name: str, value: Any, optional: bool = True) -> None:
    if value is None and optional:
        return
    if not isinstance(value, TrainUnit):
        raise TypeError(f"fit({name}=...) must be a det.pytorch.Batch or det.pytorch.Epoch, got {value!r}")


class Trainer:
    """Trains a PyTorchTrial built with the context of `det.pytorch.init()`: ``Trainer(trial, context).fit(...)``."""

    # The controller that fit() runs the trial with (the DeepSpeed Trainer gives its own).
    _controller_class: Type[PyTorchTrialController] = _FitController

    def __init__(self, trial: Any, context: PyTorchTrialContext) -> None:
        self._check_arguments(trial, context)
        self._trial = trial
        self._context = context
        self._core = context._core
        self._info = self._core.info

    @staticmethod
    def _check_arguments(trial: Any, context: Any) -> None:
        from determined.pytorch._trial import PyTorchTrial

        if not isinstance(trial, PyTorchTrial):
            deepspeed_trial = any(c.__name__ == "DeepSpeedTrial" for c in type(trial).__mro__)
            hint = " (a DeepSpeedTrial trains with det.pytorch.deepspeed.Trainer)" if deepspeed_trial else ""
            raise TypeError(f"Trainer(trial, context): trial must be a det.pytorch.PyTorchTrial, got "
                            f"{type(trial).__name__}{hint}")
        if not isinstance(context, PyTorchTrialContext):
            raise TypeError(f"Trainer(trial, context): context must be the PyTorchTrialContext of "
                            f"det.pytorch.init(), got {type(context).__name__}")

    def configure_profiler(self, *args: Any, **kwargs: Any) -> None:
        """Removed in Determined 0.30 (logs an error there too): use fit(profiling_enabled=True) for the system
        metrics, or context.set_profiler(...) for torch.profiler traces."""
        logger.error("Trainer.configure_profiler() has no effect (removed in Determined 0.30): use "
                     "fit(profiling_enabled=True) or context.set_profiler(...)")

    def fit(
        self,
        checkpoint_period: Optional[TrainUnit] = None,
        validation_period: Optional[TrainUnit] = None,
        max_length: Optional[TrainUnit] = None,
        reporting_period: TrainUnit = Batch(100),
        checkpoint_policy: str = "best",
        latest_checkpoint: Optional[str] = None,
        step_zero_validation: bool = False,
        test_mode: bool = False,
        profiling_enabled: bool = False,
    ) -> None:
        """Train the trial to `max_length`, reporting training metrics every `reporting_period`, validating every
        `validation_period` and checkpointing every `checkpoint_period` (None: only at the end), then validate
        and checkpoint if not current.

        Resumes from `latest_checkpoint` (a checkpoint's storage id; on the platform pass
        ``det.get_cluster_info().latest_checkpoint``). `checkpoint_policy`: after each validation, checkpoint
        "best" (when the searcher metric improved), "all" or "none". `step_zero_validation`: validate before
        the first batch. `test_mode` (off the platform): one training batch, one validation batch, a checkpoint.
        `profiling_enabled` (on the platform): report system metrics meanwhile. Returns when training is
        done, or at a boundary once the platform asked the trial to stop (after a checkpoint).
        """
        for name, unit in (("checkpoint_period", checkpoint_period), ("validation_period", validation_period),
                           ("max_length", max_length)):
            _check_unit(name, unit)
        _check_unit("reporting_period", reporting_period, optional=False)
        if checkpoint_policy not in _POLICIES:
            raise ValueError(f"fit(checkpoint_policy={checkpoint_policy!r}): must be one of {', '.join(_POLICIES)}")
        if max_length is not None and not isinstance(max_length.value, int):
            raise ValueError(f"fit(max_length={max_length!r}): a length is one number, Batch(n) or Epoch(n)")
        follow_searcher = False
        if self._core.is_local:
            if test_mode:
                max_length, checkpoint_period, validation_period = Batch(1), None, None
            elif max_length is None:
                raise ValueError("fit(max_length=...) must be set off the platform: e.g. "
                                 "max_length=det.pytorch.Epoch(1) or det.pytorch.Batch(1000)")
            if checkpoint_policy == "best":
                warnings.warn("checkpoint_policy='best' needs the platform's searcher metric; off the platform "
                              "checkpoint_policy='all' is used", UserWarning, stacklevel=2)
                checkpoint_policy = "all"
            if profiling_enabled:
                logger.info("fit(profiling_enabled=True) has no effect off the platform")
        else:
            if test_mode:
                raise ValueError("fit(test_mode=True) runs only off the platform (python train.py); remove it")
            max_length, follow_searcher = self._length_on_platform(max_length)
            if latest_checkpoint is None and self._info.latest_checkpoint is not None:
                warnings.warn(
                    f"fit(latest_checkpoint=None) but the platform restarted this trial from checkpoint "
                    f"{self._info.latest_checkpoint}: training starts from scratch. Pass "
                    "latest_checkpoint=det.get_cluster_info().latest_checkpoint to resume", UserWarning,
                    stacklevel=2)
            if profiling_enabled:
                self._core.profiler.on()
        controller: Any = self._controller_class(type(self._trial), self._context, trial=self._trial)
        if test_mode:
            controller._max_validation_batches = 1
        epoch_len = controller._epoch_len
        units = [u for u in (max_length, checkpoint_period, validation_period, reporting_period) if u is not None]
        if not epoch_len and any(isinstance(u, Epoch) for u in units):
            raise ValueError("fit() got a period or length in pytorch.Epoch, but the training data loader has no "
                             "length (an IterableDataset without __len__): use pytorch.Batch")

        def period(unit: Optional[TrainUnit]) -> Optional[Period]:
            return None if unit is None else _UnitPeriod(unit, epoch_len)

        reporting = period(reporting_period)
        assert reporting is not None
        controller._schedule = Schedule(reporting, period(validation_period), period(checkpoint_period))
        if isinstance(reporting_period, Batch) and isinstance(reporting_period.value, int):
            controller._scheduling_unit = max(1, reporting_period.value)
        controller._checkpoint_policy = checkpoint_policy
        controller._perform_initial_validation = bool(step_zero_validation)

        def restore() -> None:
            if latest_checkpoint is not None:
                controller._resume_from(latest_checkpoint)

        def train() -> None:
            if follow_searcher:
                controller._run_operations()
                return
            assert max_length is not None and isinstance(max_length.value, int)
            batches = max_length.value * (epoch_len or 1) if isinstance(max_length, Epoch) else max_length.value
            controller._run_operation(_FitOperation(batches, controller))

        first_batch = 0 if self._core.is_local else int(self._info.steps_completed)
        controller._run_trial(first_batch, latest_checkpoint, restore, train)

    def _length_on_platform(self, max_length: Optional[TrainUnit]) -> Tuple[Optional[TrainUnit], bool]:
        """The length to train to on the platform, and whether the searcher's operations give it instead."""
        searcher = dict(self._info.config.get("searcher") or {})
        drives = searcher_drives_trials(searcher)
        if max_length is None:
            if searcher.get("max_length") is None:
                raise ValueError(
                    "fit(max_length=X) must be set: the experiment config has no searcher.max_length (Determined "
                    "0.38 leaves the length to the script), e.g. fit(max_length=det.pytorch.Epoch(1))"
                )
            warnings.warn("fit() without max_length takes the length from searcher.max_length, which Determined "
                          "0.38 deprecated: pass fit(max_length=...)", FutureWarning, stacklevel=3)
            if drives:
                return None, True
            gbs = self._context.get_hparams().get("global_batch_size")
            return TrainUnit._from_searcher_length(searcher["max_length"], gbs), False
        time_metric, max_time = searcher.get("time_metric"), searcher.get("max_time")
        if not drives and time_metric in ("batches", "epochs") and max_time is not None and (
                (time_metric == "batches") != isinstance(max_length, Batch) or max_length.value != max_time):
            logger.warning("fit(max_length=%r) differs from the search's time_metric %s with max_time %s: trials "
                           "may end before the top rung, or train past it", max_length, time_metric, max_time)
        if drives:
            logger.warning("fit(max_length=%r): this experiment's searcher (%s with searcher.max_length) sets the "
                           "lengths, as in Determined 0.21-0.37; max_length is not used", max_length,
                           searcher.get("name"))
            return None, True
        return max_length, False
