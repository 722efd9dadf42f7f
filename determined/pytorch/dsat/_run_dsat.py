"""What a DeepSpeed Autotune search is made of: the experiment config of the autotuning trials (a `custom` search of
the user's config), the search method of the command line, and the config of the full experiment at the end.

The command (determined/pytorch/dsat/__main__.py) runs the search with the client's `LocalSearchRunner`; nothing
here imports the client SDK."""
import argparse
import copy
import logging
import os
import shlex
from typing import Any, Dict, List, Type, Union

from determined.pytorch.dsat import _defaults, _utils
from determined.pytorch.dsat._dsat_search_method import (
    ASHADSATSearchMethod,
    BaseDSATSearchMethod,
    BinarySearchDSATSearchMethod,
    RandomDSATSearchMethod,
    _TestDSATSearchMethod,
)
from determined.util import merge_dicts

logger = logging.getLogger("determined.pytorch.dsat")

BEST_CONFIG_FILE = "best_ds_config.json"
BEST_METRICS_FILE = "best_ds_metrics.json"


def get_search_method_class(method_string: str) -> Type[BaseDSATSearchMethod]:
    classes: Dict[str, Type[BaseDSATSearchMethod]] = {
        "binary": BinarySearchDSATSearchMethod,
        "random": RandomDSATSearchMethod,
        "asha": ASHADSATSearchMethod,
        "_test": _TestDSATSearchMethod,
    }
    if method_string not in classes:
        raise ValueError(f"the search method must be one of {list(classes)}, not {method_string!r}")
    return classes[method_string]


def get_split_entrypoint(entrypoint: Union[List[str], str]) -> List[str]:
    if isinstance(entrypoint, str):
        return shlex.split(entrypoint)
    if isinstance(entrypoint, list):
        return [str(part).strip() for part in entrypoint if str(part).strip()]
    raise ValueError(f"expected a string or a list for the entrypoint, got a {type(entrypoint).__name__}")


def _fixed_hyperparameters(hparams: Dict[str, Any]) -> Dict[str, Any]:
    """The hyperparameters as values: `{type: const, val: X}` is X; a search space is an error (the autotune
    searches the DeepSpeed config, not the hyperparameters)."""
    out: Dict[str, Any] = {}
    for name, value in hparams.items():
        if isinstance(value, dict) and "type" in value:
            if value["type"] == "const":
                out[name] = value.get("val")
                continue
            if value["type"] == "object":
                out[name] = _fixed_hyperparameters(value.get("val") or {})
                continue
            raise ValueError(f"hyperparameters.{name} is a search space (type {value['type']}); DeepSpeed "
                             "Autotune searches the DeepSpeed config only: give it one value")
        out[name] = _fixed_hyperparameters(value) if isinstance(value, dict) else value
    return out


def check_submitted_config(config: Dict[str, Any]) -> None:
    """The user's config names its DeepSpeed config as `hyperparameters.deepspeed_config`, the same file as the
    entrypoint's `--deepspeed`/`--deepspeed_config` (if any)."""
    hparams = config.get("hyperparameters") or {}
    if not isinstance(hparams, dict) or _defaults.CONFIG_KEY not in hparams:
        raise ValueError("DeepSpeed Autotune needs `hyperparameters.deepspeed_config` in the experiment config: the "
                         "path of the DeepSpeed JSON config, relative to the model directory")
    ds_path = hparams[_defaults.CONFIG_KEY]
    ds_path = ds_path.get("val") if isinstance(ds_path, dict) else ds_path
    entry = get_split_entrypoint(config.get("entrypoint") or [])
    for flag, value in zip(entry, entry[1:]):
        if flag in ("--deepspeed", "--deepspeed_config") and not value.startswith("-") and value != ds_path:
            raise ValueError(f"the DeepSpeed config of hyperparameters.deepspeed_config, {ds_path}, is not the one "
                             f"of the entrypoint's {flag}, {value}; name the same file in both")


def get_custom_dsat_exp_conf_from_args(args: argparse.Namespace) -> Dict[str, Any]:
    """The experiment config of the autotuning trials: the user's, with a `custom` searcher on the autotuning
    metric, DeepSpeed's autotuning section in `overwrite_deepspeed_args`, and `_use_dsat_mode` set."""
    from determined.config.files import load_config_file

    config = copy.deepcopy(load_config_file(args.config_path))
    check_submitted_config(config)
    extra = f"DeepSpeed Autotune ({args.search_method})"
    config["description"] = f"{extra} - {config['description']}" if config.get("description") else extra
    config["searcher"] = {"name": "custom", "metric": args.metric,
                          "smaller_is_better": _utils.smaller_is_better(args.metric), "unit": "batches"}
    autotuning = {"autotuning": {"enabled": True, "start_profile_step": args.start_profile_step,
                                 "end_profile_step": args.end_profile_step}}
    hparams = _fixed_hyperparameters(config.get("hyperparameters") or {})
    hparams[_defaults.OVERWRITE_KEY] = merge_dicts(hparams.get(_defaults.OVERWRITE_KEY) or {}, autotuning)
    hparams[_defaults.USE_DSAT_MODE_KEY] = True
    config["hyperparameters"] = hparams
    return config


def check_args(args: argparse.Namespace) -> None:
    problems = []
    if args.max_trials < 2:
        problems.append(f"--max-trials {args.max_trials}: at least 2 (the profiling trial and one config)")
    if args.max_concurrent_trials < 1:
        problems.append(f"--max-concurrent-trials {args.max_concurrent_trials}: at least 1")
    if args.max_slots is not None and args.max_slots < 1:
        problems.append(f"--max-slots {args.max_slots}: at least 1")
    if not 0 <= args.start_profile_step < args.end_profile_step:
        problems.append(f"--start-profile-step {args.start_profile_step} --end-profile-step {args.end_profile_step}: "
                        "0 <= start < end")
    if not os.path.exists(args.config_path):
        problems.append(f"config {args.config_path} does not exist")
    if not os.path.isdir(args.model_dir):
        problems.append(f"model_dir {args.model_dir} is not a directory")
    if problems:
        raise ValueError("DeepSpeed Autotune: " + "; ".join(problems))


def full_experiment_config(args: argparse.Namespace, best_hparams: Dict[str, Any]) -> Dict[str, Any]:
    """The user's config with the best trial's hyperparameters, without the autotuning keys."""
    from determined.config.files import load_config_file

    config = load_config_file(args.config_path)
    hparams = copy.deepcopy(best_hparams)
    hparams.pop(_defaults.USE_DSAT_MODE_KEY, None)
    (hparams.get(_defaults.OVERWRITE_KEY) or {}).pop("autotuning", None)
    config["hyperparameters"] = hparams
    return config
