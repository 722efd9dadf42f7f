"""DeepSpeed configs from a trial's hyperparameters: `overwrite_deepspeed_config` and `get_ds_config_from_hparams`."""
import json
import pathlib
from typing import Any, Dict, List, Tuple, Union

from determined import errors
from determined.util import merge_dicts

# The hyperparameters that name a DeepSpeed config file and the values to change in it (Determined's convention).
CONFIG_KEY = "deepspeed_config"
OVERWRITE_KEY = "overwrite_deepspeed_args"


def _no_duplicate_keys(path: str) -> Any:
    def hook(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise errors.InvalidTrialError(f"DeepSpeed config {path}: key {key!r} appears twice; keep one")
            out[key] = value
        return out

    return hook


def read_deepspeed_config(path: Union[str, pathlib.Path]) -> Dict[str, Any]:
    """The DeepSpeed config in the JSON file `path` (relative to the working directory: the model directory)."""
    try:
        with open(path, "r") as f:
            config = json.load(f, object_pairs_hook=_no_duplicate_keys(str(path)))
    except FileNotFoundError:
        raise errors.InvalidTrialError(
            f"DeepSpeed config {str(path)!r} does not exist (working directory {pathlib.Path.cwd()}); put the JSON "
            "file in the model directory and name it relative to it"
        ) from None
    except json.JSONDecodeError as e:
        raise errors.InvalidTrialError(f"DeepSpeed config {str(path)!r} is not valid JSON: {e}") from None
    if not isinstance(config, dict):
        raise errors.InvalidTrialError(f"DeepSpeed config {str(path)!r} holds a {type(config).__name__}, not an object")
    return config


def overwrite_deepspeed_config(
    base_ds_config: Union[str, pathlib.Path, Dict[str, Any]], source_ds_dict: Dict[str, Any]
) -> Dict[str, Any]:
    """`base_ds_config` (a DeepSpeed config dict, or the path of its JSON file) with the values of
    `source_ds_dict` merged in: nested dicts are merged key by key, any other value replaces the base's.

    Typically ``overwrite_deepspeed_config(hparams["deepspeed_config"], hparams.get("overwrite_deepspeed_args",
    {}))``, so that hyperparameter searches can change values of the DeepSpeed config. Neither input is changed.
    """
    if isinstance(base_ds_config, (str, pathlib.Path)):
        base = read_deepspeed_config(base_ds_config)
    elif isinstance(base_ds_config, dict):
        base = base_ds_config
    else:
        raise TypeError(
            f"overwrite_deepspeed_config: base_ds_config must be a dict or the path of a JSON file, got "
            f"{type(base_ds_config).__name__}"
        )
    if not isinstance(source_ds_dict, dict):
        raise TypeError(
            f"overwrite_deepspeed_config: source_ds_dict must be a dict, got {type(source_ds_dict).__name__}"
        )
    return merge_dicts(base, source_ds_dict)


def get_ds_config_from_hparams(
    hparams: Dict[str, Any], base_dir: Union[str, pathlib.Path] = "."
) -> Dict[str, Any]:
    """The DeepSpeed config of a trial: the JSON file named by hyperparameter ``deepspeed_config`` (relative to
    `base_dir`) with hyperparameter ``overwrite_deepspeed_args`` (if any) merged in."""
    if CONFIG_KEY not in hparams:
        raise errors.InvalidTrialError(
            f"get_ds_config_from_hparams: the hyperparameters have no {CONFIG_KEY!r} (the DeepSpeed config file); "
            f"they have: {', '.join(sorted(hparams)) or 'none'}"
        )
    path = pathlib.Path(base_dir) / hparams[CONFIG_KEY]
    return overwrite_deepspeed_config(read_deepspeed_config(path), hparams.get(OVERWRITE_KEY) or {})
