"""DeepSpeed Autotune helpers for user code (`dsat_reporting_context`, `get_ds_config_from_hparams`,
`get_hf_args_with_overwrites`) and for the search: batch-size bookkeeping and the ZeRO search space."""
import contextlib
import copy
import json
import logging
import os
import pathlib
import random
from typing import Any, Dict, Generator, List, Optional, Union

from determined import errors
from determined.pytorch.deepspeed._config import get_ds_config_from_hparams
from determined.pytorch.dsat import _defaults
from determined.util import merge_dicts

logger = logging.getLogger("determined.pytorch.dsat")

__all__ = ["dsat_reporting_context", "get_ds_config_from_hparams", "get_hf_args_with_overwrites"]


def smaller_is_better(metric: str) -> bool:
    """Whether a smaller value of DeepSpeed's autotuning `metric` is better."""
    if metric in _defaults.SMALLER_IS_BETTER_METRICS:
        return True
    if metric in _defaults.LARGER_IS_BETTER_METRICS:
        return False
    valid = _defaults.SMALLER_IS_BETTER_METRICS + _defaults.LARGER_IS_BETTER_METRICS
    raise ValueError(f"metric must be one of {valid}, not {metric!r}")


@contextlib.contextmanager
def dsat_reporting_context(core_context: Any, op: Any, steps_completed: Optional[int] = None
                           ) -> Generator[None, None, None]:
    """Wrap the DeepSpeed engine's `forward`/`backward`/`step` calls of a Core API script run by DeepSpeed Autotune.

    In an autotuning trial DeepSpeed's engine measures the model (the profiling trial) or the config's speed, writes
    the result to a JSON file and exits (SystemExit). This context then reports the result as the trial's
    validation metrics and as `op`'s searcher metric, waits for the search to close the trial, and lets the exit
    go on. Outside autotuning it does nothing.

    Args:
        core_context: the `Context` of `determined.core.init`
        op: the first `SearcherOperation` of `core_context.searcher.operations()`
        steps_completed: the steps to report the metrics at (default `op.length`)
    """
    if steps_completed is None:
        steps_completed = op.length
    try:
        yield
    except SystemExit:
        model_info = pathlib.Path(_defaults.MODEL_INFO_PROFILING_PATH)
        results = pathlib.Path(_defaults.AUTOTUNING_RESULTS_PATH)
        existing = [p for p in (model_info, results) if p.exists()]
        # A DeepSpeed autotuning exit leaves exactly one of them.
        if len(existing) == 1:
            report_json_results(core_context, op, steps_completed, add_gpu_info=existing[0] == model_info,
                                path=existing[0])
        raise


def memory_per_slot(local_size: int = 1) -> Dict[str, Any]:
    """The memory one slot may use, for the profiling trial: a GPU's total memory, or on CPU slots the machine's
    physical memory shared by the trial's processes on it (what DeepSpeed's CPU accelerator allocates from)."""
    try:
        import torch

        if torch.cuda.is_available():
            device = torch.cuda.current_device()
            return {"gpu_mem": int(torch.cuda.get_device_properties(device).total_memory), "memory_kind": "gpu"}
    except ImportError:  # pragma: no cover - the trial imports torch anyway
        pass
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {"gpu_mem": int(total // max(1, local_size)), "memory_kind": "cpu"}


def report_json_results(core_context: Any, op: Any, steps_completed: int, add_gpu_info: bool,
                        path: Union[str, pathlib.Path]) -> None:
    """Report the JSON file DeepSpeed wrote (`path`) as validation metrics and `op`'s searcher metric (the chief),
    then wait for the search to close the trial (every rank)."""
    if core_context.distributed.rank == 0:
        with open(path, "r") as f:
            results: Dict[str, Any] = json.load(f)
        if add_gpu_info:
            results.update(memory_per_slot(core_context.distributed.local_size))
        core_context.train.report_validation_metrics(steps_completed=steps_completed, metrics=results)
        op.report_completed(results)
    # An autotuning trial has one operation: the next call ends when the search closes the trial.
    for extra in core_context.searcher.operations():
        raise errors.DeterminedError(f"a DeepSpeed Autotune trial got a second searcher operation ({extra!r})")


def get_zero_stage_search_space(zero_stage: int) -> Dict[str, List[Union[bool, float]]]:
    """The `zero_optimization` values searched for `zero_stage`: those of stage 1 and of every stage up to it."""
    spaces = _defaults.DEFAULT_ZERO_SEARCH_SPACE
    if zero_stage not in spaces:
        raise ValueError(f"invalid zero_stage {zero_stage}: must be one of {list(spaces)}")
    space = copy.deepcopy(spaces[1]) if zero_stage else {}
    for stage in range(2, zero_stage + 1):
        space = merge_dicts(space, spaces[stage])
    return space


def get_random_zero_optim_config(zero_stage: int, rng: Optional[random.Random] = None) -> Dict[str, Any]:
    """A `zero_optimization` section for `zero_stage` with a random value of each searched setting."""
    choice = (rng or random).choice
    config: Dict[str, Any] = {k: choice(v) for k, v in get_zero_stage_search_space(zero_stage).items()}
    config["stage"] = zero_stage
    return config


def get_batch_config_from_mbs_gas_and_slots(ds_config: Dict[str, Any], slots: int) -> Dict[str, int]:
    """A consistent batch-size config: `train_batch_size` = micro batch x gradient accumulation steps x slots."""
    mbs = ds_config["train_micro_batch_size_per_gpu"]
    gas = ds_config.get("gradient_accumulation_steps", _defaults.GAS_DEFAULT)
    if gas == "auto":  # Hugging Face's placeholder
        gas = 1
    return {"train_batch_size": mbs * gas * max(1, slots), "train_micro_batch_size_per_gpu": mbs,
            "gradient_accumulation_steps": gas}


def get_hf_ds_config_path_from_args(args: List[str]) -> Optional[str]:
    for idx, arg in enumerate(args[:-1]):
        if arg == "--deepspeed":
            return args[idx + 1]
    return None


def update_hf_args(args: List[str], ds_config_dict: Dict[str, Any]) -> List[str]:
    """`args` (Hugging Face command-line arguments) with the batch-size flags set to the DeepSpeed config's values
    (added when missing; "auto" values are left to Hugging Face)."""
    flags = {"--per_device_train_batch_size": "train_micro_batch_size_per_gpu",
             "--gradient_accumulation_steps": "gradient_accumulation_steps"}
    args = list(args)

    def usable(value: Any) -> bool:
        return not (isinstance(value, str) and value.strip() == "auto")

    for idx in range(len(args) - 1):
        if args[idx] in flags:
            value = ds_config_dict.get(flags.pop(args[idx]))
            if value is not None and usable(value) and args[idx + 1] != str(value):
                logger.warning("Changing %s from %s to %s to match the DeepSpeed config", args[idx], args[idx + 1],
                               value)
                args[idx + 1] = str(value)
    for flag, key in flags.items():
        value = ds_config_dict.get(key)
        if value is not None and usable(value):
            logger.warning("Adding %s %s to the Hugging Face arguments (the DeepSpeed config's value)", flag, value)
            args.extend([flag, str(value)])
    return args


def get_hf_args_with_overwrites(args: List[str], hparams: Dict[str, Any]) -> List[str]:
    """Hugging Face command-line `args` updated for `hparams["overwrite_deepspeed_args"]`.

    The DeepSpeed JSON file named after `--deepspeed` is rewritten with the overwrites merged in (Hugging Face reads
    the file), and `--per_device_train_batch_size` / `--gradient_accumulation_steps` are set to its values.
    Without overwrites, `args` is returned as it is.
    """
    if _defaults.OVERWRITE_KEY not in hparams:
        logger.info("%s not in the hyperparameters: get_hf_args_with_overwrites changes nothing",
                    _defaults.OVERWRITE_KEY)
        return args
    path = get_hf_ds_config_path_from_args(args)
    if path is None:
        raise errors.InvalidTrialError("get_hf_args_with_overwrites: the Hugging Face arguments have no "
                                       "`--deepspeed CONFIG.json`; add it (DeepSpeed Autotune tunes that file)")
    import filelock

    with filelock.FileLock(path + ".lock"):  # the ranks of a trial share the file
        with open(path, "r") as f:
            config = json.load(f)
        config = merge_dicts(config, hparams[_defaults.OVERWRITE_KEY])
        with open(path, "w") as f:
            json.dump(config, f)
    return update_hf_args(args, config)
