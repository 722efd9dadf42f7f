"""An unmanaged run: a script run outside the platform records an experiment and a trial on the master (created, or
reused by their external ids), and reports to them through a core context built here (determined/master/lifecycle/unmanaged.py
is the master's side)."""
import logging
import pathlib
import sys
import types
import uuid
from typing import Any, Callable, Dict, Mapping, Optional, Union

from determined import core, errors, storage
from determined.core._context import Context
from determined.core._info import ClusterInfo
from determined.core._searcher import SearcherContextMissing
from determined.experimental.client import _records
from determined.experimental.core_v2._config import Config

logger = logging.getLogger("determined.core")

UNMANAGED_METRIC = "unmanaged"  # the searcher metric of an unmanaged experiment whose Config names none (0.38)


def storage_config(checkpoint_storage: Union[str, Mapping[str, Any]]) -> Dict[str, Any]:
    """The experiment config's `checkpoint_storage` of `init(checkpoint_storage=...)` / `Config.checkpoint_storage`:
    a directory path or file:// path (shared_fs), s3://bucket/prefix, or a storage config dict."""
    if isinstance(checkpoint_storage, Mapping):
        return dict(checkpoint_storage)
    if not isinstance(checkpoint_storage, str) or not checkpoint_storage:
        raise errors.DeterminedError(f"core_v2: checkpoint_storage must be a path, file://path, s3://bucket/prefix or "
                                     f"a storage config dict, got {checkpoint_storage!r}")
    if checkpoint_storage.startswith("s3://"):
        bucket, _, prefix = checkpoint_storage[len("s3://"):].partition("/")
        return {"type": "s3", "bucket": bucket, **({"prefix": prefix} if prefix else {})}
    if "://" in checkpoint_storage and not checkpoint_storage.startswith("file://"):
        raise errors.DeterminedError(f"core_v2: checkpoint_storage {checkpoint_storage!r}: only a directory, "
                                     "file://path or s3://bucket/prefix is supported")
    path = checkpoint_storage[len("file://"):] if checkpoint_storage.startswith("file://") else checkpoint_storage
    return {"type": "shared_fs", "host_path": str(pathlib.Path(path).expanduser().resolve())}


def experiment_config(config: Config, checkpoint_storage: Optional[Union[str, Mapping[str, Any]]]) -> Dict[str, Any]:
    """The experiment config an unmanaged run sends (the master validates it and fills in its defaults)."""
    out: Dict[str, Any] = {
        "name": config.name or f"unmanaged-{uuid.uuid4().hex[:8]}",
        "searcher": dict(config.searcher) if config.searcher else {"name": "single", "metric": UNMANAGED_METRIC},
    }
    for field in ("description", "labels", "data", "workspace", "project"):
        value = getattr(config, field)
        if value is not None:
            out[field] = list(value) if field == "labels" else value
    storage_arg = checkpoint_storage if checkpoint_storage is not None else config.checkpoint_storage
    if storage_arg is not None:  # else the master's default storage (in its data dir)
        out["checkpoint_storage"] = storage_config(storage_arg)
    return out


def _refused(e: errors.APIError, what: str) -> errors.DeterminedError:
    problems = "".join(f"\n  {p}" for p in getattr(e, "problems", []) or [])
    return errors.DeterminedError(f"core_v2.init(): the master refused {what}: {getattr(e, 'message', e)}{problems}")


def register_run(session: Any, config: Config, checkpoint_storage: Optional[Union[str, Mapping[str, Any]]]
                 ) -> Dict[str, Any]:
    """Create (or reuse, by external ids) the experiment and trial, start a run of the trial; the trial's context."""
    exp_config = experiment_config(config, checkpoint_storage)
    try:
        exp = _records.create_unmanaged_experiment(session, exp_config, config.external_experiment_id)
    except errors.APIError as e:
        raise _refused(e, "the unmanaged experiment") from None
    if not exp.get("unmanaged"):
        raise errors.DeterminedError(f"core_v2.init(): the master at {session.master} answered with a managed "
                                     f"experiment ({exp.get('id')}); it does not support unmanaged runs")
    try:
        answer = _records.start_unmanaged_trial(session, exp["id"], dict(config.hparams or {}),
                                                config.external_trial_id)
    except errors.APIError as e:
        raise _refused(e, f"the trial of unmanaged experiment {exp['id']}") from None
    return answer


def cluster_info(answer: Mapping[str, Any], master_url: str) -> ClusterInfo:
    """The ClusterInfo of an unmanaged run (no allocation, no slots: the script runs where it was started)."""
    task_id = f"{answer['experiment_id']}.{answer['trial_id']}"
    latest = answer.get("latest_checkpoint") or None
    return ClusterInfo(
        trial_id=int(answer["trial_id"]), experiment_id=int(answer["experiment_id"]),
        allocation_id=f"{task_id}.unmanaged.{answer.get('trial_run_id') or 0}",
        config=dict(answer["config"]), hparams=dict(answer.get("hparams") or {}),
        trial_seed=int(answer.get("trial_seed") or 0),
        latest_checkpoint=latest["uuid"] if latest else None,
        steps_completed=int(answer.get("steps_completed") or 0) if latest else 0,
        master_url=master_url, cluster_id=str(answer.get("cluster_id") or ""), agent_id="unmanaged", slot_ids=[],
        task_id=task_id, trial_run_id=int(answer.get("trial_run_id") or 0),
    )


class UnmanagedContext(Context):
    """The core context of an unmanaged run: on close, the chief reports the trial COMPLETED, or ERROR when the
    run ends with an exception (or `sys.exit` with a non-zero status, when `watch_exit` hooked it)."""

    def __init__(self, *, state_session: Any, watch_exit: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._state_session = state_session
        self._reported_end = False
        self._failure: Optional[BaseException] = None
        self._exit_watch = _ExitWatch() if watch_exit and self.distributed.rank == 0 else None

    def close(self) -> None:
        self._end(self._failure)

    def _end(self, failure: Optional[BaseException]) -> None:
        try:
            if not self._reported_end and self.distributed.rank == 0 and self._state_session is not None:
                self._reported_end = True
                if failure is None and self._exit_watch is not None:
                    failure = self._exit_watch.failure()
                state = "COMPLETED" if failure is None else "ERROR"
                if failure is not None:
                    logger.error("unmanaged trial %s ends in ERROR: %s", self.info.trial_id, failure)
                try:
                    _records.set_trial_state(self._state_session, self.info.trial_id, state)
                except Exception as e:  # the run's own end must not fail on the report of it
                    logger.warning("could not report unmanaged trial %s as %s: %s", self.info.trial_id, state, e)
        finally:
            if self._exit_watch is not None:
                self._exit_watch.restore()
                self._exit_watch = None
            super().close()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc is not None and not isinstance(exc, (errors.InvalidHP, SystemExit)):
            self._failure = exc
        elif isinstance(exc, SystemExit) and exc.code not in (None, 0):
            self._failure = RuntimeError(f"the script exited with status {exc.code}")
        super().__exit__(exc_type, exc, tb)


class _ExitWatch:
    """Remembers an uncaught exception or a `sys.exit(non-zero)` of the script, for the trial's final state."""

    def __init__(self) -> None:
        self._exception: Optional[BaseException] = None
        self._exit_code: Any = None
        self._orig_exit: Callable[..., Any] = sys.exit
        self._orig_hook = sys.excepthook
        sys.exit = self._exit  # type: ignore[assignment]
        sys.excepthook = self._hook

    def _exit(self, code: Any = 0) -> None:
        self._exit_code = code
        self._orig_exit(code)

    def _hook(self, exc_type: Any, exc: BaseException, tb: Optional[types.TracebackType]) -> None:
        self._exception = exc
        self._orig_hook(exc_type, exc, tb)

    def failure(self) -> Optional[BaseException]:
        if self._exception is not None:
            return self._exception
        if self._exit_code not in (None, 0):
            return RuntimeError(f"the script exited with status {self._exit_code}")
        return None

    def restore(self) -> None:
        if sys.exit == self._exit:
            sys.exit = self._orig_exit  # type: ignore[assignment]
        if sys.excepthook == self._hook:
            sys.excepthook = self._orig_hook


def make_context(session: Any, config: Config, *, distributed: core.DistributedContext,
                 checkpoint_storage: Optional[Union[str, Mapping[str, Any]]], preempt_mode: core.PreemptMode,
                 tensorboard_mode: core.TensorboardMode, watch_exit: bool) -> UnmanagedContext:
    """Register the run on the master (the chief; the other ranks get the answer by broadcast) and build its
    context."""
    answer = register_run(session, config, checkpoint_storage) if distributed.rank == 0 else None
    if distributed.size > 1:
        answer = distributed.broadcast(answer)
    assert answer is not None
    info = cluster_info(answer, session.master)
    manager = storage.build_storage_manager(info.config.get("checkpoint_storage"))
    preempt = core.PreemptContext(None, info.allocation_id, distributed, mode=preempt_mode)  # never preempted
    train = core.TrainContext(session, info.trial_id, distributed, info.searcher_metric, info.smaller_is_better)
    train._set_tensorboard_mode(tensorboard_mode)
    context = UnmanagedContext(
        state_session=session, watch_exit=watch_exit, info=info, distributed=distributed, train=train,
        checkpoint=core.CheckpointContext(manager, session, info.trial_id, distributed),
        searcher=SearcherContextMissing(), preempt=preempt, session=session,
    )
    if distributed.rank == 0:
        logger.info("unmanaged run %s of trial %s (experiment %s) on %s; checkpoints go to %s", info.trial_run_id,
                    info.trial_id, info.experiment_id, session.master, manager)
    return context
