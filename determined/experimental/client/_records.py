"""The master's records of experiments and trials, read and changed through its routes, for the modules that work
on records rather than on SDK objects: the foreground run of `det experiment create` and its display
(experimental/_run.py, _follow.py), the Native API, the search runners (_search_runner.py), unmanaged runs
(core_v2/_unmanaged.py) and trial logs (_logs.py). The routes and the shapes of their answers are known here (and
in the SDK's objects) only. Every function takes the session of the master it talks to.
"""
from typing import Any, Dict, List, Optional, Sequence


class Description:
    """One look at an experiment (one GET /experiments/{id}): its record and the records of its trials."""

    __slots__ = ("experiment", "trials")

    def __init__(self, experiment: Dict[str, Any], trials: List[Dict[str, Any]]) -> None:
        self.experiment = experiment
        self.trials = trials

    def __repr__(self) -> str:
        return f"Description(experiment={self.experiment!r}, trials={self.trials!r})"

    @property
    def id(self) -> int:
        return int(self.experiment["id"])

    @property
    def state(self) -> str:
        return str(self.experiment["state"])

    def to_json(self) -> Dict[str, Any]:
        """The master's answer as it came: `{"experiment": ..., "trials": [...]}`."""
        return {"experiment": self.experiment, "trials": self.trials}


def describe_experiment(session: Any, experiment_id: int) -> Description:
    """The experiment's record and its trials' records, from one request."""
    answer = session.get(f"/experiments/{experiment_id}")
    return Description(answer["experiment"], answer["trials"])


def experiment_records(session: Any) -> List[Dict[str, Any]]:
    """The records of every experiment of the master (archived ones included)."""
    return list(session.get("/experiments")["experiments"])


def pause_experiment(session: Any, experiment_id: int) -> None:
    session.post(f"/experiments/{experiment_id}/pause")


def activate_experiment(session: Any, experiment_id: int) -> None:
    session.post(f"/experiments/{experiment_id}/activate")


def continue_experiment(session: Any, experiment_id: int, override: Optional[Dict[str, Any]] = None) -> None:
    """Continue an ended experiment, `override` merged into its config."""
    session.post(f"/experiments/{experiment_id}/continue", {"override_config": override} if override else {})


def experiment_checkpoints(session: Any, experiment_id: int) -> List[Dict[str, Any]]:
    """The records of the experiment's checkpoints (every state)."""
    return list(session.get(f"/experiments/{experiment_id}/checkpoints")["checkpoints"])


def webui_experiment_url(master_url: str, experiment_id: int) -> str:
    """The page of the experiment in the web UI of the master at `master_url`."""
    return f"{master_url.rstrip('/')}/experiments/{int(experiment_id)}"


# ---------------------------------------------------------------- trial logs


class LogPage:
    """A page of a trial's log lines: `logs` (each `{"id", "timestamp", "stream", "message"}`), the offset of the
    next page, and the trial's state when the master says it (None otherwise)."""

    __slots__ = ("logs", "next_offset", "trial_state")

    def __init__(self, logs: List[Dict[str, Any]], next_offset: int, trial_state: Optional[str]) -> None:
        self.logs = logs
        self.next_offset = next_offset
        self.trial_state = trial_state


def trial_log_page(session: Any, trial_id: int, offset: int = 0, limit: int = 1000) -> LogPage:
    page = session.get(f"/trials/{trial_id}/logs", params={"offset": offset, "limit": limit})
    return LogPage(list(page["logs"]), page["next_offset"], page.get("trial_state"))


# ---------------------------------------------------------------- custom searches


def searcher_events(session: Any, experiment_id: int, timeout_seconds: float) -> List[Dict[str, Any]]:
    """The custom search's pending events (a long poll: the master waits up to `timeout_seconds` for one)."""
    return list(session.get(f"/experiments/{experiment_id}/searcher_events",
                            params={"timeout_seconds": timeout_seconds})["searcherEvents"])


def post_searcher_operations(session: Any, experiment_id: int, operations: Sequence[Dict[str, Any]],
                             event_id: int) -> None:
    """Answer the event `event_id` with `operations` (in their wire form)."""
    session.post(f"/experiments/{experiment_id}/searcher_operations",
                 {"searcherOperations": list(operations), "triggeredByEvent": {"id": int(event_id)}})


# ---------------------------------------------------------------- unmanaged runs


def create_unmanaged_experiment(session: Any, config: Dict[str, Any],
                                external_experiment_id: Optional[str] = None) -> Dict[str, Any]:
    """Create the experiment of an unmanaged run (or, with an external id, reuse the one recorded under it); its
    record."""
    body = {"config": config, "unmanaged": True}
    if external_experiment_id is not None:
        answer = session.request("PUT", f"/experiments/by-external-id/{external_experiment_id}", json=body)
    else:
        answer = session.post("/experiments", body)
    return answer["experiment"]  # type: ignore[no-any-return]


def start_unmanaged_trial(session: Any, experiment_id: int, hparams: Dict[str, Any],
                          external_trial_id: Optional[str] = None) -> Dict[str, Any]:
    """Create the trial of an unmanaged experiment (or reuse the one of `external_trial_id`) and start a run of it;
    what the run needs (ids, config, hparams, seed, latest checkpoint, ...)."""
    create = {"experiment_id": experiment_id, "hparams": dict(hparams), "unmanaged": True}
    if external_trial_id is not None:
        trial = session.request("PUT", "/trials", json={"create_trial_request": create,
                                                        "external_trial_id": external_trial_id})["trial"]
    else:
        trial = session.post("/trials", create)["trial"]
    return session.post(f"/trials/{trial['id']}/start", {"resume": True})  # type: ignore[no-any-return]


def set_trial_state(session: Any, trial_id: int, state: str) -> None:
    """Record the end of an unmanaged trial's run (COMPLETED or ERROR)."""
    session.patch(f"/trials/{trial_id}", {"state": state})
