"""Creating and running experiments from a client: on a configured master, or in the foreground on the
embedded master of the local data dir. Which master, and becoming it, is `_connect.Connection`'s; what is submitted,
client/_submit.py's (`experiment_body`, shared with the SDK's create_experiment and the search runners)."""
import contextlib
import dataclasses
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set

from determined import common, errors
from determined.common.api import Session
from determined.experimental import _connect, _follow, _prewarm
from determined.experimental.client import _records
from determined.experimental.client._records import Description

Console = Any  # a rich.console.Console (rich is imported when a display starts)
PAUSE_WAIT_S = 120.0  # how long a Ctrl-C waits for the running trials to checkpoint
STATE_WAIT_S = 5.0  # the longest a command running the master waits between two looks at its experiment


def validate_config(raw: Dict[str, Any]) -> Dict[str, Any]:
    """The canonical config, or InvalidExperimentConfig listing every problem; nothing is stored either way."""
    from determined.experimental.client._submit import validate_config as validate

    return validate(raw)


@dataclasses.dataclass
class _Foreground:
    """The master a foreground command works with: `master` when this process runs it, else None (it uses the
    master another process runs); `active_at_start`: the experiments ACTIVE when this process became the master."""

    session: Session
    master: Optional[Any] = None
    active_at_start: Set[int] = dataclasses.field(default_factory=set)


@contextlib.contextmanager
def _foreground_master(console: Console) -> Iterator[_Foreground]:
    """Use the master already running on the data dir, or become it for the life of the block."""
    connection = _connect.Connection(local=True)
    with connection.foreground(lambda url: console.print(f"Using the master running at {url}")) as fg:
        active: Set[int] = set()
        if fg.master is not None:
            active = {int(e["id"]) for e in _records.experiment_records(fg.session) if e["state"] == "ACTIVE"}
        yield _Foreground(fg.session, fg.master, active)


def _run_in_foreground(console: Console, begin: Callable[[Session], int], show_progress: bool,
                       follow_first_trial: bool = False) -> Description:
    """Start an experiment with `begin` (create or activate; returns its id) and follow it until it ends or pauses.

    On another command's foreground master, this command follows it there and runs it itself when that master
    stops (a handover: the trials checkpoint and resume here). As the master, before stopping, it runs on the
    experiments other commands started on it that no command follows any more: nothing is left ACTIVE with
    nothing to run it.
    """
    from determined.master import embedded

    experiment_id: Optional[int] = None
    while True:
        with _foreground_master(console) as fg:
            if experiment_id is None:
                experiment_id = begin(fg.session)
            if fg.master is None:
                try:
                    with embedded.following(common.data_dir(), experiment_id):
                        desc = _follow_with_pause(fg.session, experiment_id, console, show_progress,
                                                  follow_first_trial)
                except errors.MasterNotFoundError:
                    console.print(f"The master running experiment {experiment_id} stopped; it runs here from now on")
                    continue
            else:
                desc = _follow_with_pause(fg.session, experiment_id, console, show_progress, follow_first_trial,
                                          wait=_state_change_waiter(fg.master.master))
                _finish_others(fg, experiment_id, console)
            return _finish(fg.session, desc, console, show_progress)


def _finish_others(fg: _Foreground, own_id: int, console: Console, interval: float = 0.5) -> None:
    """Before this command's master stops: run the experiments other commands started on it to their end, unless
    the command that started one still follows it (it takes the experiment over). Ctrl-C pauses them."""
    from determined.master import embedded

    data_dir = common.data_dir()
    told: Set[int] = set()
    orphans: List[int] = []
    try:
        while True:
            running = [int(e["id"]) for e in _records.experiment_records(fg.session)
                       if e["state"] not in _follow.TERMINAL_STATES and e["state"] != "PAUSED"
                       and int(e["id"]) != own_id and int(e["id"]) not in fg.active_at_start]
            orphans = [i for i in running if not embedded.has_follower(data_dir, i)]
            handed = sorted(set(running) - set(orphans) - told)
            if handed:
                console.print(f"Experiment(s) {', '.join(map(str, handed))} move(s) to the det command that "
                              "follows it (its trials checkpoint and resume there)")
                told.update(handed)
            if not orphans:
                return
            new = sorted(set(orphans) - told)
            if new:
                console.print(f"Experiment(s) {', '.join(map(str, new))}, started on this master by another det "
                              "command that no longer follows it, run(s) here to the end (Ctrl-C pauses)")
                told.update(new)
            time.sleep(interval)
    except KeyboardInterrupt:
        for experiment_id in orphans:
            console.print(f"\nPausing experiment {experiment_id}: running trials checkpoint first…")
            _records.pause_experiment(fg.session, experiment_id)


def _state_change_waiter(master: Any) -> Callable[[float], None]:
    """A sleep that ends early when an experiment's state changes on `master` (run by this process): the command
    sees its experiment end at once, not up to a polling interval later."""
    seen = master.experiment_changes()

    def wait(timeout: float) -> None:
        nonlocal seen
        seen = master.wait_for_experiments(seen, timeout)

    return wait


def _follow_with_pause(session: Session, experiment_id: int, console: Console, show_progress: bool,
                       follow_first_trial: bool = False,
                       wait: Optional[Callable[[float], None]] = None) -> Description:
    try:
        if follow_first_trial:
            _print_first_trial_logs(session, experiment_id, console)
            return _wait(session, experiment_id, wait=wait)
        if show_progress:
            return _follow.follow(session, experiment_id, console, wait=wait)
        return _wait(session, experiment_id, wait=wait)
    except KeyboardInterrupt:
        return _pause(session, experiment_id, console)


def _pause(session: Session, experiment_id: int, console: Console) -> Description:
    """Ctrl-C: pause the experiment, then wait (up to PAUSE_WAIT_S; a second Ctrl-C stops waiting) until its running
    trials have checkpointed, so the final table shows the batches they keep. The pause comes first: output that
    cannot be written any more (`| tee` ended by the same Ctrl-C) must not leave the experiment running."""
    _records.pause_experiment(session, experiment_id)
    _print(console, f"\nPausing experiment {experiment_id}: running trials checkpoint first… (Ctrl-C again: stop waiting)")
    deadline = time.monotonic() + PAUSE_WAIT_S
    desc = _records.describe_experiment(session, experiment_id)
    try:
        while _follow.running_trials(desc) and time.monotonic() < deadline:
            time.sleep(0.2)
            desc = _records.describe_experiment(session, experiment_id)
    except KeyboardInterrupt:
        pass
    return desc


def _print_first_trial_logs(session: Session, experiment_id: int, console: Console, interval: float = 0.2) -> None:
    """`-f`: the logs of the experiment's first trial (the lowest id) as it runs, until it ends."""
    from determined.common.formats import escape_control
    from determined.experimental import _logs

    while True:
        desc = _records.describe_experiment(session, experiment_id)
        if desc.trials:
            break
        if desc.state in _follow.TERMINAL_STATES or desc.state == "PAUSED":
            return
        time.sleep(interval)
    trial_id = min(t["id"] for t in desc.trials)
    _print(console, f"Following the logs of trial {trial_id} (det trial logs {trial_id})")
    for line in _logs.trial_logs(session, trial_id, follow=True):
        _print(console, escape_control(line["message"]))


def _print(console: Console, text: str) -> None:
    try:
        console.print(text, markup=False, highlight=False)
    except (BrokenPipeError, OSError):  # stdout went away (a pipe whose reader ended)
        pass


def _wait(session: Session, experiment_id: int, interval: Optional[float] = None,
          wait: Optional[Callable[[float], None]] = None) -> Description:
    """Until the experiment ends or pauses. By default it looks every 0.5 s; with `wait`, the master's notice of
    experiment state changes, only when that wakes it (or every STATE_WAIT_S): a look describes every trial, which
    costs the master more the more trials the experiment has."""
    if interval is None:
        interval = STATE_WAIT_S if wait is not None else 0.5
    while True:
        desc = _records.describe_experiment(session, experiment_id)
        if desc.state in _follow.TERMINAL_STATES or desc.state == "PAUSED":
            return desc
        (wait or time.sleep)(interval)


def _finish(session: Session, desc: Description, console: Console, show_progress: bool) -> Description:
    exp = desc.experiment
    try:
        if show_progress:
            _follow.print_summary(session, desc, console)
        if exp["state"] == "PAUSED":
            console.print(f"Experiment {exp['id']} is paused; resume it with: det experiment activate {exp['id']}")
    except (BrokenPipeError, OSError):
        pass
    return desc


def run_experiment(
    raw: Dict[str, Any],
    model_dir: Optional[str],
    *,
    master: Optional[str] = None,
    local: bool = False,
    follow: bool = True,
    show_progress: bool = True,
    console: Optional[Console] = None,
    on_created: Optional[Callable[[int], None]] = None,
    follow_first_trial: bool = False,
    template: Optional[str] = None,
    template_config: Optional[Dict[str, Any]] = None,
    includes: Optional[Sequence[str]] = None,
) -> Description:
    """Create an experiment and, on the embedded master, run it in the foreground.

    With a configured master (argument, DET_MASTER) and `local` false, the experiment is submitted there and,
    when `follow`, its progress is shown until it ends. Returns the last describe of the experiment
    (client/_records.py's Description: `.experiment`, `.trials`). The config is
    validated, and the model dir (plus `includes`) staged and packed, before any master is started.
    """
    from determined.experimental.client._submit import experiment_body, post_experiment

    console = console or _follow.make_console()
    connection = _connect.Connection(master, local=local)
    # On the embedded master, the trials' fork server starts while the context is packed and the master starts.
    staged = None if connection.master else (lambda context: _prewarm.prewarm(raw, context))
    body = experiment_body(raw, model_dir, includes=includes, template=template, template_config=template_config,
                           staged=staged)

    def create(session: Session) -> int:
        exp = post_experiment(session, body)
        console.print(f"Created experiment {exp['id']}")
        if on_created:
            on_created(exp["id"])
        return int(exp["id"])

    if connection.master:
        session = connection.session
        experiment_id = create(session)
        if not follow:
            return _records.describe_experiment(session, experiment_id)
        desc = _follow_with_pause(session, experiment_id, console, show_progress, follow_first_trial)
        return _finish(session, desc, console, show_progress)
    return _run_in_foreground(console, create, show_progress, follow_first_trial)


def activate_experiment(
    experiment_id: int, *, master: Optional[str] = None, show_progress: bool = True, console: Optional[Console] = None
) -> Description:
    """Activate an experiment; with no running master, run it in the foreground until it ends or is paused."""
    console = console or _follow.make_console()

    def activate(session: Session) -> int:
        _records.activate_experiment(session, experiment_id)
        console.print(f"Activated experiment {experiment_id}")
        return experiment_id

    connection = _connect.Connection(master)
    if connection.master:
        activate(connection.session)
        return _records.describe_experiment(connection.session, experiment_id)
    return _run_in_foreground(console, activate, show_progress)


def continue_experiment(experiment_id: int, override: Dict[str, Any], *, master: Optional[str] = None,
                        follow_first_trial: bool = False, console: Optional[Console] = None) -> Description:
    """Continue an ended experiment (`override` merged into its config); with no running master, run it in the
    foreground until it ends or is paused; with one, follow it (its progress, or its first trial's logs)."""
    console = console or _follow.make_console()

    def begin(session: Session) -> int:
        _records.continue_experiment(session, experiment_id, override)
        console.print(f"Continued experiment {experiment_id}")
        return experiment_id

    connection = _connect.Connection(master)
    if connection.master:
        session = connection.session
        begin(session)
        desc = _follow_with_pause(session, experiment_id, console, True, follow_first_trial)
        return _finish(session, desc, console, True)
    return _run_in_foreground(console, begin, True, follow_first_trial)


def exit_code_for(desc: Description) -> int:
    state = desc.state
    return 0 if state in ("COMPLETED", "PAUSED") else 1

