"""Determined 0.38's `determined.experimental.core_v2`: the Core API as module-level singletons, for scripts that
run on the platform (managed) or outside it (unmanaged).

```python
from determined.experimental import core_v2

core_v2.init(config=core_v2.Config(name="my-run", hparams={"lr": 0.1}))
core_v2.train.report_training_metrics(steps_completed=1, metrics={"loss": 0.5})
core_v2.close()
```

Inside a trial of the platform (the script is an experiment's entrypoint) `init` builds the context as
`core.init()` does and the Config is ignored. Anywhere else it records an unmanaged experiment and trial on the
master (DET_MASTER, or the master of the local data dir, or its API opened in this process), as the logged-in user,
and reports to them; `close()` (also at exit) ends the trial COMPLETED, or ERROR after an uncaught exception.
See docs/unmanaged.md.
"""
import atexit
from typing import Any, Dict, Optional, Union

from determined import core, errors
from determined.core import DistributedContext, PreemptMode, TensorboardMode
from determined.core._info import get_cluster_info
from determined.experimental.core_v2._config import Config, DefaultConfig, UnmanagedConfig, check, merge

# The singletons `init` sets (None before it and after `close`), as in Determined 0.38.
train: Optional[core.TrainContext] = None
distributed: Optional[core.DistributedContext] = None
preempt: Optional[core.PreemptContext] = None
checkpoint: Optional[core.CheckpointContext] = None
searcher: Optional[core.SearcherContext] = None
info: Optional[core.ClusterInfo] = None

_context: Optional[core.Context] = None
_master_url: Optional[str] = None
_atexit_registered = False


def _session_of(client: Any) -> Any:
    """The session an unmanaged run records through: the client's master (`client`, a Determined), else
    DET_MASTER, else the master running on the local data dir, else the data dir's API opened in this process."""
    from determined.experimental import _connect

    if client is None:
        return _connect.Connection(local_reads=False).session
    connection = getattr(client, "_connection", None)
    if connection is None:
        raise errors.DeterminedError(f"core_v2.init(client=...): expected a Determined client object, got "
                                     f"{type(client).__name__}")
    if connection.master:
        return connection.session
    return _connect.Connection(None, connection.user, local_reads=False).session


def init_context(
    *,
    config: Optional[Config] = None,
    defaults: Optional[DefaultConfig] = None,
    unmanaged: Optional[UnmanagedConfig] = None,
    client: Any = None,
    distributed: Optional[DistributedContext] = None,
    checkpoint_storage: Optional[Union[str, Dict[str, Any]]] = None,
    preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
    tensorboard_mode: TensorboardMode = TensorboardMode.AUTO,
) -> core.Context:
    """The context of this run, to use as `with core_v2.init_context(config=...) as core_context:`."""
    return _make_context(config, defaults, unmanaged, client, distributed, checkpoint_storage, preempt_mode,
                         tensorboard_mode, watch_exit=False)


def _make_context(config: Optional[Config], defaults: Optional[Config], unmanaged: Optional[Config], client: Any,
                  dist: Optional[DistributedContext], checkpoint_storage: Any, preempt_mode: PreemptMode,
                  tensorboard_mode: TensorboardMode, *, watch_exit: bool) -> core.Context:
    managed = get_cluster_info() is not None
    merged = merge(config, defaults, unmanaged, managed)
    if managed:  # a trial of the platform: the experiment config rules, the Config is ignored
        return core.init(distributed=dist, checkpoint_storage=checkpoint_storage, preempt_mode=preempt_mode,
                         tensorboard_mode=tensorboard_mode)
    assert merged is not None
    check(merged)
    from determined.experimental.core_v2 import _unmanaged

    owns = dist is None
    dist = dist or DistributedContext.from_env()
    session = None
    try:
        session = _session_of(client)
        context = _unmanaged.make_context(session, merged, distributed=dist, checkpoint_storage=checkpoint_storage,
                                          preempt_mode=PreemptMode(preempt_mode),
                                          tensorboard_mode=TensorboardMode(getattr(tensorboard_mode, "value",
                                                                                   tensorboard_mode)),
                                          watch_exit=watch_exit)
    except BaseException:
        if owns:
            dist.close()
        if session is not None and client is None:
            session.close()
        raise
    context._owns_distributed = owns
    return context


def init(
    *,
    config: Optional[Config] = None,
    defaults: Optional[DefaultConfig] = None,
    unmanaged: Optional[UnmanagedConfig] = None,
    client: Any = None,
    distributed: Optional[DistributedContext] = None,
    checkpoint_storage: Optional[Union[str, Dict[str, Any]]] = None,
    preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
    tensorboard_mode: TensorboardMode = TensorboardMode.AUTO,
) -> None:
    """Start this run and set `core_v2.train`, `.checkpoint`, `.distributed`, `.preempt`, `.searcher`, `.info`.
    A second `init` closes the first run. `close()` ends it (it also runs at exit)."""
    global _context, _master_url, _atexit_registered
    if _context is not None:
        close()
    context = _make_context(config, defaults, unmanaged, client, distributed, checkpoint_storage, preempt_mode,
                            tensorboard_mode, watch_exit=True)
    context.start()
    _context = context
    _master_url = context.info.master_url
    _set_globals(context)
    if not _atexit_registered:
        atexit.register(close)
        _atexit_registered = True


def _set_globals(context: Optional[core.Context]) -> None:
    global train, distributed, preempt, checkpoint, searcher, info
    train = context.train if context is not None else None
    distributed = context.distributed if context is not None else None
    preempt = context.preempt if context is not None else None
    checkpoint = context.checkpoint if context is not None else None
    searcher = context.searcher if context is not None else None
    info = context.info if context is not None else None


def close() -> None:
    """End the run `init` started (an unmanaged trial is reported COMPLETED, or ERROR after an uncaught exception
    or a non-zero sys.exit); nothing when none runs."""
    global _context
    context, _context = _context, None
    _set_globals(None)
    if context is not None:
        context.close()


def url_reverse_webui_exp_view() -> str:
    """The web UI's page of this run's experiment (after `init`)."""
    if info is None or _master_url is None:
        raise errors.DeterminedError("core_v2.url_reverse_webui_exp_view(): call core_v2.init() first")
    return _url_reverse_webui_exp_view(_master_url, info.experiment_id)


def _url_reverse_webui_exp_view(master_url: str, experiment_id: int) -> str:
    from determined.experimental.client._records import webui_experiment_url

    return webui_experiment_url(master_url, experiment_id)


__all__ = [
    "Config",
    "DefaultConfig",
    "UnmanagedConfig",
    "DistributedContext",
    "PreemptMode",
    "TensorboardMode",
    "init",
    "init_context",
    "close",
    "url_reverse_webui_exp_view",
    "train",
    "distributed",
    "preempt",
    "checkpoint",
    "searcher",
    "info",
]
