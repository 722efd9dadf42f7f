"""Search runners of `determined.searcher` (Determined 0.19.6 to 0.37): they create an experiment with `searcher.name: custom`, fetch its
events from the master, hand them to the user's `SearchMethod`, and post back the operations it returns.

Before posting, the runner saves its state and the operations (LocalSearchRunner: into `searcher_dir`;
RemoteSearchRunner: as a checkpoint of its own trial), so a runner that was stopped resumes where it was: the master
keeps every event until an answer to it arrives, and a repeated answer is ignored.
"""
import json
import logging
import os
import pathlib
import shutil
import time
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from determined import errors
from determined.common.api import Session
from determined.experimental.client import _records
from determined.searcher._custom_search_method import RunnerOperation, SearcherState, SearchMethod, request_id_of
from determined.searcher._method import ExitedReason
from determined.searcher._ops import Progress, operation_from_dict, operation_to_dict
from determined.searcher._wire import event_kind, operation_to_wire

logger = logging.getLogger("determined.searcher")

EXPERIMENT_ID_FILE = "experiment_id.txt"
OPS_FILE = "ops"
# How long one fetch of events waits on the master while there is none (a long poll), and how often a runner asks
# while the experiment is paused.
POLL_S = 10.0
PAUSED_POLL_S = 2.0

ExpConfig = Union[Dict[str, Any], str]


class SearchRunner:
    """Feeds a custom search's events to `search_method` and posts the operations it returns (the loop both runners
    share; they differ in where they keep their state)."""

    def __init__(self, search_method: SearchMethod) -> None:
        self.search_method = search_method
        self.state = SearcherState()

    # ------------------------------------------------------------ one event

    def _get_operations(self, event: Dict[str, Any]) -> List[RunnerOperation]:
        """The operations that answer one event (the runner's state updated first)."""
        kind = event_kind(event)
        body = event[kind]
        method, state = self.search_method, self.state
        if kind == "initialOperations":
            return list(method.initial_operations(state))
        request_id = request_id_of(str(body.get("requestId")))
        if kind == "trialCreated":
            state.trials_created.add(request_id)
            state.trial_progress[request_id] = 0.0
            return list(method.on_trial_created(state, request_id))
        if kind == "trialProgress":
            state.trial_progress[request_id] = float(body["partialUnits"])
            return [Progress(float(method.progress(state)))]
        if kind == "validationCompleted":
            ops = list(method.on_validation_completed(state, request_id, body["metric"],
                                                      int(body["validateAfterLength"])))
        elif kind == "trialClosed":
            state.trials_closed.add(request_id)
            ops = list(method.on_trial_closed(state, request_id))
        elif kind == "trialExitedEarly":
            reason = ExitedReason(body["exitedReason"])
            if reason == ExitedReason.INVALID_HP:
                state.trial_progress.pop(request_id, None)
            elif reason == ExitedReason.ERRORED:
                state.failures.add(request_id)
            ops = list(method.on_trial_exited_early(state, request_id, reason))
        else:
            raise RuntimeError(f"unsupported searcher event {event!r}")
        return ops + [Progress(float(method.progress(state)))]

    # ------------------------------------------------------------ the loop

    def run_experiment(self, experiment_id: int, session: Session,
                       prior_operations: Optional[List[RunnerOperation]] = None) -> None:
        """Handle the experiment's events until it ends. `prior_operations`: the saved answer to the last event
        handled before a restart, posted again if the master has not taken it."""
        paused_told = False
        while True:
            events = _records.searcher_events(session, experiment_id, POLL_S)
            for event in events:
                if event.get("experimentInactive") is not None:
                    state = event["experimentInactive"]["experimentState"]
                    if state == "PAUSED":
                        if not paused_told:
                            self._show_experiment_paused_msg()
                            paused_told = True
                        time.sleep(PAUSED_POLL_S)  # the master answers at once while paused: ask less often
                        break
                    self.state.experiment_completed = state == "COMPLETED"
                    self.state.experiment_failed = state == "ERROR"
                    logger.info("experiment %s ended: %s", experiment_id, state)
                    return
                paused_told = False
                event_id = int(event["id"])
                if prior_operations is not None and event_id <= self.state.last_event_id:
                    logger.info("posting again the saved answer to event %s", event_id)
                    operations = prior_operations
                else:
                    operations = self._get_operations(event)
                    self.state.last_event_id = event_id
                    self.save_state(experiment_id, operations)
                prior_operations = None
                self.post_operations(session, experiment_id, event, operations)

    def post_operations(self, session: Session, experiment_id: int, event: Dict[str, Any],
                        operations: Sequence[RunnerOperation]) -> None:
        _records.post_searcher_operations(session, experiment_id, [operation_to_wire(op) for op in operations],
                                          int(event["id"]))

    def save_state(self, experiment_id: int, operations: List[RunnerOperation]) -> None:
        """Save the state and `operations` before they are posted (nothing here; the runners keep them)."""

    def _show_experiment_paused_msg(self) -> None:
        logger.warning("experiment %s is paused; the search goes on when it is activated again",
                       self.state.experiment_id)

    # ------------------------------------------------------------ shared by the runners

    def _save_into(self, path: pathlib.Path, experiment_id: int, operations: List[RunnerOperation]) -> None:
        self.search_method.save(self.state, path, experiment_id=experiment_id)
        path.joinpath(OPS_FILE).write_text(json.dumps([operation_to_dict(op) for op in operations]))

    def _load_from(self, path: pathlib.Path) -> Tuple[int, List[RunnerOperation]]:
        self.state, experiment_id = self.search_method.load(path)
        self.state.experiment_id = experiment_id
        ops = [operation_from_dict(d) for d in json.loads(path.joinpath(OPS_FILE).read_text())]
        return experiment_id, ops


def _create_experiment(session: Session, exp_config: ExpConfig, model_dir: Optional[str],
                       includes: Optional[Iterable[Union[str, os.PathLike]]]) -> int:
    from determined.config import load_config_file
    from determined.experimental.client._submit import submit_experiment

    raw = load_config_file(exp_config) if isinstance(exp_config, (str, os.PathLike)) else exp_config
    if not isinstance(raw, dict) or (raw.get("searcher") or {}).get("name") != "custom":
        raise ValueError("a search runner needs an experiment config with searcher.name: custom (and metric, "
                         f"smaller_is_better, unit); got searcher {(raw or {}).get('searcher') if isinstance(raw, dict) else raw!r}")
    exp = submit_experiment(session, raw, model_dir or os.getcwd(), includes=list(includes or []))
    logger.info("Created experiment %s", exp["id"])
    return int(exp["id"])


class LocalSearchRunner(SearchRunner):
    """Runs the search method in this process against a master: the one of DET_MASTER, else the data dir's (this
    process runs it as the embedded master while the search runs, as `det experiment create` does).

    `searcher_dir` (default: the current directory) keeps the experiment id, the runner's state and the method's
    (`save_method_state`) after every event: running the same script again with it resumes the search.
    """

    def __init__(self, search_method: SearchMethod, searcher_dir: Optional[Union[str, os.PathLike]] = None) -> None:
        super().__init__(search_method)
        self.searcher_dir = pathlib.Path(searcher_dir) if searcher_dir is not None else pathlib.Path.cwd()
        if self.searcher_dir.exists() and not self.searcher_dir.is_dir():
            raise FileExistsError(f"searcher_dir={self.searcher_dir} exists and is not a directory; "
                                  "give a directory (it is created when missing)")
        self.searcher_dir.mkdir(parents=True, exist_ok=True)
        self._previous_event: Optional[int] = None  # the event whose saved state is the latest

    def run(self, exp_config: ExpConfig, model_dir: Optional[str] = None,
            includes: Optional[Iterable[Union[str, os.PathLike]]] = None) -> int:
        """Create the experiment (or resume the one of `searcher_dir`) and run the search until it ends; returns
        the experiment id. `exp_config`: a config dict or the path of its YAML file; `model_dir`: the model
        definition (default: the current directory); `includes`: more files or directories for it."""
        from determined.experimental import _connect, _follow

        console = _follow.make_console()
        with _connect.Connection().foreground(lambda url: console.print(f"Using the master running at {url}")) as fg:
            return self._run_on(fg.session, exp_config, model_dir, includes)

    def _run_on(self, session: Session, exp_config: ExpConfig, model_dir: Optional[str],
                includes: Optional[Iterable[Union[str, os.PathLike]]]) -> int:
        id_file = self.searcher_dir / EXPERIMENT_ID_FILE
        operations: Optional[List[RunnerOperation]] = None
        if id_file.exists():
            experiment_id = int(id_file.read_text())
            logger.info("Resuming the search of experiment %s from %s", experiment_id, self.searcher_dir)
            _, operations = self.load_state(experiment_id)
            if _records.describe_experiment(session, experiment_id).state == "PAUSED":
                _records.activate_experiment(session, experiment_id)
        else:
            experiment_id = _create_experiment(session, exp_config, model_dir, includes)
            self._state_root(experiment_id).mkdir(parents=True, exist_ok=True)
            self.state.experiment_id = experiment_id
            self.state.last_event_id = 0
            self.save_state(experiment_id, [])
            id_file.write_text(str(experiment_id))
        self.run_experiment(experiment_id, session, operations)
        return experiment_id

    def _state_root(self, experiment_id: int) -> pathlib.Path:
        return self.searcher_dir / f"exp_{experiment_id}"

    def save_state(self, experiment_id: int, operations: List[RunnerOperation]) -> None:
        """Save the state after an event into `exp_<id>/event_<n>`, then point `exp_<id>/event_id` at it
        (an atomic rename: a runner stopped halfway resumes from the previous event)."""
        root = self._state_root(experiment_id)
        path = root / f"event_{self.state.last_event_id}"
        path.mkdir(parents=True, exist_ok=True)
        self._save_into(path, experiment_id, operations)
        pointer = root / "event_id_new"
        pointer.write_text(str(self.state.last_event_id))
        os.replace(pointer, root / "event_id")
        if self._previous_event is not None and self._previous_event != self.state.last_event_id:
            shutil.rmtree(root / f"event_{self._previous_event}", ignore_errors=True)  # only the latest is needed
        self._previous_event = self.state.last_event_id

    def load_state(self, experiment_id: int) -> Tuple[int, List[RunnerOperation]]:
        root = self._state_root(experiment_id)
        last = int((root / "event_id").read_text())
        loaded, operations = self._load_from(root / f"event_{last}")
        if loaded != experiment_id:
            raise ValueError(f"searcher_dir {self.searcher_dir}: the saved state is of experiment {loaded}, "
                             f"not {experiment_id}; use another searcher_dir for another search")
        self._previous_event = last
        return loaded, operations

    def _show_experiment_paused_msg(self) -> None:
        logger.warning("experiment %s is paused; if this process keeps running, the search goes on when it is "
                       "activated again; or stop this process and run it again later to resume the search",
                       self.state.experiment_id)


class RemoteSearchRunner(SearchRunner):
    """Runs the search method inside a trial of its own experiment (a Core API script, e.g. a `single` searcher
    experiment whose entrypoint calls `run`): its state is saved as checkpoints of that trial, so a restarted trial
    (max_restarts) resumes the search."""

    def __init__(self, search_method: SearchMethod, context: Any) -> None:
        super().__init__(search_method)
        from determined.core._info import get_cluster_info

        info = get_cluster_info()
        if info is None:
            raise RuntimeError("RemoteSearchRunner runs inside a trial (an experiment whose entrypoint runs the search "
                               "runner); outside one, use LocalSearchRunner")
        self.context = context
        self.info = info
        self.latest_checkpoint = info.latest_checkpoint

    def run(self, exp_config: ExpConfig, model_dir: Optional[str] = None,
            includes: Optional[Iterable[Union[str, os.PathLike]]] = None) -> int:
        """Create the experiment (or resume the one of the latest checkpoint) and run the search until it ends."""
        from determined.experimental import _connect

        session = _connect.Connection(self.info.master_url).session  # the trial's token (DET_SESSION_TOKEN)
        operations: Optional[List[RunnerOperation]] = None
        if self.latest_checkpoint is not None:
            experiment_id, operations = self.load_state(self.latest_checkpoint)
            logger.info("Resuming the search of experiment %s", experiment_id)
        else:
            try:
                experiment_id = _create_experiment(session, exp_config, model_dir, includes)
            except errors.APIError as e:
                if e.status_code != 403:
                    raise
                raise errors.DeterminedError(
                    "RemoteSearchRunner cannot create the search's experiment from inside a trial: on this platform a "
                    "trial's token may only report for its own trial (trial isolation, docs/auth.md). Run the search "
                    "method with LocalSearchRunner instead (the same SearchMethod, run on your machine against "
                    "the master)") from None
            self.state.experiment_id = experiment_id
            self.state.last_event_id = 0
            self.save_state(experiment_id, [])
        self.run_experiment(experiment_id, session, operations)
        return experiment_id

    def load_state(self, storage_id: str) -> Tuple[int, List[RunnerOperation]]:
        with self.context.checkpoint.restore_path(storage_id) as path:
            return self._load_from(pathlib.Path(path))

    def save_state(self, experiment_id: int, operations: List[RunnerOperation]) -> None:
        with self.context.checkpoint.store_path({"steps_completed": self.state.last_event_id}) as (path, _):
            self._save_into(pathlib.Path(path), experiment_id, operations)
