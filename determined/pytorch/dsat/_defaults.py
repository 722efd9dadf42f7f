"""Constants of DeepSpeed Autotune: file names DeepSpeed writes, hyperparameter keys, the search spaces and the
command line's defaults (Determined 0.23-0.38's values)."""
from typing import Any, Dict, List, Union

from determined.pytorch.deepspeed._config import CONFIG_KEY, OVERWRITE_KEY

ALL_SEARCH_METHOD_NAMES = ["binary", "_test", "asha", "random"]

# DeepSpeed's engine writes these (relative to the working directory) and then exits (SystemExit).
MODEL_INFO_PROFILING_PATH = "model_info.json"
AUTOTUNING_RESULTS_PATH = "autotuning_metric.json"
# A hyperparameter that makes a DeepSpeedTrial run the autotuning path (its first operation only, then report).
USE_DSAT_MODE_KEY = "_use_dsat_mode"
GAS_DEFAULT = 1
ARGS_PKL_PATH = "args.pkl"

SMALLER_IS_BETTER_METRICS = ["forward", "backward", "latency"]
LARGER_IS_BETTER_METRICS = ["throughput", "FLOPS_per_gpu"]

# The profiling trial: one micro batch per slot; DeepSpeed records the model's size and activation memory in
# MODEL_INFO_PROFILING_PATH during the first forward pass and exits.
MODEL_INFO_PROFILE_DS_CONFIG: Dict[str, Any] = {
    "train_micro_batch_size_per_gpu": 1,
    "autotuning": {
        "enabled": True,
        "model_info_path": MODEL_INFO_PROFILING_PATH,
        "model_info": {"profile": True},
    },
}

_BUCKET_SIZES: List[Union[bool, float]] = [n * 10**m for n in (1, 5) for m in range(6, 10)]

# What each ZeRO stage adds to the search space of the stage below it.
DEFAULT_ZERO_SEARCH_SPACE: Dict[int, Dict[str, List[Union[bool, float]]]] = {
    0: {},
    1: {"reduce_bucket_size": list(_BUCKET_SIZES), "allgather_bucket_size": list(_BUCKET_SIZES)},
    2: {"overlap_comm": [True, False], "reduce_scatter": [True, False], "contiguous_gradients": [True, False]},
    3: {"allgather_partitions": [True, False]},
}

AUTOTUNING_ARG_DEFAULTS: Dict[str, Any] = {
    "max-trials": 64,
    "max-concurrent-trials": 16,
    "zero-stages": [1, 2, 3],
    "trials-per-random-config": 5,
    "start-profile-step": 3,
    "end-profile-step": 5,
    "metric": "FLOPS_per_gpu",
    "random-seed": 42,
    "run-full-experiment": False,
    "search-range-factor": 1.0,
    "divisor": 2,
    "min-binary-search-trials": 3,
    "max-rungs": 5,
    "asha-early-stopping": 0,
}

__all__ = ["CONFIG_KEY", "OVERWRITE_KEY"]
