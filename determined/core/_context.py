"""Building the core context: backed by a master (inside a trial process) or local (no master)."""
import logging
import os
import pathlib
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from determined import errors, storage
from determined.common import data_dir
from determined.common.api import Session
from determined.config import searcher_drives_trials
from determined.core._checkpoint import CheckpointContext
from determined.core._distributed import DistributedContext
from determined.core._experimental import ExperimentalCoreContext
from determined.core._info import ClusterInfo
from determined.core._preempt import PreemptContext, PreemptMode
from determined.core._profiler import ProfilerContext
from determined.core._searcher import SearcherContext, SearcherContextMissing
from determined.core._train import EarlyExitReason, TensorboardMode, TrainContext

logger = logging.getLogger("determined.core")

# Session retries back off up to 3 s each: 23 retries keep trying for about a minute.
MASTER_RETRIES = 23

# The harness fetched the trial's context just before running the user's code in this process: the first
# core.init() of that trial uses it instead of asking the master again.
# (the answer, when it came: time.monotonic())
_prefetched_contexts: Dict[int, Tuple[Dict[str, Any], float]] = {}


def hand_over_trial_context(trial_id: int, answer: Dict[str, Any]) -> None:
    """Called by the harness with its `GET /trials/{id}/context` answer, for the next core.init() of the trial."""
    _prefetched_contexts[trial_id] = (answer, time.monotonic())


class Context:
    """Everything a trial process uses to talk to the platform: `distributed`, `train`, `checkpoint`,
    `searcher`, `preempt`, `profiler`, `experimental` (`report_task_using_checkpoint`/`_model_version`) and `info`. Use it as a context manager (`with core.init() as
    core_context:`), or call `close()` at the end. A `det.InvalidHP` raised inside the `with` ends the trial
    with the early exit INVALID_HP and the process exits with status 0 (Determined 0.38)."""

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
        self.profiler = ProfilerContext(self._report_system_metrics, distributed)
        self.experimental = ExperimentalCoreContext(session, info.trial_id, distributed)
        self._session = session
        # True when core.init() built `distributed` from the launcher's environment: close() closes it.
        self._owns_distributed = False

    def _report_system_metrics(self, group: str, when: int, metrics: Dict[str, Any]) -> None:
        self.train.report_metrics(group, when, metrics)

    @property
    def is_local(self) -> bool:
        """True when no master backs this context (metrics go to the logger)."""
        return self._session is None

    def start(self) -> None:
        """Nothing needs starting here (reports are sent as they are made); kept for Determined's API."""

    def close(self) -> None:
        self.profiler.off()
        self.preempt.close()
        if self._owns_distributed:
            self.distributed.close()
        if self._session is not None:
            self._session.close()
            self._session = None

    def __enter__(self) -> "Context":
        self.start()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        invalid_hp = exc_type is not None and issubclass(exc_type, errors.InvalidHP)
        try:
            if invalid_hp:
                logger.warning("the trial's hyperparameters are invalid (det.InvalidHP: %s); it stops", exc)
                self.train.report_early_exit(EarlyExitReason.INVALID_HP)
        finally:
            self.close()
        if invalid_hp:
            raise SystemExit(0)


def init(
    *,
    distributed: Optional[DistributedContext] = None,
    checkpoint_storage: Optional[Union[str, Mapping[str, Any]]] = None,
    preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
    tensorboard_mode: TensorboardMode = TensorboardMode.AUTO,
    checkpoint_dir: Optional[str] = None,
    lengths: Optional[Sequence[int]] = None,
    config: Optional[Dict[str, Any]] = None,
    hparams: Optional[Dict[str, Any]] = None,
    trial_seed: int = 0,
) -> Context:
    """The core context of this process (Determined 0.38's `det.core.init`); use it as `with core.init() as ...`.

    Inside a trial (DET_TRIAL_ID set) the context talks to the master at DET_MASTER with DET_SESSION_TOKEN;
    checkpoints go to `checkpoint_storage` when given, else to the experiment's. Off the platform it is local:
    metrics are logged, `should_preempt()` is always false, the searcher gives one operation (of length 1, or
    `searcher.max_length` in batches when `config` gives one), and checkpoints go to `checkpoint_storage` (a
    directory path, `file://` path, `s3://bucket/prefix`, or a storage config dict), else to `checkpoint_dir`
    (kept from this platform's earlier API), else to `checkpoints/` in the data dir (~/.local/share/determined).

    `preempt_mode` says which ranks may ask about preemption (`PreemptMode`); `tensorboard_mode` whether the
    platform writes the reported metrics to TensorBoard files (AUTO) or leaves it to the code (MANUAL).
    Without `distributed`, a process started by a launcher gets its rank and the collectives from the
    environment (`DistributedContext.from_env()`); any other process has size 1.
    `lengths`, `config`, `hparams`, `trial_seed`: a local run of a Trial class (this platform's earlier API).
    """
    owns_distributed = distributed is None
    distributed = distributed or DistributedContext.from_env()
    try:
        if os.environ.get("DET_TRIAL_ID"):
            given = [n for n, v in (("checkpoint_dir", checkpoint_dir), ("lengths", lengths), ("config", config),
                                    ("hparams", hparams)) if v is not None]
            if given:
                raise errors.DeterminedError(
                    f"core.init(): {', '.join(given)} cannot be given inside a trial process (DET_TRIAL_ID is set): "
                    "the master provides them"
                )
            context = _make_remote_context(distributed, checkpoint_storage, PreemptMode(preempt_mode))
        else:
            context = _init_local(distributed, checkpoint_storage, checkpoint_dir, lengths, config, hparams,
                                  trial_seed)
        context.train._set_tensorboard_mode(tensorboard_mode)
    except BaseException:
        if owns_distributed:
            distributed.close()
        raise
    context._owns_distributed = owns_distributed
    return context


def _init_local(
    distributed: DistributedContext,
    checkpoint_storage: Optional[Union[str, Mapping[str, Any]]],
    checkpoint_dir: Optional[str],
    lengths: Optional[Sequence[int]],
    config: Optional[Dict[str, Any]],
    hparams: Optional[Dict[str, Any]],
    trial_seed: int,
) -> Context:
    config = dict(config or {})
    if lengths is None:
        max_length = (config.get("searcher") or {}).get("max_length")
        lengths = [int(max_length["batches"])] if isinstance(max_length, dict) and "batches" in max_length else [1]
    manager = _local_storage(checkpoint_storage, checkpoint_dir)
    context = _make_local_context(
        checkpoint_dir=str(getattr(manager, "base_path", "")),
        lengths=list(lengths),
        config=config,
        hparams=dict(hparams or {}),
        trial_seed=trial_seed,
        distributed=distributed,
        storage_manager=manager,
    )
    logger.info("core.init() without a master: metrics go to this log, checkpoints to %s", manager)
    return context


def _local_storage(checkpoint_storage: Optional[Union[str, Mapping[str, Any]]],
                   checkpoint_dir: Optional[str]) -> storage.StorageManager:
    """Where a context without a master stores checkpoints (see `init`)."""
    if checkpoint_storage is None:
        directory = checkpoint_dir or str(data_dir() / "checkpoints")
        return storage.SharedFSStorageManager(directory)
    if checkpoint_dir is not None:
        raise errors.DeterminedError("core.init(): give checkpoint_storage or checkpoint_dir, not both")
    return storage_from_argument(checkpoint_storage)


def storage_from_argument(checkpoint_storage: Union[str, Mapping[str, Any]]) -> storage.StorageManager:
    """The storage of `core.init(checkpoint_storage=...)`: a directory path or `file://` path, `s3://bucket/prefix`,
    or a `checkpoint_storage` config dict."""
    if isinstance(checkpoint_storage, Mapping):
        return storage.build_storage_manager(checkpoint_storage)
    if not isinstance(checkpoint_storage, str) or not checkpoint_storage:
        raise errors.DeterminedError(
            f"core.init(checkpoint_storage=...): expected a path, file://path, s3://bucket/prefix or a storage config "
            f"dict, got {checkpoint_storage!r}"
        )
    if checkpoint_storage.startswith("s3://"):
        bucket, _, prefix = checkpoint_storage[len("s3://"):].partition("/")
        return storage.build_storage_manager({"type": "s3", "bucket": bucket, "prefix": prefix or None})
    if "://" in checkpoint_storage and not checkpoint_storage.startswith("file://"):
        scheme = checkpoint_storage.split("://", 1)[0]
        raise errors.DeterminedError(
            f"core.init(checkpoint_storage={checkpoint_storage!r}): {scheme}:// storage is not supported here; use a "
            "directory, file://path or s3://bucket/prefix"
        )
    path = checkpoint_storage[len("file://"):] if checkpoint_storage.startswith("file://") else checkpoint_storage
    return storage.SharedFSStorageManager(str(pathlib.Path(path).expanduser().resolve()))


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
    storage_manager: Optional[storage.StorageManager] = None,
) -> Context:
    """A context with no master: metrics go to the `determined.core` logger (and the train context's
    histories), checkpoints to shared_fs storage under `checkpoint_dir` (each one a `<uuid>` directory; or to
    `storage_manager`),
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
        checkpoint=CheckpointContext(storage_manager or storage.SharedFSStorageManager(checkpoint_dir), None, trial_id,
                                     distributed),
        searcher=SearcherContext(None, trial_id, distributed, preempt, local_lengths=lengths, config=config,
                                 hparams=hparams),
        preempt=preempt,
    )


def _read_env_int(name: str) -> int:
    raw = os.environ.get(name, "")
    try:
        return int(raw)
    except ValueError:
        raise errors.DeterminedError(f"environment variable {name}={raw!r} must be an integer") from None


def _make_remote_context(
    distributed: DistributedContext,
    checkpoint_storage: Optional[Union[str, Mapping[str, Any]]] = None,
    preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
) -> Context:
    master = os.environ.get("DET_MASTER")
    if not master:
        raise errors.DeterminedError("DET_TRIAL_ID is set but DET_MASTER is not: set it to the master's URL")
    trial_id = _read_env_int("DET_TRIAL_ID")
    session = Session(master, os.environ.get("DET_SESSION_TOKEN") or None, retries=MASTER_RETRIES)
    try:
        answer, answered_at = _prefetched_contexts.pop(trial_id, None) or (None, 0.0)
        if answer is None:
            answer = session.get(f"/trials/{trial_id}/context")
        info = cluster_info_from_answer(answer, master)
        if os.environ.get("DET_ALLOCATION_ID"):
            info.allocation_id = os.environ["DET_ALLOCATION_ID"]
        if checkpoint_storage is not None:
            storage_manager = storage_from_argument(checkpoint_storage)
            logger.warning(
                "core.init(checkpoint_storage=...): this trial's checkpoints go to %s, not to the experiment's "
                "checkpoint_storage; the trial resumes from them, but the master's garbage collection, `det checkpoint "
                "download` and the model registry look in the experiment's storage and do not find their files",
                storage_manager)
        else:
            storage_manager = storage.build_storage_manager(info.config.get("checkpoint_storage"))
    except BaseException:
        session.close()
        raise
    preempt = PreemptContext(session, info.allocation_id, distributed, watch_sigterm=True, mode=preempt_mode)
    if distributed.rank == 0 and "preempt" in answer:  # the prefetched context said whether to stop
        preempt._answered(answer["preempt"], at=answered_at)
    searcher_config = info.config.get("searcher") or {}
    searcher: SearcherContext
    if not searcher_drives_trials(searcher_config) and searcher_config.get("max_length") is None:
        searcher = SearcherContextMissing()  # Determined 0.38: no max_length, no operations
    else:
        searcher = SearcherContext(session, trial_id, distributed, preempt, config=info.config, hparams=info.hparams,
                                   next_answer=answer.get("searcher_operation"))
    return Context(
        info=info,
        distributed=distributed,
        train=TrainContext(session, trial_id, distributed, info.searcher_metric, info.smaller_is_better,
                           master_data_dir=answer.get("master_data_dir")),
        checkpoint=CheckpointContext(storage_manager, session, trial_id, distributed),
        searcher=searcher,
        preempt=preempt,
        session=session,
    )


def cluster_info_from_answer(answer: Dict[str, Any], master_url: Optional[str] = None) -> ClusterInfo:
    """The ClusterInfo of a `GET /trials/{id}/context` answer (the run's slots and containers from the environment)."""
    return ClusterInfo._from_answer(answer, master_url)
