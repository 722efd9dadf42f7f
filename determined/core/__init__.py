"""The trial-side runtime: how a trial process (or a plain training script) talks to the platform.

`core.init()` returns a `Context` with `.distributed`, `.train` (metrics, progress, status), `.checkpoint`,
`.searcher` (operations to work on), `.preempt`, `.profiler`, `.experimental` and `.info` (Determined 0.38's Core API; see
docs/core.md). Inside a trial process (DET_TRIAL_ID set) it is backed by the master's REST API; otherwise it is
local: `core._make_local_context(checkpoint_dir, lengths, config, hparams, trial_seed)` runs a trial with no master.
"""
from determined.core._checkpoint import CheckpointContext, DownloadMode
from determined.core._context import Context, _make_local_context, cluster_info_from_answer, init
from determined.core._distributed import Collectives, DistributedContext
from determined.core._experimental import ExperimentalCoreContext
from determined.core._info import ClusterInfo
from determined.core._preempt import PreemptContext, PreemptMode
from determined.core._profiler import ProfilerContext
from determined.core._searcher import (
    SearcherContext,
    SearcherContextMissing,
    SearcherMode,
    SearcherOperation,
    Unit,
)
from determined.core._train import EARLY_EXIT_REASONS, EarlyExitReason, TensorboardMode, TrainContext

__all__ = [
    "init",
    "Context",
    "ClusterInfo",
    "DistributedContext",
    "Collectives",
    "TrainContext",
    "CheckpointContext",
    "DownloadMode",
    "SearcherContext",
    "SearcherContextMissing",
    "SearcherMode",
    "SearcherOperation",
    "Unit",
    "PreemptContext",
    "PreemptMode",
    "ProfilerContext",
    "ExperimentalCoreContext",
    "EarlyExitReason",
    "TensorboardMode",
    "EARLY_EXIT_REASONS",
    "cluster_info_from_answer",
    "_make_local_context",
]
