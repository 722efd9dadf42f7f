"""The Native API for tf.estimator: `init()` returns an EstimatorNativeContext, and the script's call of
`tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)` is then trained by Determined.

Outside a trial process, in cluster mode, `init()` submits the experiment (the script re-runs inside each
trial) and exits when it has run; in local test mode it returns a context whose train_and_evaluate
trains one batch, validates and checkpoints in this process.
"""
import logging
import os
import pathlib
import shutil
import sys
import tempfile
from typing import Any, Dict, List, Optional, Tuple, Union

from determined import core, errors
from determined.experimental._native import Mode

logger = logging.getLogger("determined.estimator")


def _resolve_mode(mode: Union[Mode, str, bool], local: Optional[bool], test: bool) -> Tuple[bool, bool]:
    """(local, test) from the seed's `mode` and the later `local`/`test` flags."""
    if isinstance(mode, bool):  # init(config, True): the later positional `local`
        local, mode = mode if local is None else local, Mode.CLUSTER
    try:
        # Any Mode enum with these values is accepted (determined.experimental.keras has its own).
        mode = Mode(getattr(mode, "value", mode))
    except ValueError:
        raise errors.DeterminedError(
            f"init(): mode must be Mode.CLUSTER or Mode.LOCAL, got {mode!r}"
        ) from None
    if mode is Mode.LOCAL:
        if local is False:
            raise errors.DeterminedError("init(): mode=Mode.LOCAL contradicts local=False; give one of them")
        return True, True
    return bool(local), bool(test)


def init(
    config: Optional[Dict[str, Any]] = None,
    mode: Union[Mode, str, bool] = Mode.CLUSTER,
    context_dir: str = "",
    command: Optional[List[str]] = None,
    master_url: Optional[str] = None,
    *,
    local: Optional[bool] = None,
    test: bool = False,
) -> Any:
    """Create a tf.estimator experiment using the Native API.

    Args:
        config: A dictionary representing the experiment configuration to be associated with the experiment.
        mode: ``Mode.CLUSTER`` (default): submit the experiment to the Determined cluster (with no master
            configured, run it on the embedded master of the local data dir) and exit when it has run.
            ``Mode.LOCAL``: test the experiment in the calling Python process: one batch of training, a
            validation and a checkpoint (into a temporary directory), no master.
        context_dir: The context directory: all model code is executed with it as the working directory.
            Required in CLUSTER mode (it is uploaded with the experiment); defaults to the current directory.
        command: The entrypoint of the training script in the task environment; inferred from ``sys.argv``.
        master_url: The master URL in CLUSTER mode; defaults to ``DET_MASTER``.
        local: The later flag: ``local=True, test=True`` is ``Mode.LOCAL``; ``local=True`` alone runs the
            whole experiment on the embedded master, whatever ``DET_MASTER`` says.
        test: The later flag: shorten the experiment to one batch, one validation and one checkpoint.

    Returns:
        A determined.estimator.EstimatorNativeContext: wrap the optimizer and datasets with it, set its
        ``serving_input_receiver_fns`` if you want SavedModels in the checkpoints, and call
        ``tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)``.
    """
    from determined.estimator import EstimatorNativeContext, EstimatorTrialController
    from determined.estimator import _native as estimator_native
    from determined.experimental import _native

    local_flag, test_flag = _resolve_mode(mode, local, test)
    if os.environ.get("DET_TRIAL_ID"):
        core_context = core.init()
        context = _native_context(EstimatorNativeContext, EstimatorTrialController, core_context)

        def train_in_trial(estimator: Any, train_spec: Any, eval_spec: Any) -> Any:
            try:
                estimator_native.run_native(context, estimator, train_spec, eval_spec)
            finally:
                core_context.close()
                estimator_native.restore_train_and_evaluate()
            sys.exit(0)

        estimator_native.intercept_train_and_evaluate(context, train_in_trial)
        return context

    raw = _native._jsonable(dict(config or {}))
    if local_flag and test_flag:
        return _local_test_context(raw, context_dir)

    from determined.experimental import _run

    desc = _native.submit(raw, context_dir, command, local=local_flag, test=test_flag, master_url=master_url,
                          caller="init()")
    sys.exit(_run.exit_code_for(desc))


def _native_context(context_class: Any, controller_class: Any, core_context: core.Context) -> Any:
    info = core_context.info
    controller_class.pre_execute_hook(info.trial_seed, core_context.distributed)
    return context_class(core_context, info.config, info.hparams, info.trial_seed)


def _local_test_context(raw: Dict[str, Any], context_dir: str) -> Any:
    """Mode.LOCAL: a context whose train_and_evaluate trains one batch, validates and checkpoints here, with
    `context_dir` (when given) as the working directory."""
    from determined import _execution
    from determined.estimator import EstimatorNativeContext, EstimatorTrial, EstimatorTrialController
    from determined.estimator import _native as estimator_native

    if context_dir:
        if not pathlib.Path(context_dir).is_dir():
            raise errors.DeterminedError(f"init(): context_dir {context_dir!r} is not a directory")
        os.chdir(context_dir)
    canonical = _execution._local_config(EstimatorTrial, raw, None, test=True)
    seed = _execution._trial_seed(canonical)
    hparams = _execution._sample_hparams(canonical, seed)
    logger.info("test mode: training the Estimator for one batch with hyperparameters %s", hparams)
    ckpt_dir = tempfile.mkdtemp(prefix="det-test-checkpoints-")
    _execution._seed_python_and_numpy(seed)
    core_context = core._make_local_context(ckpt_dir, [1], canonical, dict(hparams), seed)
    context = _native_context(EstimatorNativeContext, EstimatorTrialController, core_context)

    def train_in_test(estimator: Any, train_spec: Any, eval_spec: Any) -> Tuple[Dict[str, Any], List[Any]]:
        try:
            estimator_native.run_native(context, estimator, train_spec, eval_spec)
            summary = _execution._test_summary(core_context, dict(hparams))
        finally:
            core_context.close()
            shutil.rmtree(ckpt_dir, ignore_errors=True)
            estimator_native.restore_train_and_evaluate()
        return summary["validation_metrics"], []

    estimator_native.intercept_train_and_evaluate(context, train_in_test)
    return context


__all__ = ["Mode", "init"]
