"""What a PyTorchTrial checkpoint holds: state_dict.pth and load_data.json; writing, reading, rebuilding."""
import json
import logging
import pathlib
import random
import tempfile
import warnings
from typing import Any, Dict, List, Optional, Tuple

import cloudpickle
import numpy as np
import torch

from determined import errors
from determined.pytorch._build_trial import instantiate_trial
from determined.pytorch._context import PyTorchTrialContext

logger = logging.getLogger("determined.pytorch")

STATE_FILE = "state_dict.pth"
LOAD_DATA_FILE = "load_data.json"
# Where older releases put the state file, tried in order after STATE_FILE.
LEGACY_STATE_FILES = ("determined/state_dict.pth", "pedl/state_dict.pth", "checkpoint.pt")
FORMAT = "cloudpickle"


def framework() -> str:
    return f"torch-{torch.__version__}"


def capture_rng_state(device: torch.device) -> Dict[str, Any]:
    state: Dict[str, Any] = {
        "cpu_rng_state": torch.get_rng_state(),
        "np_rng_state": np.random.get_state(),
        "random_rng_state": random.getstate(),
    }
    if device.type == "cuda":
        state["gpu_rng_state"] = torch.cuda.get_rng_state(device)
    return state


def _cpu_bytes(value: Any) -> Any:
    """An RNG state as torch's setters take it: a CPU byte tensor (a checkpoint loaded onto a GPU has it there)."""
    return value.cpu() if isinstance(value, torch.Tensor) else value


def restore_rng_state(state: Dict[str, Any], device: torch.device) -> None:
    if "cpu_rng_state" in state:
        torch.set_rng_state(_cpu_bytes(state["cpu_rng_state"]))
    if "np_rng_state" in state:
        np.random.set_state(state["np_rng_state"])
    if "random_rng_state" in state:
        random.setstate(state["random_rng_state"])
    if device.type == "cuda" and state.get("gpu_rng_state") is not None:
        torch.cuda.set_rng_state(_cpu_bytes(state["gpu_rng_state"]), device)


def write_checkpoint(path: pathlib.Path, state: Dict[str, Any], load_data: Dict[str, Any]) -> None:
    """Write state_dict.pth (torch.save with cloudpickle) and load_data.json into `path`."""
    torch.save(state, str(path / STATE_FILE), pickle_module=cloudpickle)
    with open(path / LOAD_DATA_FILE, "w") as f:
        json.dump(load_data, f, indent=2, default=str)


def read_state(path: pathlib.Path, **torch_load_kwargs: Any) -> Dict[str, Any]:
    """The state dict of the checkpoint at `path`, with 0.12.10-and-older key names turned into today's."""
    for name in (STATE_FILE, *LEGACY_STATE_FILES):
        candidate = path / name
        if candidate.is_file():
            break
    else:
        raise errors.DeterminedError(
            f"{path} holds no PyTorch checkpoint: none of {STATE_FILE}, {', '.join(LEGACY_STATE_FILES)} exists"
        )
    kwargs = {"weights_only": False, "map_location": "cpu", **torch_load_kwargs}
    state = torch.load(str(candidate), **kwargs)
    if not isinstance(state, dict):
        raise errors.DeterminedError(f"{candidate} does not hold a dict of states; it is not a Determined checkpoint")
    return normalize_state(state)


def normalize_state(state: Dict[str, Any]) -> Dict[str, Any]:
    """Map the single-model key names of 0.12.10 and older onto the list-valued ones."""
    state = dict(state)
    if "models_state_dict" not in state and "model_state_dict" in state:
        state["models_state_dict"] = [state.pop("model_state_dict")]
    if "optimizers_state_dict" not in state and "optimizer_state_dict" in state:
        state["optimizers_state_dict"] = [state.pop("optimizer_state_dict")]
    if "lr_schedulers_state_dict" not in state and "lr_scheduler" in state:
        legacy = state.pop("lr_scheduler")
        state["lr_schedulers_state_dict"] = [] if legacy is None else [legacy]
    state.setdefault("models_state_dict", [])
    state.setdefault("optimizers_state_dict", [])
    state.setdefault("lr_schedulers_state_dict", [])
    state.setdefault("callbacks", {})
    return state


def load_into(objects: List[Any], states: List[Any], what: str) -> None:
    if len(objects) != len(states):
        raise errors.DeterminedError(
            f"the checkpoint holds {len(states)} {what} but the trial wraps {len(objects)}; a checkpoint can only "
            f"be restored into a trial that creates the same {what} in the same order"
        )
    for obj, state in zip(objects, states):
        obj.load_state_dict(state)


def trial_class_spec(trial_class: type) -> str:
    return f"{trial_class.__module__}:{trial_class.__qualname__}"


def import_trial_class(spec: str, code_dir: "Optional[str | pathlib.Path]" = None) -> type:
    from determined import _execution

    return _execution.import_trial_class(spec, code_dir)


def read_load_data(path: pathlib.Path) -> Dict[str, Any]:
    """What a checkpoint says about its trial: load_data.json, or the metadata.json of a checkpoint downloaded
    by Determined 0.17.7 and older (whose entrypoint names the trial class)."""
    file = path / LOAD_DATA_FILE
    if file.is_file():
        with open(file) as f:
            return dict(json.load(f))
    legacy = path / "metadata.json"
    if legacy.is_file():
        with open(legacy) as f:
            metadata = json.load(f)
        config = metadata.get("experiment_config") or {}
        if config.get("entrypoint") and "hparams" in metadata:
            return {"trial_cls_spec": config["entrypoint"], "experiment_config": config,
                    "hparams": metadata["hparams"], "is_old_api": None}
    raise errors.DeterminedError(
        f"{path} has no {LOAD_DATA_FILE}: it is not a checkpoint written by a PyTorchTrial (nor one downloaded with "
        "its metadata.json by Determined 0.17 or older)"
    )


def load_trial_from_checkpoint_path(
    path: str,
    trial_class: Optional[type] = None,
    trial_kwargs: Optional[Dict[str, Any]] = None,
    torch_load_kwargs: Optional[Dict[str, Any]] = None,
    **kwargs: Any,
) -> Any:
    """Rebuild the trial of the checkpoint at `path` and load its models' weights.

    The trial class is the one recorded in the checkpoint, imported from its ``code/`` directory (or sys.path),
    unless `trial_class` is given (needed for a class that cannot be imported by that name, e.g. one defined
    in ``__main__``). It is constructed as ``trial_class(context, **trial_kwargs)`` with a context built from the
    checkpoint's hyperparameters and config. Returns the trial instance (its models in
    ``trial.context.models``), or, for a 0.12-API trial, its nn.Module. `torch_load_kwargs` go to torch.load
    (e.g. ``{"map_location": "cpu"}``); keyword arguments given directly (the older form) go there too, with a
    FutureWarning.
    """
    if kwargs:
        if torch_load_kwargs:
            raise errors.DeterminedError(
                "load_trial_from_checkpoint_path(): give torch.load's arguments either as torch_load_kwargs={...} "
                "or as keyword arguments (deprecated), not both"
            )
        warnings.warn(
            "passing torch.load's arguments to load_trial_from_checkpoint_path() as keyword arguments is "
            "deprecated; pass torch_load_kwargs={...}", FutureWarning, stacklevel=2,
        )
        torch_load_kwargs = kwargs
    ckpt = pathlib.Path(path)
    load_data = read_load_data(ckpt)
    if trial_class is None:
        spec = str(load_data.get("trial_cls_spec") or "")
        if spec.startswith("__main__:"):
            raise errors.DeterminedError(
                f"the checkpoint's trial class {spec.split(':', 1)[1]} was defined in a script run as __main__, which "
                "cannot be imported by that name: pass it, load_trial_from_checkpoint_path(path, trial_class=...)"
            )
        trial_class = import_trial_class(spec, ckpt / "code")
    state = read_state(ckpt, **(torch_load_kwargs or {}))
    context_class = getattr(trial_class, "trial_context_class", PyTorchTrialContext)
    context = context_class(*_load_context_args(
        load_data.get("hparams"), load_data.get("experiment_config"), int(load_data.get("trial_seed") or 0)
    ))
    trial = instantiate_trial(trial_class, context, trial_kwargs)
    load_into([_unwrap(m) for m in context.models], state["models_state_dict"], "models")
    old_api = load_data.get("is_old_api")
    if old_api is None:
        from determined.pytorch._trial import uses_old_api

        old_api = uses_old_api(trial_class)
    if old_api:
        model: Optional[torch.nn.Module] = context.models[0] if context.models else None
        return model
    return trial


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    from determined.pytorch._distributed import unwrap

    return unwrap(model)


def _load_context_args(
    hparams: Optional[Dict[str, Any]], exp_conf: Optional[Dict[str, Any]], trial_seed: int
) -> Tuple[Any, Dict[str, Any], Dict[str, Any], int]:
    """(core context, config, hparams, seed) of a context that reports nothing and writes no checkpoints."""
    from determined import core

    hparams = dict(hparams or {})
    config = dict(exp_conf) if exp_conf else {"hyperparameters": {k: {"type": "const", "val": v} for k, v in
                                                                 hparams.items()}}
    # Nothing is ever written through this context: its checkpoint directory is never created.
    storage_dir = str(pathlib.Path(tempfile.gettempdir()) / "det-checkpoint-load-context")
    return core._make_local_context(storage_dir, [], config, hparams, trial_seed), config, hparams, trial_seed


class CheckpointLoadContext(PyTorchTrialContext):
    """A PyTorchTrialContext to build a trial outside of training, e.g. to load a checkpoint's weights into it:
    ``MyTrial(det.pytorch.CheckpointLoadContext(hparams), ...)``. It reports nothing and saves no checkpoints;
    `exp_conf` is the experiment config its getters return."""

    def __init__(self, hparams: Optional[Dict[str, Any]] = None, exp_conf: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(*_load_context_args(hparams, exp_conf, 0))
