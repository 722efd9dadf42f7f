"""The environment variables a process reads when its interpreter starts or a framework is imported."""
from typing import Tuple

# Variables a process reads when its interpreter starts or a framework is imported (thread pools, allocators,
# library paths, the frameworks' own settings): a trial whose values differ from the server's starts cold.
IMPORT_TIME_PREFIXES: Tuple[str, ...] = (
    "PYTHON", "LD_", "OMP_", "MKL_", "KMP_", "OPENBLAS_", "GOTO_", "BLIS_", "VECLIB_", "NUMEXPR_", "TORCH",
    "PYTORCH_", "TF_", "XLA_", "CUDA_", "MALLOC_", "GLIBC_", "KERAS_", "LC_", "LANG",
)
# Set for each trial and read only later (CUDA_VISIBLE_DEVICES: when CUDA is initialised, after the fork).
PER_TRIAL_NAMES = frozenset({"CUDA_VISIBLE_DEVICES"})
