"""determined.experimental.keras.init(): the Native API for tf.keras.

Outside a trial, `init()` submits the calling script as an experiment (cluster or embedded master) and
exits, or, in local test mode, returns a context whose wrapped model's `fit()` trains one batch, validates
and checkpoints in this process. Inside a trial process the same script runs again: `init()` returns a
context backed by the master, and the wrapped model's `fit()` trains the trial, then exits the process.
"""
import logging
import os
import pathlib
import shutil
import sys
import tempfile
from typing import Any, Callable, Dict, List, Optional, Union

import tensorflow as tf

from determined import _execution, core, errors, tensorflow as det_tf
from determined.experimental._native import Mode
from determined.keras import SequenceAdapter, TFKerasNativeContext, TFKerasTrial, TFKerasTrialController

logger = logging.getLogger("determined.keras")

DEFAULT_BATCH_SIZE = 32


def init(
    config: Optional[Dict[str, Any]] = None,
    mode: Union[Mode, str] = Mode.CLUSTER,
    context_dir: str = "",
    command: Optional[List[str]] = None,
    master_url: Optional[str] = None,
    *,
    local: Optional[bool] = None,
    test: Optional[bool] = None,
) -> TFKerasNativeContext:
    """Create a tf.keras experiment using the Native API.

    Args:
        config: A dictionary representing the experiment configuration to be associated with the experiment.
        mode: The ``Mode`` used when creating an experiment. ``Mode.CLUSTER`` (default): submit the
            experiment to the Determined master (``master_url`` or ``DET_MASTER``; with none configured, the
            embedded master of the local data dir runs it in the foreground), then exit. ``Mode.LOCAL``: test
            the experiment in the calling Python process: one batch of training, a validation and a
            checkpoint (deleted afterwards).
        context_dir: A string filepath that defines the context directory. All model code will be executed
            with this as the current working directory. Required in CLUSTER mode (all files in it are
            uploaded); in LOCAL mode it defaults to the current working directory.
        command: A list of strings that is used as the entrypoint of the training script in the trial's
            environment; inferred from ``sys.argv`` by default (required in IPython or Jupyter).
        master_url: An optional string to use as the Determined master URL in submit mode. Will default to
            the value of environment variable ``DET_MASTER`` if not provided.
        local: The later releases' flag (keyword only): True runs without a cluster (with ``test``: the
            one-batch test in this process; without: a full experiment on the embedded master).
        test: The later releases' flag (keyword only): shorten the experiment to one batch, a validation
            and a checkpoint (with ``local=False``: a test-mode experiment on the master).

    Returns:
        A TFKerasNativeContext: wrap the model with ``context.wrap_model``, compile it and call ``fit()``.
    """
    local, test = _flags(mode, local, test)
    raw = _jsonable(dict(config or {}))
    if os.environ.get("DET_TRIAL_ID"):
        return _trial_context()
    if local and test:
        return _local_test_context(raw, context_dir)
    _submit(raw, local, test, context_dir, command, master_url)
    raise AssertionError("unreachable: _submit exits")


def _flags(mode: Union[Mode, str], local: Optional[bool], test: Optional[bool]) -> "tuple[bool, bool]":
    try:
        mode = Mode(mode.value if isinstance(mode, Mode) else mode)
    except ValueError:
        raise errors.DeterminedError(
            f"init(): mode {mode!r} is not one of {', '.join(repr(m.value) for m in Mode)} (use Mode.CLUSTER or "
            "Mode.LOCAL)"
        ) from None
    if local is None and test is None:
        return (True, True) if mode is Mode.LOCAL else (False, False)
    if mode is Mode.LOCAL:
        raise errors.DeterminedError(
            "init(): give either mode=Mode.LOCAL or the local=/test= flags, not both"
        )
    return bool(local), bool(test)


def _jsonable(value: Any) -> Any:
    from determined.experimental import _native

    return _native._jsonable(value)


def _submit(
    raw: Dict[str, Any], local: bool, test: bool, context_dir: str, command: Optional[List[str]],
    master_url: Optional[str],
) -> None:
    from determined.experimental import _native, _run

    desc = _native.submit(raw, context_dir, command, local=local, test=test, master_url=master_url, caller="init()")
    sys.exit(_run.exit_code_for(desc))


def _trial_context() -> TFKerasNativeContext:
    """Inside a trial process: a context backed by the master; fit() trains the trial and exits."""
    core_context = core.init()

    def run_fit(context: TFKerasNativeContext, model: tf.keras.Model, fit_args: Dict[str, Any]) -> Any:
        try:
            _run_controller(context, model, fit_args)
        finally:
            core_context.close()
        sys.exit(0)

    return native_trial_context(core_context, run_fit)


def native_trial_context(
    core_context: core.Context, run_fit: Callable[[TFKerasNativeContext, tf.keras.Model, Dict[str, Any]], Any]
) -> TFKerasNativeContext:
    """The context of a trial's run of a Native API script, whose wrapped model's fit() calls `run_fit`.

    On several slots, what the script builds after init() (its model and optimizer, at module level as
    Horovod-era scripts did) is built in the trial's MultiWorkerMirroredStrategy: it becomes the default
    strategy of the process.
    """
    info = core_context.info
    _seed(info.trial_seed, core_context)
    strategy = det_tf.current_strategy()
    if core_context.distributed.size > 1 and strategy is not None and tf.distribute.get_strategy() is not strategy:
        tf.distribute.experimental_set_strategy(strategy)
    return TFKerasNativeContext(core_context, info.config, info.hparams, info.trial_seed, run_fit)


def _local_test_context(raw: Dict[str, Any], context_dir: str) -> TFKerasNativeContext:
    """LOCAL mode: fit() trains one batch, validates and checkpoints into a temporary directory."""
    if context_dir:
        if not pathlib.Path(context_dir).is_dir():
            raise errors.DeterminedError(f"init(): context_dir {context_dir!r} is not a directory")
        os.chdir(context_dir)
    internal = dict(raw.get("internal") or {})
    internal["native"] = {"command": list(sys.argv)}
    raw["internal"] = internal
    canonical = _execution._local_config(None, raw, None, test=True)  # type: ignore[arg-type]
    seed = _execution._trial_seed(canonical)
    hparams = _execution._sample_hparams(canonical, seed)
    ckpt_dir = tempfile.mkdtemp(prefix="det-test-checkpoints-")
    core_context = core._make_local_context(ckpt_dir, [1], canonical, hparams, seed)
    _seed(seed, core_context)
    logger.info("test mode: one batch with hyperparameters %s", hparams)

    def run_fit(context: TFKerasNativeContext, model: tf.keras.Model, fit_args: Dict[str, Any]) -> Dict[str, Any]:
        try:
            _run_controller(context, model, fit_args)
            return _execution._test_summary(core_context, hparams)
        finally:
            core_context.close()
            shutil.rmtree(ckpt_dir, ignore_errors=True)

    return TFKerasNativeContext(core_context, canonical, hparams, seed, run_fit)


def _seed(seed: int, core_context: core.Context) -> None:
    _execution._seed_python_and_numpy(seed)
    TFKerasTrialController.pre_execute_hook(seed, core_context.distributed)


def _run_controller(context: TFKerasNativeContext, model: tf.keras.Model, fit_args: Dict[str, Any]) -> None:
    trial_class = native_trial_class(model, fit_args)
    TFKerasTrialController(trial_class, context).run()


def _training_loader(fit_args: Dict[str, Any]) -> Any:
    x = fit_args.get("x")
    if x is None:
        raise errors.InvalidTrialError("model.fit() needs the training data: fit(x, y, validation_data=...)")
    if isinstance(x, tf.keras.utils.Sequence) and not isinstance(x, SequenceAdapter):
        if any(k in fit_args for k in ("workers", "use_multiprocessing", "max_queue_size")):
            return SequenceAdapter(
                x,
                use_multiprocessing=bool(fit_args.get("use_multiprocessing", False)),
                workers=int(fit_args.get("workers", 1)),
                max_queue_size=int(fit_args.get("max_queue_size", 10)),
            )
        return x
    if isinstance(x, (tf.data.Dataset, SequenceAdapter)):
        return x
    if fit_args.get("y") is None:
        raise errors.InvalidTrialError(
            "model.fit() got arrays for x but no y: pass the targets, fit(x, y, ...), or a tf.data.Dataset / "
            "Sequence yielding (inputs, targets)"
        )
    if fit_args.get("sample_weight") is not None:
        return (x, fit_args["y"], fit_args["sample_weight"])
    return (x, fit_args["y"])


def _validation_loader(fit_args: Dict[str, Any]) -> Any:
    data = fit_args.get("validation_data")
    if data is None:
        hint = " (validation_split is not supported)" if fit_args.get("validation_split") else ""
        raise errors.InvalidTrialError(
            "model.fit() needs validation_data: the searcher compares trials by a validation metric"
            f"{hint}; pass validation_data=(x_val, y_val), a tf.data.Dataset or a Sequence"
        )
    if isinstance(data, list):
        data = tuple(data)
    return data


def native_trial_class(model: tf.keras.Model, fit_args: Dict[str, Any]) -> type:
    """A TFKerasTrial whose model, loaders and callbacks are those of a wrapped model's fit() call."""
    if fit_args.get("class_weight") is not None:
        raise errors.InvalidTrialError("model.fit(class_weight=...) is not supported; use sample weights instead")
    for ignored in ("epochs", "steps_per_epoch", "initial_epoch", "validation_steps", "validation_freq"):
        if fit_args.get(ignored) is not None:
            logger.info("model.fit(%s=...) is ignored: the searcher's max_length says how long to train", ignored)
    train = _training_loader(fit_args)
    validation = _validation_loader(fit_args)
    callbacks = list(fit_args.get("callbacks") or [])
    batch_size = fit_args.get("batch_size") or DEFAULT_BATCH_SIZE

    class NativeTFKerasTrial(TFKerasTrial):
        _det_native = True
        _det_batch_size = batch_size

        def build_model(self) -> tf.keras.Model:
            return model

        def build_training_data_loader(self) -> Any:
            return train

        def build_validation_data_loader(self) -> Any:
            return validation

        def keras_callbacks(self) -> List[tf.keras.callbacks.Callback]:
            return callbacks

    return NativeTFKerasTrial
