"""Building the core context: backed by a master (inside a trial process) or local (no master)."""
import logging
import os
import pathlib
from typing import Any, Dict, List, Optional, Sequence

from determined import errors, storage
from determined.common.api import Session
from determined.core._checkpoint import CheckpointContext
from determined.core._distributed import DistributedContext
from determined.core._info import ClusterInfo
from determined.core._preempt import PreemptContext
from determined.core._searcher import SearcherContext
from determined.core._train import TrainContext

logger = logging.getLogger("determined.core")

# Session retries back off up to 3 s each: 23 retries keep trying for about a minute.
MASTER_RETRIES = 23

# The harness fetched the trial's context just before running the user's code in this process: the first
# core.init() of that trial uses it instead of asking the master again.
_prefetched_contexts: Dict[int, Dict[str, Any]] = {}


def hand_over_trial_context(trial_id: int, answer: Dict[str, Any]) -> None:
    """Called by the harness with its `GET /trials/{id}/context` answer, for the next core.init() of the trial."""
    _prefetched_contexts[trial_id] = answer


class Context:
    """Everything a trial process uses to talk to the platform: `distributed`, `train`, `checkpoint`,
    `searcher`, `preempt` and `info`. Use it as a context manager, or call `close()` at the end."""

    def __init__(
        self,
        *,
        info: ClusterInfo,
        distributed: DistributedContext,
        train: TrainContext,
        checkpoint: CheckpointContext,
        searcher: SearcherContext,
        preempt: PreemptContext,
        session: Optional[Session] = None,
    ) -> None:
        self.info = info
        self.distributed = distributed
        self.train = train
        self.checkpoint = checkpoint
        self.searcher = searcher
        self.preempt = preempt
        self._session = session
        # True when core.init() built `distributed` from the launcher's environment: close() closes it.
        self._owns_distributed = False

    @property
    def is_local(self) -> bool:
        """True when no master backs this context (metrics go to the logger)."""
        return self._session is None

    def close(self) -> None:
        self.preempt.close()
        if self._owns_distributed:
            self.distributed.close()
        if self._session is not None:
            self._session.close()
            self._session = None

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def init(
    *,
    distributed: Optional[DistributedContext] = None,
    checkpoint_dir: Optional[str] = None,
    lengths: Optional[Sequence[int]] = None,
    config: Optional[Dict[str, Any]] = None,
    hparams: Optional[Dict[str, Any]] = None,
    trial_seed: int = 0,
) -> Context:
    """The core context of this process.

    Inside a trial process (DET_TRIAL_ID set) the context talks to the master at DET_MASTER with
    DET_SESSION_TOKEN, and the other arguments but `distributed` must be left out. Otherwise it is local
    (see `_make_local_context`): `checkpoint_dir` defaults to `./checkpoints`, and `lengths` to one
    operation of `searcher.max_length` batches when the config gives it in batches, else none.
    Without `distributed`, a process started by `python -m determined.exec.launch` gets its rank and the
    collectives from the environment (`DistributedContext.from_env()`); any other process has size 1.
    """
    owns_distributed = distributed is None
    distributed = distributed or DistributedContext.from_env()
    try:
        context = _init(distributed, checkpoint_dir, lengths, config, hparams, trial_seed)
    except BaseException:
        if owns_distributed:
            distributed.close()
        raise
    context._owns_distributed = owns_distributed
    return context


def _init(
    distributed: DistributedContext,
    checkpoint_dir: Optional[str],
    lengths: Optional[Sequence[int]],
    config: Optional[Dict[str, Any]],
    hparams: Optional[Dict[str, Any]],
    trial_seed: int,
) -> Context:
    if os.environ.get("DET_TRIAL_ID"):
        given = [n for n, v in (("checkpoint_dir", checkpoint_dir), ("lengths", lengths), ("config", config),
                                ("hparams", hparams)) if v is not None]
        if given:
            raise errors.DeterminedError(
                f"core.init(): {', '.join(given)} cannot be given inside a trial process (DET_TRIAL_ID is set): "
                "the master provides them"
            )
        return _make_remote_context(distributed)
    config = dict(config or {})
    if lengths is None:
        max_length = (config.get("searcher") or {}).get("max_length")
        lengths = [int(max_length["batches"])] if isinstance(max_length, dict) and "batches" in max_length else []
    return _make_local_context(
        checkpoint_dir=checkpoint_dir or str(pathlib.Path("checkpoints").resolve()),
        lengths=list(lengths),
        config=config,
        hparams=dict(hparams or {}),
        trial_seed=trial_seed,
        distributed=distributed,
    )


def _make_local_context(
    checkpoint_dir: str,
    lengths: List[int],
    config: Dict[str, Any],
    hparams: Dict[str, Any],
    trial_seed: int = 0,
    *,
    distributed: Optional[DistributedContext] = None,
    latest_checkpoint: Optional[str] = None,
    steps_completed: int = 0,
    trial_id: int = 0,
    experiment_id: int = 0,
) -> Context:
    """A context with no master: metrics go to the `determined.core` logger (and the train context's
    histories), checkpoints to shared_fs storage under `checkpoint_dir` (each one a `<uuid>` directory),
    and the searcher yields one operation per entry of `lengths` (batches since the trial started).

    `latest_checkpoint`/`steps_completed` make a controller resume from a checkpoint in `checkpoint_dir`.
    """
    distributed = distributed or DistributedContext()
    for length in lengths:
        if not isinstance(length, int) or isinstance(length, bool) or length < 0:
            raise errors.DeterminedError(f"searcher operation lengths must be ints >= 0 (batches), got {lengths!r}")
    if latest_checkpoint is not None and not (pathlib.Path(checkpoint_dir) / latest_checkpoint).is_dir():
        raise errors.DeterminedError(f"latest_checkpoint {latest_checkpoint!r} is not a directory in {checkpoint_dir}")
    info = ClusterInfo(
        trial_id=trial_id,
        experiment_id=experiment_id,
        allocation_id="local",
        config=config,
        hparams=hparams,
        trial_seed=trial_seed,
        latest_checkpoint=latest_checkpoint,
        steps_completed=steps_completed if latest_checkpoint else 0,
    )
    preempt = PreemptContext(None, info.allocation_id, distributed)
    return Context(
        info=info,
        distributed=distributed,
        train=TrainContext(None, trial_id, distributed, info.searcher_metric, info.smaller_is_better),
        checkpoint=CheckpointContext(storage.SharedFSStorageManager(checkpoint_dir), None, trial_id, distributed),
        searcher=SearcherContext(None, trial_id, distributed, preempt, local_lengths=lengths),
        preempt=preempt,
    )


def _read_env_int(name: str) -> int:
    raw = os.environ.get(name, "")
    try:
        return int(raw)
    except ValueError:
        raise errors.DeterminedError(f"environment variable {name}={raw!r} must be an integer") from None


def _make_remote_context(distributed: DistributedContext) -> Context:
    master = os.environ.get("DET_MASTER")
    if not master:
        raise errors.DeterminedError("DET_TRIAL_ID is set but DET_MASTER is not: set it to the master's URL")
    trial_id = _read_env_int("DET_TRIAL_ID")
    session = Session(master, os.environ.get("DET_SESSION_TOKEN") or None, retries=MASTER_RETRIES)
    try:
        answer = _prefetched_contexts.pop(trial_id, None) or session.get(f"/trials/{trial_id}/context")
        info = cluster_info_from_answer(answer, master)
        if os.environ.get("DET_ALLOCATION_ID"):
            info.allocation_id = os.environ["DET_ALLOCATION_ID"]
        storage_manager = storage.build_storage_manager(info.config.get("checkpoint_storage"))
    except BaseException:
        session.close()
        raise
    preempt = PreemptContext(session, info.allocation_id, distributed, watch_sigterm=True)
    return Context(
        info=info,
        distributed=distributed,
        train=TrainContext(session, trial_id, distributed, info.searcher_metric, info.smaller_is_better),
        checkpoint=CheckpointContext(storage_manager, session, trial_id, distributed),
        searcher=SearcherContext(session, trial_id, distributed, preempt),
        preempt=preempt,
        session=session,
    )


def cluster_info_from_answer(answer: Dict[str, Any], master_url: Optional[str] = None) -> ClusterInfo:
    """The ClusterInfo of a `GET /trials/{id}/context` answer (the run's slots and containers from the environment)."""
    return ClusterInfo._from_answer(answer, master_url)
