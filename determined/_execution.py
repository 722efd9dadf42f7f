"""Running a Trial class: with a core context (harness, Native API), as a one-batch test, or as a bare instance."""
import importlib
import inspect
import logging
import pathlib
import random
import shutil
import sys
import tempfile
import traceback
from typing import Any, Dict, List, Optional, Type

from determined import _numpy_compat, core, errors
from determined._trial import Trial, TrialController, construct_trial

logger = logging.getLogger("determined")

# Merged under a user's config for the local modes (test_one_batch, create_trial_instance).
_LOCAL_DEFAULT_CONFIG: Dict[str, Any] = {
    "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": 100}},
    "hyperparameters": {},
}
# Sections that make no sense for a one-batch test in this process; dropped with a log line.
_TEST_DROPPED_SECTIONS = ("bind_mounts", "checkpoint_storage", "environment", "resources", "optimizations")


def _seed_python_and_numpy(seed: int) -> None:
    random.seed(seed)
    try:
        import numpy as np
    except ImportError:
        return
    np.random.seed(seed % 2**32)


def _controller_class(trial_class: Type[Trial]) -> Type[TrialController]:
    if not (inspect.isclass(trial_class) and issubclass(trial_class, Trial)):
        raise errors.InvalidTrialError(
            f"{trial_class!r} is not a Trial class: subclass a Trial API such as det.pytorch.PyTorchTrial"
        )
    controller = getattr(trial_class, "trial_controller_class", None)
    if controller is None or not (inspect.isclass(controller) and issubclass(controller, TrialController)):
        raise errors.InvalidTrialError(
            f"{trial_class.__name__} has no trial_controller_class: subclass a Trial API such as "
            "det.pytorch.PyTorchTrial rather than det.Trial itself"
        )
    return controller


def _build_trial_context(trial_class: Type[Trial], core_context: core.Context) -> Any:
    info = core_context.info
    return trial_class.trial_context_class(core_context, info.config, info.hparams, info.trial_seed)


def run_trial(trial_class: Type[Trial], core_context: core.Context) -> None:
    """Drive `trial_class` with `core_context` until its searcher has no more work or it is preempted.

    Seeds `random` and numpy with the trial seed, calls the controller's `pre_execute_hook` (where a
    framework seeds itself), builds the trial context and the controller, and runs it. A `det.InvalidHP`
    from the trial's code ends the trial with the early exit INVALID_HP (no error, no restart). With
    `profiling.enabled` in the config the profiler reports the system metrics meanwhile.
    """
    controller_class = _controller_class(trial_class)
    _numpy_compat.install()  # NumPy's removed aliases (np.int, ...) that Trial code of 0.12-0.26 uses
    seed = core_context.info.trial_seed
    _seed_python_and_numpy(seed)
    controller_class.pre_execute_hook(seed, core_context.distributed)
    context = _build_trial_context(trial_class, core_context)
    if (core_context.info.config.get("profiling") or {}).get("enabled"):
        core_context.profiler.on()  # Determined 0.30+: profiling.enabled collects the system metrics
    try:
        controller = controller_class(trial_class, context)
        controller.run()
    except errors.InvalidHP as e:
        # Not a failure: the trial ends here (no restart) and the search method hears INVALID_HP.
        logger.warning("the trial's hyperparameters are invalid (det.InvalidHP: %s); it stops", e)
        core_context.train.report_early_exit("INVALID_HP")


def run_native_trial(trial_def: Type[Trial]) -> None:
    """Inside a trial process started for a Native API experiment: run `trial_def` and exit with status 0."""
    with core.init() as core_context:
        run_trial(trial_def, core_context)
    sys.exit(0)


def _forget_foreign_module(module: str, model_dir: pathlib.Path) -> None:
    """Drop a cached module of the same name that was imported from somewhere else than `model_dir`."""
    top = module.split(".")[0]
    cached = sys.modules.get(top)
    if cached is None:
        return
    origin = getattr(cached, "__file__", None)
    if origin and pathlib.Path(origin).resolve().is_relative_to(model_dir):
        return
    for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
        del sys.modules[name]


def _top_level_modules(model_dir: pathlib.Path) -> List[str]:
    """The names the model dir's files would be imported as: `x.py` and packages `x/__init__.py`."""
    names = [p.stem for p in model_dir.glob("*.py")]
    names += [p.parent.name for p in model_dir.glob("*/__init__.py")]
    return sorted(set(names))


def put_model_dir_first(model_dir: "str | pathlib.Path") -> pathlib.Path:
    """Put `model_dir` first on sys.path and forget cached modules of the same names imported elsewhere.

    So that a model dir's `model_def.py` and its helpers (`data.py`, ...) are the ones imported, even after
    another experiment's model code was loaded in this process.
    """
    root = pathlib.Path(model_dir).resolve()
    if str(root) in sys.path:
        sys.path.remove(str(root))
    sys.path.insert(0, str(root))
    for name in _top_level_modules(root):
        _forget_foreign_module(name, root)
    importlib.invalidate_caches()
    return root


def import_trial_class(spec: str, code_dir: "Optional[str | pathlib.Path]" = None) -> type:
    """The class named by a checkpoint's `module:QualName`, imported from `code_dir` when given, else sys.path."""
    if code_dir is not None and pathlib.Path(code_dir).is_dir():
        put_model_dir_first(code_dir)
    module_name, _, qualname = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise errors.DeterminedError(
            f"cannot import {module_name!r} to rebuild the trial {spec}: {e}; put the experiment's model "
            "definition directory on sys.path first"
        ) from e
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise errors.DeterminedError(f"module {module_name!r} has no {qualname!r} (trial class {spec})")
    return obj


def load_trial_class(entrypoint: str, model_dir: str) -> Type[Trial]:
    """Import `module.path:ClassName` with `model_dir` first on sys.path and return the Trial class."""
    if not isinstance(entrypoint, str) or entrypoint.count(":") != 1 or not all(entrypoint.split(":")):
        raise errors.InvalidTrialError(
            f"entrypoint {entrypoint!r} must look like 'module.path:TrialClass' (e.g. model_def:MyTrial)"
        )
    module_name, class_name = entrypoint.split(":")
    root = pathlib.Path(model_dir).resolve()
    if not root.is_dir():
        raise errors.InvalidTrialError(f"model directory {model_dir!r} does not exist")
    put_model_dir_first(root)
    _forget_foreign_module(module_name, root)
    from determined.tensorflow import _tf1_compat

    _tf1_compat.install_when_imported()  # TensorFlow 1.x idioms of the trial's code, if it imports TensorFlow
    _numpy_compat.install()  # NumPy's removed aliases (np.int, ...), also at the trial module's import time
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and (module_name == e.name or module_name.startswith(e.name + ".")):
            pys = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py"))[:10]
            raise errors.InvalidTrialError(
                f"entrypoint {entrypoint!r}: no module {module_name!r} in the model directory {str(root)!r}; "
                f"Python files there: {', '.join(pys) or 'none'}"
            ) from None
        raise _user_code_error(entrypoint, e) from e
    except Exception as e:
        raise _user_code_error(entrypoint, e) from e
    found = getattr(module, class_name, None)
    if found is None:
        trials = sorted(
            name for name, value in vars(module).items()
            if inspect.isclass(value) and issubclass(value, Trial) and value.__module__ == module.__name__
        )
        raise errors.InvalidTrialError(
            f"entrypoint {entrypoint!r}: module {module_name!r} has no {class_name!r}; Trial classes defined "
            f"there: {', '.join(trials) or 'none'}"
        )
    if not (inspect.isclass(found) and issubclass(found, Trial)):
        raise errors.InvalidTrialError(
            f"entrypoint {entrypoint!r}: {class_name} is not a subclass of det.Trial "
            "(subclass det.pytorch.PyTorchTrial or another Trial API)"
        )
    return found


def _user_code_error(entrypoint: str, e: BaseException) -> errors.InvalidTrialError:
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    return errors.InvalidTrialError(f"entrypoint {entrypoint!r}: importing the model code failed:\n{text}")


def _entrypoint_of(trial_class: Type[Any]) -> str:
    return f"{trial_class.__module__}:{trial_class.__qualname__}"


def _local_config(
    trial_class: Type[Any],
    config: Optional[Dict[str, Any]],
    hparams: Optional[Dict[str, Any]],
    *,
    test: bool,
) -> Dict[str, Any]:
    """The canonical config of a local run: the user's config shallow-merged over the local defaults.

    A config without `hyperparameters` gets the given hparams as constants.
    """
    from determined import config as det_config

    raw = {**_LOCAL_DEFAULT_CONFIG, **dict(config or {})}
    if not (config or {}).get("hyperparameters") and hparams:
        raw["hyperparameters"] = {name: {"type": "const", "val": value} for name, value in hparams.items()}
    if test:
        for section in _TEST_DROPPED_SECTIONS:
            if section in raw:
                logger.info("test mode ignores the config's %r section", section)
                del raw[section]
    if not raw.get("entrypoint") and not (raw.get("internal") or {}).get("native"):
        raw["entrypoint"] = _entrypoint_of(trial_class)
    canonical = dict(det_config.load_experiment_config(raw))  # 0.12 names (batches_per_step...) upgraded first
    if test:
        canonical["scheduling_unit"] = 1
    return canonical


def _sample_hparams(config: Dict[str, Any], seed: int) -> Dict[str, Any]:
    from determined import config as det_config

    return dict(det_config.sample_hparams(config.get("hyperparameters") or {}, random.Random(seed)))


def _trial_seed(config: Dict[str, Any]) -> int:
    seed = (config.get("reproducibility") or {}).get("experiment_seed")
    return int(seed) if seed is not None else random.SystemRandom().randrange(2**31)


def test_one_batch(
    trial_class: Type[Trial],
    config: Optional[Dict[str, Any]] = None,
    hparams: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """Train one batch, validate, checkpoint into a temporary directory (deleted afterwards), in this process.

    Returns `{"hparams", "training_metrics", "batch_metrics", "validation_metrics", "checkpoint_uuid",
    "checkpoint_resources"}`; raises when the controller reported no training or validation metrics.
    """
    canonical = _local_config(trial_class, config, hparams, test=True)
    seed = _trial_seed(canonical)
    if hparams is None:
        hparams = _sample_hparams(canonical, seed)
    logger.info("test mode: training %s for one batch with hyperparameters %s", trial_class.__name__, hparams)
    ckpt_dir = tempfile.mkdtemp(prefix="det-test-checkpoints-")
    try:
        with core._make_local_context(ckpt_dir, [1], canonical, dict(hparams), seed) as core_context:
            run_trial(trial_class, core_context)
            return _test_summary(core_context, dict(hparams))
    finally:
        shutil.rmtree(ckpt_dir, ignore_errors=True)


def _test_summary(core_context: core.Context, hparams: Dict[str, Any]) -> Dict[str, Any]:
    if core_context.train.early_exit_reason == "INVALID_HP":
        raise errors.DeterminedError(
            f"test mode: the trial raised det.InvalidHP with hyperparameters {hparams} (see the log line above); "
            "a search would skip them"
        )
    training = core_context.train.training_history
    validation = core_context.train.validation_history
    if not training:
        raise errors.DeterminedError("test mode: the trial controller reported no training metrics for its batch")
    if not validation:
        raise errors.DeterminedError("test mode: the trial controller reported no validation metrics")
    checkpoints = core_context.checkpoint.reported
    summary = {
        "hparams": hparams,
        "training_metrics": training[-1]["metrics"],
        "batch_metrics": training[-1].get("batch_metrics") or [],
        "validation_metrics": validation[-1]["metrics"],
        "checkpoint_uuid": checkpoints[-1]["uuid"] if checkpoints else None,
        "checkpoint_resources": checkpoints[-1]["resources"] if checkpoints else {},
    }
    logger.info(
        "test mode passed: training metrics %s, validation metrics %s, checkpoint %s",
        summary["training_metrics"], summary["validation_metrics"], summary["checkpoint_uuid"],
    )
    return summary


def create_trial_instance(
    trial_def: Type[Trial],
    checkpoint_dir: str,
    config: Optional[Dict[str, Any]] = None,
    hparams: Optional[Dict[str, Any]] = None,
) -> Trial:
    """An instance of `trial_def` built with a local context (no master) whose checkpoints live in
    `checkpoint_dir`; a minimal default config is used when none is given, hparams are sampled when not."""
    _controller_class(trial_def)
    canonical = _local_config(trial_def, config, hparams, test=False)
    seed = _trial_seed(canonical)
    if hparams is None:
        hparams = _sample_hparams(canonical, seed)
    pathlib.Path(checkpoint_dir).mkdir(parents=True, exist_ok=True)
    lengths: List[int] = []
    core_context = core._make_local_context(checkpoint_dir, lengths, canonical, dict(hparams), seed)
    _seed_python_and_numpy(seed)
    _controller_class(trial_def).pre_execute_hook(seed, core_context.distributed)
    context = _build_trial_context(trial_def, core_context)
    return construct_trial(trial_def, context)
