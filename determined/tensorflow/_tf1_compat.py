"""Code written for the TensorFlow of Determined 0.12/0.13 (TF 1.15) and of later TF 2.x releases, run on TF 2.15.

Python 3.11 has no TF 1.15 and Keras 2.15 changed a few things such code relies on. This module carries the
common idioms over, for tf.keras and tf.estimator alike (docs/keras.md and docs/estimator.md list them):

* Optimizers built with TF 1.x arguments: `tf.keras.optimizers.SGD(lr=0.1, decay=1e-6)`. Keras 2.15's optimizers
  refuse `decay` and silently ignore `lr` (training then runs at the default rate); built with either, or built
  where TensorFlow does not execute eagerly (eager execution disabled, an Estimator's graph), where Keras 2.15's
  optimizers cannot train, `tf.keras.optimizers.<Name>` returns its `tf.keras.optimizers.legacy.<Name>`, the
  optimizer those releases had under that name.
* `tensorflow.python.keras.*` imports. TF 1.x's tf.keras lived there; TF 2.15 keeps a stale internal copy of an
  older Keras there (whose `Sequence`, layers and optimizers are not tf.keras's) or nothing at all
  (`tensorflow.python.keras.datasets`). Once TensorFlow is imported, those module names are tf.keras's modules.
* Metric names: TF 1.x named the metric compiled as `"accuracy"` `acc` (and `"crossentropy"` `ce`); Keras 2.15
  keeps `accuracy`. `tf1_metric_aliases` adds the TF 1.x name a config asks for (`searcher.metric: val_acc`).
* `fill_tf1_names()`: TF 1.x names missing from the `tf` namespace (`tf.train.AdamOptimizer`, `tf.placeholder`,
  ...), for the graph-mode code of Tensorpack trials.
* `v1_behavior()`: TF 1.x graph-building behaviour for a while (Estimator and Tensorpack trials).
* `tf.contrib`: the names of TF 1.x's tf.contrib that code of that era relied on (`tf.contrib.layers.optimize_loss`,
  ...) and a clear error for the others (determined/tensorflow/_tf1_contrib.py).

`install_when_imported()` needs no TensorFlow: the harness calls it before it imports a trial's code, and the
shims are installed the moment that code imports TensorFlow; `install()` installs them at once.
"""
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import re
import sys
import threading
from types import ModuleType
from typing import Any, Dict, Iterable, Iterator, Optional, Sequence

from determined.common.import_hooks import call_after_import

logger = logging.getLogger("determined.tensorflow")

_lock = threading.RLock()
_installed = False

# ---------------------------------------------------------------- optimizers


def _legacy_twin(cls: type) -> Optional[type]:
    """`tf.keras.optimizers.legacy.<Name>` for Keras 2.15's own `<Name>` (not for a user's subclass)."""
    if not cls.__module__.startswith("keras.src.optimizers."):
        return None
    import tensorflow as tf

    twin = getattr(tf.keras.optimizers.legacy, cls.__name__, None)
    return twin if isinstance(twin, type) else None


def _wants_legacy(kwargs: Dict[str, Any]) -> bool:
    if "lr" in kwargs or "decay" in kwargs:
        return True
    import tensorflow as tf
    from tensorflow.python import tf2

    return not (tf2.enabled() and tf.executing_eagerly())


def _optimizer_new(cls: type, *args: Any, **kwargs: Any) -> Any:
    """`Optimizer.__new__` of Keras 2.15: the legacy optimizer of the same name where the call is TF 1.x's."""
    twin = _legacy_twin(cls)
    if twin is not None and _wants_legacy(kwargs):
        if "lr" in kwargs and not args and "learning_rate" not in kwargs:
            kwargs["learning_rate"] = kwargs.pop("lr")  # TF 1.x's name, which the legacy optimizer warns about
        return twin(*args, **kwargs)
    return object.__new__(cls)


def _install_legacy_optimizers() -> None:
    try:
        from keras.src.optimizers import optimizer as keras_optimizer
    except ImportError:  # not Keras 2.15's layout: nothing to carry over
        return
    keras_optimizer.Optimizer.__new__ = _optimizer_new  # type: ignore[assignment]


# ---------------------------------------------------------------- tensorflow.python.keras

_LEGACY_KERAS = "tensorflow.python.keras"
_KERAS = "keras.src"
# TF 1.x module paths that Keras 2.15 keeps elsewhere (the longest prefix wins).
_RENAMES = (
    ("optimizer_v2.learning_rate_schedule", "optimizers.schedules.learning_rate_schedule"),
    ("optimizer_v2", "optimizers.legacy"),
)
# The public modules user code imports from tensorflow.python.keras; TensorFlow itself imports its stale copies
# of them, so they are replaced in sys.modules (TensorFlow's own modules keep the references they hold).
_PUBLIC_MODULES = (
    "activations", "backend", "callbacks", "constraints", "initializers", "layers", "losses", "metrics", "models",
    "optimizers", "regularizers", "optimizer_v2", "optimizer_v2.adadelta", "optimizer_v2.adagrad",
    "optimizer_v2.adam", "optimizer_v2.adamax", "optimizer_v2.ftrl", "optimizer_v2.gradient_descent",
    "optimizer_v2.nadam", "optimizer_v2.optimizer_v2", "optimizer_v2.rmsprop", "optimizer_v2.learning_rate_schedule",
    "engine.training", "engine.sequential", "engine.input_layer", "utils.data_utils", "utils.np_utils",
    "utils.generic_utils", "utils.layer_utils",
)


def keras_module_for(legacy_name: str) -> Optional[str]:
    """The tf.keras module of a TF 1.x `tensorflow.python.keras[.<path>]` name, or None for another name."""
    if legacy_name == _LEGACY_KERAS:
        return _KERAS
    if not legacy_name.startswith(_LEGACY_KERAS + "."):
        return None
    rest = legacy_name[len(_LEGACY_KERAS) + 1:]
    for old, new in _RENAMES:
        if rest == old or rest.startswith(old + "."):
            rest = new + rest[len(old):]
            break
    return f"{_KERAS}.{rest}"


def _exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


class _AliasLoader(importlib.abc.Loader):
    """Loads a TF 1.x module name as the tf.keras module that replaces it (the same module object)."""

    def __init__(self, target: str) -> None:
        self._target = target
        self._target_spec: Any = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self._target)
        self._target_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self._target_spec  # the import system set the alias's spec on it


class _LegacyKerasFinder(importlib.abc.MetaPathFinder):
    """`tensorflow.python.keras.<path>` for a module TensorFlow has not imported: tf.keras's module when the name
    is below one already replaced, or when TF 2.15 has no such module (`tensorflow.python.keras.datasets`)."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]], target: Any = None) -> Any:
        target_name = keras_module_for(fullname)
        if target_name is None or fullname == _LEGACY_KERAS:
            return None
        parent_name = fullname.rpartition(".")[0]
        parent = sys.modules.get(parent_name)
        parent_replaced = parent is not None and getattr(parent, "__name__", parent_name) != parent_name
        if not parent_replaced and importlib.machinery.PathFinder.find_spec(fullname, path) is not None:
            return None  # TensorFlow's own module, below one that is not replaced
        if not _exists(target_name):
            return None
        return importlib.util.spec_from_loader(
            fullname, _AliasLoader(target_name), is_package=_is_package(target_name)
        )


def _is_package(name: str) -> bool:
    spec = importlib.util.find_spec(name)
    return spec is not None and spec.submodule_search_locations is not None


def _install_keras_modules() -> None:
    if not _exists(_KERAS):
        return
    for rest in _PUBLIC_MODULES:
        legacy_name = f"{_LEGACY_KERAS}.{rest}"
        target_name = keras_module_for(legacy_name)
        assert target_name is not None
        try:
            module = importlib.import_module(target_name)
        except ImportError as e:
            logger.debug("no tf.keras module %s for %s: %s", target_name, legacy_name, e)
            continue
        sys.modules[legacy_name] = module
        parent_name, _, leaf = legacy_name.rpartition(".")
        parent = sys.modules.get(parent_name)
        if parent is not None and getattr(parent, "__name__", None) == parent_name:
            setattr(parent, leaf, module)
    if not any(isinstance(f, _LegacyKerasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _LegacyKerasFinder())


# ---------------------------------------------------------------- metric names

_TF1_METRIC_SUFFIXES = (("acc", "accuracy"), ("ce", "crossentropy"))


def tf2_metric_name(tf1_name: str) -> Optional[str]:
    """Keras 2.15's name of a metric TF 1.x named `tf1_name` (`val_acc` -> `val_accuracy`), or None."""
    for old, new in _TF1_METRIC_SUFFIXES:
        match = re.fullmatch(rf"(.*_)?{old}", tf1_name)
        if match:
            return f"{match.group(1) or ''}{new}"
    return None


def tf1_metric_aliases(metrics: Dict[str, Any], wanted: Iterable[Optional[str]]) -> Dict[str, Any]:
    """`metrics` with the TF 1.x names in `wanted` that it lacks added, each the value of its Keras 2.15 name."""
    out = dict(metrics)
    for name in wanted:
        if not name or name in out:
            continue
        current = tf2_metric_name(name)
        if current is not None and current in out:
            out[name] = out[current]
    return out


# ---------------------------------------------------------------- TF 1.x names in the tf namespace


def fill_tf1_names() -> None:
    """Add to `tf` and its submodules the names of `tf.compat.v1` they lack (`tf.train.AdamOptimizer`,
    `tf.placeholder`, `tf.variable_scope`, ...): TF 1.x graph-mode code reads them there. Names both have keep
    TF 2's meaning."""
    import tensorflow as tf

    def fill(namespace: Any, v1: Any, depth: int) -> None:
        for name in dir(v1):
            if name.startswith("_"):
                continue
            value = getattr(v1, name, None)
            if not hasattr(namespace, name):
                setattr(namespace, name, value)
                continue
            current = getattr(namespace, name)
            # Recurse into TensorFlow's own API modules only (tf.keras is Keras's, and the same in both).
            if depth and isinstance(value, ModuleType) and isinstance(current, ModuleType) and current is not value \
                    and str(getattr(current, "__name__", "")).startswith("tensorflow."):
                fill(current, value, depth - 1)

    with _lock:
        fill(tf, tf.compat.v1, 1)
        # Tensorpack, imported on TF 2 first, puts tf.keras.layers at `tf.layers` (TF 2.15 has none); TF 1.x code
        # and Tensorpack's own layers mean TF 1.x's layers there, which also add batch norm's moving-average
        # updates to the UPDATE_OPS collection that a train op runs (tf.contrib.layers.optimize_loss, ...).
        layers = getattr(tf, "layers", None)
        if isinstance(layers, ModuleType) and str(getattr(layers, "__name__", "")).startswith("keras."):
            tf.layers = tf.compat.v1.layers


# ---------------------------------------------------------------- V1 behaviour


@contextlib.contextmanager
def v1_behavior() -> Iterator[None]:
    """TensorFlow V1 behaviour while it lasts, as Determined 0.12-0.20 gave TF 1.x-era code: graphs are built with
    V1 variables, control flow, tensor shapes and tensor comparison; all of it is restored afterwards. Eager
    execution stays available outside of graphs (the dataset cache and SavedModel loading need it)."""
    import tensorflow as tf
    from tensorflow.python import tf2
    from tensorflow.python.framework import tensor as tensor_lib
    from tensorflow.python.framework import tensor_shape

    was_tf2 = tf2.enabled()
    was_shape_v2 = tensor_shape._TENSORSHAPE_V2_OVERRIDE
    was_resource = tf.compat.v1.resource_variables_enabled()
    was_cf_v2 = tf.compat.v1.control_flow_v2_enabled()
    was_equality = tensor_lib.Tensor._USE_EQUALITY
    tf2.disable()
    tf.compat.v1.disable_v2_tensorshape()
    tf.compat.v1.disable_resource_variables()
    tf.compat.v1.disable_control_flow_v2()
    tf.compat.v1.disable_tensor_equality()
    try:
        yield
    finally:
        if was_tf2:
            tf2.enable()
        tensor_shape._TENSORSHAPE_V2_OVERRIDE = was_shape_v2
        if was_resource:
            tf.compat.v1.enable_resource_variables()
        if was_cf_v2:
            tf.compat.v1.enable_control_flow_v2()
        tensor_lib.Tensor._USE_EQUALITY = was_equality


# ---------------------------------------------------------------- installation


def install() -> None:
    """Install the shims (TensorFlow must be importable; it is imported). Idempotent."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
        import tensorflow  # noqa: F401 -- the modules replaced below are TensorFlow's

        _install_legacy_optimizers()
        _install_keras_modules()
        from determined.tensorflow import _tf1_contrib

        _tf1_contrib.install()


def install_when_imported() -> None:
    """Install the shims now if TensorFlow is imported, else when it is (this imports no TensorFlow)."""
    call_after_import("tensorflow", install)
