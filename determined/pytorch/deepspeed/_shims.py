"""Adjustments of DeepSpeed's internals (checked with DeepSpeed 0.19), all in this module."""
import functools
import importlib
import inspect
from typing import Any, Dict


def skip_shm_comm_op() -> None:
    """Keep DeepSpeed's communication backend from compiling its shared-memory op on CPU.

    On its CPU accelerator, DeepSpeed 0.19 compiles a C++ op (deepspeed_shm_comm, minutes on a busy 2-core
    machine the first time) whenever its backend starts, but uses it only in ``inference_all_reduce`` (tensor-
    parallel inference); training reduces gradients through torch.distributed (gloo) either way. A DeepSpeedTrial
    therefore starts without it.
    """
    try:
        ds_comm_torch = importlib.import_module("deepspeed.comm.torch")
    except ImportError:  # another layout of DeepSpeed: it builds what it builds
        return
    if callable(getattr(ds_comm_torch, "build_shm_op", None)):
        ds_comm_torch.build_shm_op = lambda: None


class _ArgsWithoutDeepSpeedConfig:
    """`args` as `deepspeed.initialize` should see it when `config=` is given too: `deepspeed_config` reads None,
    every other attribute (and every assignment, such as DeepSpeed's `args.local_rank`) is the user's object's."""

    def __init__(self, args: object) -> None:
        object.__setattr__(self, "_args", args)

    def __getattr__(self, name: str) -> object:
        if name == "deepspeed_config":
            return None
        return getattr(object.__getattribute__(self, "_args"), name)

    def __setattr__(self, name: str, value: object) -> None:
        setattr(object.__getattribute__(self, "_args"), name, value)


def accept_config_beside_args() -> None:
    """Let `deepspeed.initialize(args=..., config=...)` take both, `config` winning, as DeepSpeed up to 0.8 did.

    Code of Determined's 0.19-0.26 era passes the trial's hyperparameters as `args` (they name the JSON file in
    `deepspeed_config`) together with `config=` the overwritten dict (`overwrite_deepspeed_config`): DeepSpeed 0.8's
    engine used `config` and read `args.deepspeed_config` only without it. DeepSpeed 0.9+ asserts instead ("Not
    sure how to proceed, we were given deepspeed configs in the deepspeed arguments and deepspeed.initialize()
    function call"). Installed once; calls with only one of them are passed through unchanged.
    """
    import deepspeed

    initialize = deepspeed.initialize
    if getattr(initialize, "_det_accepts_config_beside_args", False):
        return

    @functools.wraps(initialize)
    def initialize_accepting_both(*args: Any, **kwargs: Any) -> Any:
        bound = _call_arguments(initialize, args, kwargs)
        ds_args = bound.get("args")
        given = bound.get("config") is not None or bound.get("config_params") is not None
        if given and ds_args is not None and getattr(ds_args, "deepspeed_config", None) is not None:
            bound["args"] = _ArgsWithoutDeepSpeedConfig(ds_args)
            return initialize(**bound)
        return initialize(*args, **kwargs)

    initialize_accepting_both._det_accepts_config_beside_args = True  # type: ignore[attr-defined]
    deepspeed.initialize = initialize_accepting_both


def _call_arguments(func: Any, args: tuple, kwargs: dict) -> Dict[str, Any]:
    """`func`'s arguments of this call by name (positional ones included)."""
    return dict(inspect.signature(func).bind(*args, **kwargs).arguments)


def let_backward_pass_through_other_engines() -> None:
    """Let an engine's `backward(loss)` run through the module of another engine, as DeepSpeed up to 0.8 did.

    A GAN written for DeepSpeed 0.8 (0.20-0.26's `deepspeed_dcgan`) trains its generator with
    `generator.backward(discriminator(fake) ...)`: the generator's loss flows back through the discriminator's
    engine, whose parameters simply collected gradients (cleared by the discriminator's next `zero_grad`).
    DeepSpeed 0.19 hooks every engine's forward output, and an engine that is not running its own `backward` and
    cannot follow a plain `tensor.backward()` (ZeRO stage 0) raises "Direct calls to tensor.backward() are not
    supported". Here such an engine lets the gradient through, untouched, when the backward pass was started by
    another engine's `backward(loss)` (which already scaled the loss for its own gradient accumulation); a
    `tensor.backward()` that no engine started still raises as before. Installed once.
    """
    try:
        engine_module = importlib.import_module("deepspeed.runtime.engine")
    except ImportError:
        return
    engine_cls = getattr(engine_module, "DeepSpeedEngine", None)
    tracker = getattr(engine_module, "_ENGINE_BACKWARD_GRAPH_TRACKER", None)
    prologue = getattr(engine_cls, "_backward_prologue", None)
    if prologue is None or tracker is None or not hasattr(tracker, "is_current_graph_registered"):
        return  # another DeepSpeed: nothing of this shape to adjust
    if getattr(prologue, "_det_passes_other_engines", False):
        return

    @functools.wraps(prologue)
    def backward_prologue(self: Any) -> Any:
        own_backward = getattr(self, "_running_engine_backward", True)
        torch_style = getattr(self, "_support_torch_style_backward", True)
        if not own_backward and not torch_style and tracker.is_current_graph_registered():
            return None  # another engine's backward(loss) passes through this engine's module
        return prologue(self)

    backward_prologue._det_passes_other_engines = True  # type: ignore[attr-defined]
    engine_cls._backward_prologue = backward_prologue
