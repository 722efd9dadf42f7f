"""TensorFlow helpers shared by `determined.keras` and `determined.estimator`."""
from determined.core._distributed import check_global_batch_size
from determined.tensorflow._cache import cache_dataset, cache_path, cache_root
from determined.tensorflow._distributed import (
    collective_strategy_v1,
    current_strategy,
    multi_worker_strategy,
    session_target,
    tf_config,
)

__all__ = [
    "cache_dataset",
    "cache_path",
    "cache_root",
    "check_global_batch_size",
    "collective_strategy_v1",
    "current_strategy",
    "multi_worker_strategy",
    "session_target",
    "tf_config",
]
