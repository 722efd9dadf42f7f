"""`tf.contrib` of TF 1.x, for the graph-mode code of Estimator and Tensorpack trials written for TF 1.15.

TF 2.15 has no `tf.contrib`. Code of Determined 0.12/0.13's era took a few of its names for granted, most of all
`tf.contrib.layers.optimize_loss` in an Estimator's model_fn. `install()` (run by _tf1_compat.install(), with the
other TF 1.x idioms) puts a `tf.contrib` back (the attribute and the `tensorflow.contrib[.layers|.framework]`
modules) holding those names, each with TF 1.15's signature and meaning (docs/estimator.md lists them):

* `tf.contrib.layers`: `optimize_loss`, `OPTIMIZER_CLS_NAMES`, `OPTIMIZER_SUMMARIES`, the regularizers
  (`l1_regularizer`, `l2_regularizer`, `l1_l2_regularizer`, `sum_regularizer`, `apply_regularization`) and the
  initializers (`xavier_initializer`, `xavier_initializer_conv2d`, `variance_scaling_initializer`);
* `tf.contrib.framework`: `get_or_create_global_step`, `get_global_step`, `assert_global_step`.

Any other name of `tf.contrib` raises `ContribNameError` (an AttributeError, so `hasattr` and `getattr(...,
default)` keep working) and any other `tensorflow.contrib.*` module import raises ModuleNotFoundError (an
ImportError, so `try: from tensorflow.contrib... except ImportError:` falls back as written); both name what is
missing, say that TF 1.x's tf.contrib is gone in TF 2.15 and what to use instead.
"""
import importlib.abc
import importlib.machinery
import math
import numbers
import sys
from types import ModuleType
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import tensorflow as tf

# ---------------------------------------------------------------- optimize_loss

OPTIMIZER_CLS_NAMES: Dict[str, Callable[..., Any]] = {
    "Adagrad": tf.compat.v1.train.AdagradOptimizer,
    "Adam": tf.compat.v1.train.AdamOptimizer,
    "Ftrl": tf.compat.v1.train.FtrlOptimizer,
    "Momentum": lambda learning_rate: tf.compat.v1.train.MomentumOptimizer(learning_rate, momentum=0.9),
    "RMSProp": tf.compat.v1.train.RMSPropOptimizer,
    "SGD": tf.compat.v1.train.GradientDescentOptimizer,
}

OPTIMIZER_SUMMARIES = ["learning_rate", "loss", "gradients", "gradient_norm", "global_gradient_norm"]
_DEFAULT_SUMMARIES = ["loss", "learning_rate", "global_gradient_norm"]

GradsAndVars = List[Tuple[Any, Any]]


def _v1_optimizer_types() -> Tuple[type, ...]:
    return (tf.compat.v1.train.Optimizer,)


def _keras_legacy_optimizer_types() -> Tuple[type, ...]:
    legacy = getattr(getattr(tf.keras.optimizers, "legacy", None), "Optimizer", None)
    return (legacy,) if isinstance(legacy, type) else ()


def _is_optimizer(obj: Any) -> bool:
    return isinstance(obj, _v1_optimizer_types() + _keras_legacy_optimizer_types())


def _is_optimizer_class(obj: Any) -> bool:
    return isinstance(obj, type) and (
        issubclass(obj, _v1_optimizer_types() + _keras_legacy_optimizer_types())
        or issubclass(obj, tf.keras.optimizers.Optimizer)  # built in the graph it is the legacy one (_tf1_compat)
    )


def _check_trainable_optimizer(opt: Any) -> Any:
    if _is_optimizer(opt):
        return opt
    if isinstance(opt, tf.keras.optimizers.Optimizer):
        raise ValueError(
            f"optimize_loss: the Keras optimizer {type(opt).__name__} was built outside of a graph, and Keras "
            f"2.15's optimizers cannot train a graph: build it inside the model_fn (it is then the legacy one), "
            f"or use tf.keras.optimizers.legacy.{type(opt).__name__} or a tf.compat.v1.train optimizer"
        )
    raise ValueError(
        f"optimize_loss: optimizer must be an optimizer instance (tf.compat.v1.train.Optimizer or a "
        f"tf.keras.optimizers.legacy optimizer), got {type(opt).__name__}"
    )


def _learning_rate_tensor(learning_rate: Any) -> Any:
    if isinstance(learning_rate, (tf.Tensor, tf.Variable)):
        if learning_rate.shape.ndims not in (None, 0):
            raise ValueError(f"optimize_loss: learning_rate must be a scalar, got shape {learning_rate.shape}")
        return learning_rate
    if isinstance(learning_rate, numbers.Real) and not isinstance(learning_rate, bool):
        return tf.compat.v1.get_variable(
            "learning_rate", [], dtype=tf.float32, trainable=False,
            initializer=tf.compat.v1.constant_initializer(float(learning_rate)),
        )
    raise ValueError(f"optimize_loss: learning_rate must be a float or a scalar Tensor, got {learning_rate!r}")


def _make_optimizer(optimizer: Any, lr: Any) -> Any:
    if isinstance(optimizer, str):
        if optimizer not in OPTIMIZER_CLS_NAMES:
            raise ValueError(
                f"optimize_loss: unknown optimizer name {optimizer!r}; the names are "
                f"{sorted(OPTIMIZER_CLS_NAMES)} (or give an optimizer instance, class or function)"
            )
        if lr is None:
            raise ValueError(f"optimize_loss: optimizer {optimizer!r} is a name, so learning_rate must be given")
        return OPTIMIZER_CLS_NAMES[optimizer](learning_rate=lr)
    if _is_optimizer_class(optimizer):
        if lr is None:
            raise ValueError(
                f"optimize_loss: optimizer {optimizer.__name__} is a class, so learning_rate must be given"
            )
        return _check_trainable_optimizer(optimizer(learning_rate=lr))
    if _is_optimizer(optimizer) or isinstance(optimizer, tf.keras.optimizers.Optimizer):
        return _check_trainable_optimizer(optimizer)
    if callable(optimizer):
        return _check_trainable_optimizer(optimizer(lr) if lr is not None else optimizer())
    raise ValueError(
        f"optimize_loss: optimizer must be a name ({sorted(OPTIMIZER_CLS_NAMES)}), an optimizer class or "
        f"instance, or a function of the learning rate returning an optimizer; got {optimizer!r}"
    )


def _is_resource_variable(var: Any) -> bool:
    return hasattr(var, "handle") and not isinstance(var, tf.Tensor)


def _dense_values(grad: Any) -> Any:
    return grad.values if isinstance(grad, tf.IndexedSlices) else grad


def _map_gradient(grad: Any, fn: Callable[[Any], Any]) -> Any:
    """`fn` applied to the values of a gradient (dense, or the values of IndexedSlices)."""
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(fn(grad.values), grad.indices, grad.dense_shape)
    return fn(grad)


def _add_noise(grads_and_vars: GradsAndVars, scale: float) -> GradsAndVars:
    out = []
    for grad, var in grads_and_vars:
        if grad is not None:
            grad = _map_gradient(
                grad, lambda values: values + scale * tf.random.truncated_normal(tf.shape(values), dtype=values.dtype)
            )
        out.append((grad, var))
    return out


def _multiply(grads_and_vars: GradsAndVars, multipliers: Dict[Any, Any]) -> GradsAndVars:
    by_name = {key: value for key, value in multipliers.items() if isinstance(key, str)}
    by_var = [(key, value) for key, value in multipliers.items() if not isinstance(key, str)]
    out = []
    for grad, var in grads_and_vars:
        factor = next((value for key, value in by_var if key is var), None)
        if factor is None:
            factor = by_name.get(var.op.name)
        if grad is not None and factor is not None:
            grad = _map_gradient(grad, lambda values, f=factor: values * tf.cast(f, values.dtype))
        out.append((grad, var))
    return out


def _clip(grads_and_vars: GradsAndVars, clip_gradients: Any, summaries: Sequence[str]) -> GradsAndVars:
    if callable(clip_gradients):
        return list(clip_gradients(grads_and_vars))
    if isinstance(clip_gradients, numbers.Real) and not isinstance(clip_gradients, bool):
        grads = [grad for grad, _ in grads_and_vars]
        clipped, _ = tf.clip_by_global_norm(grads, float(clip_gradients))
        if "global_gradient_norm" in summaries:
            tf.compat.v1.summary.scalar("global_norm/clipped_gradient_norm", _global_norm(clipped))
        return list(zip(clipped, [var for _, var in grads_and_vars]))
    raise ValueError(
        f"optimize_loss: clip_gradients must be a float (the global norm to clip to) or a function of the "
        f"(gradient, variable) pairs, got {clip_gradients!r}"
    )


def _global_norm(grads: Iterable[Any]) -> Any:
    return tf.linalg.global_norm([_dense_values(grad) for grad in grads if grad is not None])


def _with_dependencies(deps: Sequence[Any], tensor: Any) -> Any:
    with tf.control_dependencies(list(deps)):
        return tf.identity(tensor)


def optimize_loss(
    loss: Any,
    global_step: Any,
    learning_rate: Any,
    optimizer: Any,
    gradient_noise_scale: Optional[float] = None,
    gradient_multipliers: Optional[Dict[Any, Any]] = None,
    clip_gradients: Union[None, float, Callable[[GradsAndVars], GradsAndVars]] = None,
    learning_rate_decay_fn: Optional[Callable[[Any, Any], Any]] = None,
    update_ops: Optional[Iterable[Any]] = None,
    variables: Optional[Sequence[Any]] = None,
    name: Optional[str] = None,
    summaries: Optional[Sequence[str]] = None,
    colocate_gradients_with_ops: bool = False,
    increment_global_step: bool = True,
) -> Any:
    """One training step of `loss` in the current graph, as TF 1.15's `tf.contrib.layers.optimize_loss`.

    loss: a scalar Tensor. global_step: the step variable incremented by each step (None: the graph's global
    step, if any). learning_rate: a float (kept in a non-trainable `learning_rate` variable) or a scalar Tensor;
    None is allowed when `optimizer` is an instance or a function taking no argument. optimizer: a name of
    OPTIMIZER_CLS_NAMES, an optimizer class (built with `learning_rate=`), an optimizer instance (its own learning
    rate is used) or a function `f(learning_rate)` returning one. gradient_noise_scale: adds truncated-normal
    noise of that scale to each gradient. gradient_multipliers: {variable or variable name: factor}.
    clip_gradients: a float (clip to that global norm) or a function of the (gradient, variable) pairs.
    learning_rate_decay_fn: `f(learning_rate, global_step)` returning the decayed rate. update_ops: run before
    the gradients are computed (None: the UPDATE_OPS collection). variables: what is trained (None: the
    trainable variables). summaries: among OPTIMIZER_SUMMARIES (None: loss, learning_rate,
    global_gradient_norm), as tf.compat.v1.summary ops.

    Returns the train op: a Tensor holding the loss that applies the update (and increments the global step,
    unless increment_global_step is False) when evaluated.
    """
    loss = tf.convert_to_tensor(loss)
    if loss.shape.ndims not in (None, 0):
        raise ValueError(f"optimize_loss: loss must be a scalar Tensor, got shape {loss.shape}")
    if global_step is None:
        global_step = tf.compat.v1.train.get_global_step()
    else:
        tf.compat.v1.train.assert_global_step(global_step)
    summaries = list(_DEFAULT_SUMMARIES if summaries is None else summaries)
    unknown = [s for s in summaries if s not in OPTIMIZER_SUMMARIES]
    if unknown:
        raise ValueError(f"optimize_loss: unknown summaries {unknown}; the summaries are {OPTIMIZER_SUMMARIES}")

    with tf.compat.v1.variable_scope(name, "OptimizeLoss", [loss, global_step]):
        if update_ops is None:
            update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
        update_ops = list(dict.fromkeys(update_ops))
        if update_ops:
            loss = _with_dependencies(update_ops, loss)

        lr = None
        if learning_rate is not None:
            lr = _learning_rate_tensor(learning_rate)
            if learning_rate_decay_fn is not None:
                if global_step is None:
                    raise ValueError("optimize_loss: learning_rate_decay_fn needs a global_step, and there is none")
                lr = learning_rate_decay_fn(lr, global_step)
        elif learning_rate_decay_fn is not None:
            raise ValueError("optimize_loss: learning_rate_decay_fn is given without a learning_rate to decay")

        if "loss" in summaries:
            tf.compat.v1.summary.scalar("loss", loss)
        if lr is not None and "learning_rate" in summaries:
            tf.compat.v1.summary.scalar("learning_rate", lr)

        opt = _make_optimizer(optimizer, lr)

        if variables is None:
            variables = tf.compat.v1.trainable_variables()
        variables = list(variables)
        if not variables:
            raise ValueError("optimize_loss: there are no variables to train (no trainable variables in the graph)")

        if isinstance(opt, _v1_optimizer_types()):
            grads_and_vars = list(opt.compute_gradients(
                loss, variables, colocate_gradients_with_ops=colocate_gradients_with_ops))
        else:
            ref_variables = [v.op.name for v in variables if not _is_resource_variable(v)]
            if ref_variables:
                raise ValueError(
                    f"optimize_loss: the Keras optimizer {type(opt).__name__} can only train resource variables, "
                    f"and {ref_variables} are not (tf.compat.v1.get_variable made them under TF 1.x behaviour): "
                    f"use a tf.compat.v1.train optimizer (or its name, such as 'Adam'), or create the variables "
                    f"with use_resource=True"
                )
            grads = tf.compat.v1.gradients(loss, variables, colocate_gradients_with_ops=colocate_gradients_with_ops)
            grads_and_vars = list(zip(grads, variables))

        if gradient_noise_scale is not None:
            grads_and_vars = _add_noise(grads_and_vars, gradient_noise_scale)
        if gradient_multipliers is not None:
            grads_and_vars = _multiply(grads_and_vars, gradient_multipliers)
        if not any(grad is not None for grad, _ in grads_and_vars):
            raise ValueError(
                f"optimize_loss: the loss has no gradient with respect to any of the variables "
                f"{[var.op.name for _, var in grads_and_vars]}"
            )
        if "global_gradient_norm" in summaries:
            tf.compat.v1.summary.scalar("global_norm/gradient_norm", _global_norm(g for g, _ in grads_and_vars))
        if clip_gradients is not None:
            grads_and_vars = _clip(grads_and_vars, clip_gradients, summaries)

        for grad, var in grads_and_vars:
            if grad is None:
                continue
            if "gradients" in summaries:
                tf.compat.v1.summary.histogram(f"gradients/{var.op.name}", _dense_values(grad))
            if "gradient_norm" in summaries:
                tf.compat.v1.summary.scalar(f"gradient_norm/{var.op.name}", _global_norm([grad]))

        step = global_step if increment_global_step else None
        if isinstance(opt, _v1_optimizer_types()):
            update = opt.apply_gradients(grads_and_vars, global_step=step, name="train")
        else:
            update = opt.apply_gradients([(g, v) for g, v in grads_and_vars if g is not None], name="train")
            if step is not None:
                with tf.control_dependencies([update]):
                    update = tf.compat.v1.assign_add(step, tf.constant(1, dtype=step.dtype.base_dtype)).op
        return _with_dependencies([update], loss)


# ---------------------------------------------------------------- regularizers

Regularizer = Callable[[Any], Any]


def _check_scale(scale: Any, what: str) -> float:
    if isinstance(scale, numbers.Integral):
        raise ValueError(f"{what}: scale cannot be an integer, got {scale!r} (write {scale}.0)")
    if not isinstance(scale, numbers.Real):
        raise ValueError(f"{what}: scale must be a float, got {scale!r}")
    if scale < 0.0:
        raise ValueError(f"{what}: scale must be 0.0 or more, got {scale}")
    return float(scale)


def _no_penalty(_weights: Any) -> None:
    return None


def _scaled_regularizer(scale: float, scope: Optional[str], name: str, penalty: Callable[[Any], Any]) -> Regularizer:
    """A function of a weights Tensor returning `scale * penalty(weights)` under the name scope `scope or name`."""
    scale = _check_scale(scale, name)
    if scale == 0.0:
        return _no_penalty

    def regularize(weights: Any) -> Any:
        with tf.name_scope(scope or name):
            return tf.multiply(tf.cast(scale, weights.dtype.base_dtype), penalty(weights), name="value")

    return regularize


def l1_regularizer(scale: float, scope: Optional[str] = None) -> Regularizer:
    """A function of a weights Tensor returning `scale * sum(|weights|)` (None when scale is 0.0)."""
    return _scaled_regularizer(scale, scope, "l1_regularizer", lambda w: tf.reduce_sum(tf.abs(w)))


def l2_regularizer(scale: float, scope: Optional[str] = None) -> Regularizer:
    """A function of a weights Tensor returning `scale * sum(weights ** 2) / 2` (None when scale is 0.0)."""
    return _scaled_regularizer(scale, scope, "l2_regularizer", tf.nn.l2_loss)


def sum_regularizer(regularizer_list: Sequence[Regularizer], scope: Optional[str] = None) -> Regularizer:
    """A function of a weights Tensor returning the sum of the penalties of `regularizer_list` (None if none)."""
    regularizers = [r for r in regularizer_list if r is not None]
    if not regularizers:
        return _no_penalty

    def summed(weights: Any) -> Any:
        with tf.name_scope(scope or "sum_regularizer"):
            penalties = [p for p in (r(weights) for r in regularizers) if p is not None]
            return tf.add_n(penalties, name="value") if penalties else None

    return summed


def l1_l2_regularizer(scale_l1: float = 1.0, scale_l2: float = 1.0, scope: Optional[str] = None) -> Regularizer:
    """The sum of `l1_regularizer(scale_l1)` and `l2_regularizer(scale_l2)`."""
    return sum_regularizer([l1_regularizer(scale_l1), l2_regularizer(scale_l2)], scope=scope or "l1_l2_regularizer")


def apply_regularization(regularizer: Regularizer, weights_list: Optional[Sequence[Any]] = None) -> Any:
    """The summed penalty of `regularizer` over `weights_list` (None: the WEIGHTS collection), also added to the
    REGULARIZATION_LOSSES collection."""
    if weights_list is None:
        weights_list = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.WEIGHTS)
    weights_list = list(weights_list)
    if not weights_list:
        raise ValueError("apply_regularization: no weights to regularize (weights_list is empty, and so is the "
                         "WEIGHTS collection)")
    with tf.name_scope("get_regularization_penalty"):
        penalties = []
        for weights in weights_list:
            penalty = regularizer(weights)
            penalties.append(penalty if penalty is not None else tf.constant(0.0, dtype=weights.dtype.base_dtype))
        total = tf.add_n(penalties)
    tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES, total)
    return total


# ---------------------------------------------------------------- initializers

_FAN_MODES = ("FAN_IN", "FAN_OUT", "FAN_AVG")


def _fans(shape: Sequence[int]) -> Tuple[float, float]:
    if not shape:
        return 1.0, 1.0
    fan_in = float(shape[-2]) if len(shape) > 1 else float(shape[-1])
    fan_out = float(shape[-1])
    for dim in shape[:-2]:  # the receptive field of a convolution kernel
        fan_in *= float(dim)
        fan_out *= float(dim)
    return fan_in, fan_out


def variance_scaling_initializer(
    factor: float = 2.0, mode: str = "FAN_IN", uniform: bool = False, seed: Optional[int] = None,
    dtype: Any = tf.float32,
) -> Callable[..., Any]:
    """An initializer with variance `factor / n`, n the fan-in, fan-out or their mean (`mode`): uniform in
    [-sqrt(3 * factor / n), sqrt(3 * factor / n)], or truncated normal with stddev sqrt(1.3 * factor / n)."""
    if not tf.as_dtype(dtype).is_floating:
        raise TypeError(f"variance_scaling_initializer: dtype must be a floating point type, got {dtype}")
    if mode not in _FAN_MODES:
        raise TypeError(f"variance_scaling_initializer: mode must be one of {_FAN_MODES}, got {mode!r}")
    default_dtype = dtype

    def initializer(shape: Any, dtype: Any = None, partition_info: Any = None) -> Any:
        dtype = tf.as_dtype(dtype or default_dtype)
        if not dtype.is_floating:
            raise TypeError(f"variance_scaling_initializer: cannot initialize a {dtype.name} variable")
        full_shape = partition_info.full_shape if partition_info is not None else shape
        fan_in, fan_out = _fans(tf.TensorShape(full_shape).as_list())
        n = {"FAN_IN": fan_in, "FAN_OUT": fan_out, "FAN_AVG": (fan_in + fan_out) / 2.0}[mode]
        if uniform:
            limit = math.sqrt(3.0 * factor / n)
            return tf.random.uniform(shape, -limit, limit, dtype=dtype, seed=seed)
        stddev = math.sqrt(1.3 * factor / n)
        return tf.random.truncated_normal(shape, 0.0, stddev, dtype=dtype, seed=seed)

    return initializer


def xavier_initializer(uniform: bool = True, seed: Optional[int] = None, dtype: Any = tf.float32) -> Callable[..., Any]:
    """Glorot's initializer: variance 1 / mean(fan-in, fan-out), uniform or truncated normal."""
    return variance_scaling_initializer(factor=1.0, mode="FAN_AVG", uniform=uniform, seed=seed, dtype=dtype)


xavier_initializer_conv2d = xavier_initializer

# ---------------------------------------------------------------- the namespaces

_PROVIDED: Dict[str, Dict[str, Any]] = {
    "layers": {
        "optimize_loss": optimize_loss,
        "OPTIMIZER_CLS_NAMES": OPTIMIZER_CLS_NAMES,
        "OPTIMIZER_SUMMARIES": OPTIMIZER_SUMMARIES,
        "l1_regularizer": l1_regularizer,
        "l2_regularizer": l2_regularizer,
        "l1_l2_regularizer": l1_l2_regularizer,
        "sum_regularizer": sum_regularizer,
        "apply_regularization": apply_regularization,
        "variance_scaling_initializer": variance_scaling_initializer,
        "xavier_initializer": xavier_initializer,
        "xavier_initializer_conv2d": xavier_initializer_conv2d,
    },
    "framework": {
        "get_or_create_global_step": tf.compat.v1.train.get_or_create_global_step,
        "get_global_step": tf.compat.v1.train.get_global_step,
        "assert_global_step": tf.compat.v1.train.assert_global_step,
    },
}

# What TF 2.15 offers in place of the tf.contrib names code of that era used most ("<module>.<name>" or "<module>").
_INSTEAD = {
    "layers.fully_connected": "tf.compat.v1.layers.dense (or tf_slim.layers.fully_connected)",
    "layers.conv2d": "tf.compat.v1.layers.conv2d (or tf_slim.layers.conv2d)",
    "layers.flatten": "tf.compat.v1.layers.flatten",
    "layers.batch_norm": "tf.compat.v1.layers.batch_normalization",
    "layers.dropout": "tf.compat.v1.layers.dropout",
    "layers.max_pool2d": "tf.compat.v1.layers.max_pooling2d",
    "layers.embed_sequence": "tf.keras.layers.Embedding",
    "layers.real_valued_column": "tf.feature_column.numeric_column",
    "layers.sparse_column_with_hash_bucket": "tf.feature_column.categorical_column_with_hash_bucket",
    "layers": "tf.compat.v1.layers, tf.keras.layers or the tf-slim package (import tf_slim)",
    "framework.arg_scope": "tf_slim.arg_scope (the tf-slim package)",
    "framework": "tf.compat.v1.train and tf.compat.v1 (global step, variables), or the tf-slim package",
    "slim": "the tf-slim package (pip install tf-slim; import tf_slim as slim)",
    "eager": "eager execution, TF 2's default (tf.executing_eagerly(), tf.compat.v1.enable_eager_execution())",
    "data": "tf.data (tf.data.experimental)",
    "distribute": "tf.distribute",
    "estimator": "tf.estimator",
    "learn": "tf.estimator",
    "training": "tf.compat.v1.train",
    "opt": "tf.compat.v1.train optimizers or tf.keras.optimizers",
    "rnn": "tf.compat.v1.nn.rnn_cell or tf.keras.layers (LSTMCell, GRUCell, RNN)",
    "seq2seq": "tf.keras.layers and the tensorflow-addons package",
    "metrics": "tf.compat.v1.metrics",
    "losses": "tf.compat.v1.losses",
    "summary": "tf.compat.v1.summary or tf.summary",
    "image": "tf.image",
    "crf": "the tensorflow-addons package (tfa.text.crf_*)",
    "cudnn_rnn": "tf.keras.layers.LSTM / GRU",
    "tpu": "tf.distribute.TPUStrategy",
    "framework.nest": "tf.nest",
    "graph_editor": "tensorflow.python.ops.op_selector (get_backward_walk_ops)",
    "nccl": "tf.distribute (or tensorflow.python.ops.nccl_ops)",
    "compiler": "tf.function(jit_compile=True)",
    "memory_stats": "tf.config.experimental.get_memory_info",
}


def _missing_message(path: str, prefix: str = "tf.contrib") -> str:
    """`path`: the part after `tf.contrib.` ("layers.fully_connected"); `prefix`: how the user wrote tf.contrib."""
    parts = path.split(".")
    hint = next((_INSTEAD[".".join(parts[:n])] for n in range(len(parts), 0, -1)
                 if ".".join(parts[:n]) in _INSTEAD), None)
    provided = "; ".join(f"tf.contrib.{module}: {', '.join(names)}" for module, names in _PROVIDED.items())
    instead = f"use {hint} instead" if hint else "use its TF 2 replacement (TensorFlow's migration guide lists them)"
    return (f"{prefix}.{path} is not available: TF 1.x's tf.contrib is gone in TF 2.15; {instead}. Only these "
            f"tf.contrib names are carried over: {provided}")


class ContribNameError(AttributeError):
    """A name of TF 1.x's tf.contrib that TF 2.15 lacks and that is not carried over."""


class _ContribModule(ModuleType):
    """`tensorflow.contrib` or one of its modules: the names carried over, and a clear error for the others."""

    def __init__(self, name: str, names: Dict[str, Any]) -> None:
        super().__init__(name, f"TF 1.x's {name.replace('tensorflow', 'tf', 1)}, as far as it is carried over to "
                               f"TF 2.15 (determined/tensorflow/_tf1_contrib.py).")
        self.__path__: List[str] = []  # a package: `import tensorflow.contrib.<x>` reaches _ContribFinder
        self.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        self.__all__ = sorted(names)
        for attr, value in names.items():
            setattr(self, attr, value)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")
        path = f"{self.__name__}.{attr}"[len(_ROOT) + 1:]
        raise ContribNameError(_missing_message(path))


class _ContribFinder(importlib.abc.MetaPathFinder):
    """A clear ModuleNotFoundError for a `tensorflow.contrib.*` module that is not carried over."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]], target: Any = None) -> Any:
        if not fullname.startswith(_ROOT + ".") or fullname in sys.modules:
            return None
        # name: the package TF 2.15 lacks, so that `from tensorflow.contrib import x` raises this message too.
        raise ModuleNotFoundError(_missing_message(fullname[len(_ROOT) + 1:], _ROOT), name=_ROOT)


_ROOT = "tensorflow.contrib"


def install() -> None:
    """Add `tf.contrib` and the `tensorflow.contrib[.layers|.framework]` modules (idempotent)."""
    if not isinstance(sys.modules.get(_ROOT), _ContribModule):
        submodules = {name: _ContribModule(f"{_ROOT}.{name}", names) for name, names in _PROVIDED.items()}
        root = _ContribModule(_ROOT, submodules)
        for name, module in submodules.items():
            sys.modules[module.__name__] = module
        sys.modules[_ROOT] = root
    if getattr(tf, "contrib", None) is not sys.modules[_ROOT]:
        setattr(tf, "contrib", sys.modules[_ROOT])
    if not any(isinstance(f, _ContribFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _ContribFinder())
