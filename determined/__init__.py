"""Determined: train PyTorch, tf.keras and tf.estimator Trials with hyperparameter search, on a laptop or a cluster.

`import determined as det` stays light: the framework packages (`det.pytorch`, ...) and the runtime are imported
on first use.
"""
import importlib
from typing import Any

__version__ = "0.13.8.post1"

# The format of Determined's log lines, for logging.basicConfig(format=det.LOG_FORMAT) in user code (the web UI
# reads the level of a line from its first word).
LOG_FORMAT = "%(levelname)s: [%(process)s] %(name)s: %(message)s"

_LAZY = {
    "Constant": ("determined.config.hparams", "Constant"),
    "Integer": ("determined.config.hparams", "Integer"),
    "Double": ("determined.config.hparams", "Double"),
    "Log": ("determined.config.hparams", "Log"),
    "Categorical": ("determined.config.hparams", "Categorical"),
    "Trial": ("determined._trial", "Trial"),
    "TrialController": ("determined._trial", "TrialController"),
    "TrialContext": ("determined._trial_context", "TrialContext"),
    "DeterminedError": ("determined.errors", "DeterminedError"),
    "InvalidHP": ("determined.errors", "InvalidHP"),
    "ClusterInfo": ("determined.core._info", "ClusterInfo"),
    "TrialInfo": ("determined.core._info", "TrialInfo"),
    "get_cluster_info": ("determined.core._info", "get_cluster_info"),
    "import_from_path": ("determined._import", "import_from_path"),
}
_SUBMODULES = {
    "core", "config", "pytorch", "keras", "estimator", "tensorflow", "experimental", "storage", "searcher", "errors",
    "common", "tensorboard", "tensorpack", "util", "launch",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"determined.{name}")
    raise AttributeError(f"module 'determined' has no attribute {name!r}")


__all__ = ["__version__", "LOG_FORMAT", *_LAZY]
