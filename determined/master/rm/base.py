"""The interface every resource manager gives the master (the local one and the Ray one)."""
import datetime
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Tuple, runtime_checkable

# Where a resource manager sends a trial's output: (trial id, time (UTC, naive), "stdout" | "stderr", line).
LogSink = Callable[[int, datetime.datetime, str, str], None]


class SlotsInfo(Protocol):
    """What the cluster API shows of a resource manager's slots."""

    @property
    def kind(self) -> str: ...  # "gpu" or "cpu"


@runtime_checkable
class ResourceManager(Protocol):
    """Starts trial runs on free slots, reports the ones that ended, preempts and kills them.

    The master calls every method but `running`, `total_slots` and `free_slots` from its scheduler thread.
    `launch` must return at once (a run may still be starting); its `env` holds the experiment's
    `environment.environment_variables`, which the trial processes get on top of `rm.trial_env`'s allow-list. A
    run of a Trial class is one harness process per slot (ranks); a run whose entrypoint is a command (`script`)
    is one harness process per machine, holding all of that machine's slots of the run (DET_SLOT_IDS,
    DET_CONTAINER_*), whose command starts its own workers (determined.launch). `poll_exited` reports each ended run once,
    as (trial id, allocation id, exit code), after its slots are free again. An optional
    `check_experiment(config) -> List[str]` returns the problems of a config that cannot run on this
    resource manager's machines (the master refuses such an experiment at submission). `exit_listener`, when
    set, is called (from any thread) as soon as a run ends, so the master reaps it without waiting for a poll.
    """

    slots: SlotsInfo
    exit_listener: Optional[Callable[[], None]]

    @property
    def total_slots(self) -> int: ...

    def free_slots(self) -> int: ...

    def running(self) -> Mapping[str, Any]: ...

    def launch(self, *, trial_id: int, experiment_id: int, allocation_id: str, token: str, slots_needed: int,
               master_url: str, env: Optional[Mapping[str, str]] = None, script: bool = False) -> Any: ...

    def poll_exited(self) -> List[Tuple[int, str, int]]: ...

    def preempt(self, allocation_id: str, timeout: float) -> None: ...

    def enforce_deadlines(self) -> None: ...

    def kill(self, allocation_id: str) -> None: ...

    def kill_all(self) -> None: ...


# Builds a resource manager for a master: (work root in the data dir, log sink) -> resource manager.
ResourceManagerFactory = Callable[[str, LogSink], ResourceManager]


def describe_run(run: Any) -> Dict[str, Any]:
    """The slots, process id and nodes of a run of any resource manager, for the cluster API."""
    slots = list(getattr(run, "slots", []) or [])
    popen = getattr(run, "popen", None)
    pid = popen.pid if popen is not None else getattr(run, "pid", None)
    return {"slot_ids": slots, "pid": pid, "nodes": list(getattr(run, "node_ips", []) or [])}
