"""Creating and running experiments from a client: on a configured master, or in the foreground on the
embedded master of the local data dir. Which master, and becoming it, is `_connect.Connection`'s; what is submitted,
client/_submit.py's (`experiment_body`, shared with the SDK's create_experiment and the search runners)."""
import contextlib
import dataclasses
import shlex
import signal
import threading
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
SERVER_URL = "http://127.0.0.1:8080"  # where `det master up` serves by default (determined/cli/master.py)


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


@contextlib.contextmanager
def _sigterm_as_ctrl_c() -> Iterator[None]:
    """While a command follows its experiment in the foreground, SIGTERM (`kill`, a job scheduler, a closed
    terminal's session manager) does what Ctrl-C does: the experiment is paused once its running trials have
    checkpointed, and the master this command runs stops cleanly. Without it the process would die at once and
    leave its experiment ACTIVE with nothing running it. (Only the main thread can handle signals.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _ui_line(console: Console, url: str, experiment_id: int, own: bool) -> None:
    """Where the experiment's page of the web UI is (and, on this command's own master, for how long)."""
    page = f"{url.rstrip('/')}/experiments/{experiment_id}"
    if own:
        _print(console, f"Web UI: {page} (served by this command's master while the experiment runs here)",
               soft_wrap=True)
    else:
        _print(console, f"Web UI: {page}", soft_wrap=True)


def _ui_gone_line(console: Console, url: str, experiment_id: int, data_dir: Any) -> None:
    """After this command's own master stopped: its UI went with it; `det master up` on the data dir serves it
    again (at its default address)."""
    _print(console, f"Experiment {experiment_id} ran on this command's own master: the web UI at {url} has stopped "
                    "with this command.", soft_wrap=True)
    _print(console, f"To see it again: det master up --data-dir {shlex.quote(str(data_dir))}, then open "
                    f"{SERVER_URL}/experiments/{experiment_id}", soft_wrap=True)


def _run_in_foreground(console: Console, begin: Callable[[Session], int], show_progress: bool,
                       follow_first_trial: bool = False) -> Description:
    """Start an experiment with `begin` (create or activate; returns its id) and follow it until it ends or pauses.

    On another command's foreground master, this command follows it there and runs it itself when that master
    stops (a handover: the trials checkpoint and resume here). As the master, before stopping, it runs on the
    experiments other commands started on it that no command follows any more: nothing is left ACTIVE with
    nothing to run it. It prints where the experiment's page of the web UI is; when this command's own master
    stops, that its UI is gone and how to see it again. SIGTERM pauses the experiment, as Ctrl-C does.
    """
    with _sigterm_as_ctrl_c():
        return _run_in_foreground_until_done(console, begin, show_progress, follow_first_trial)


def _run_in_foreground_until_done(console: Console, begin: Callable[[Session], int], show_progress: bool,
                                  follow_first_trial: bool) -> Description:
    from determined.master import embedded

    experiment_id: Optional[int] = None
    while True:
        with _foreground_master(console) as fg:
            if experiment_id is None:
                experiment_id = begin(fg.session)
            own = fg.master is not None
            url = fg.master.url if own else str(fg.session.master)
            _ui_line(console, url, experiment_id, own)
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
            desc = _finish(fg.session, desc, console, show_progress)
            data_dir = fg.master.data_dir if own else None
        if own:  # (the master stopped at the end of the block)
            _ui_gone_line(console, url, experiment_id, data_dir)
        return desc


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


def _print(console: Console, text: str, soft_wrap: bool = False) -> None:
    """`soft_wrap`: a line the terminal folds, if it must, but never broken by the console (an address or a
    command to copy)."""
    try:
        console.print(text, markup=False, highlight=False, soft_wrap=soft_wrap)
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
    detached_to = None if follow or connection.master else _master_to_detach_to()
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

    if detached_to is not None:
        session = connection.http(detached_to)
        experiment_id = create(session)
        _ui_line(console, detached_to, experiment_id, own=False)
        console.print(f"It runs on the master at {detached_to}; see it with: det experiment describe {experiment_id}")
        return _records.describe_experiment(session, experiment_id)
    if connection.master:
        session = connection.session
        experiment_id = create(session)
        if not follow:
            return _records.describe_experiment(session, experiment_id)
        with _sigterm_as_ctrl_c():
            desc = _follow_with_pause(session, experiment_id, console, show_progress, follow_first_trial)
        return _finish(session, desc, console, show_progress)
    return _run_in_foreground(console, create, show_progress, follow_first_trial)


def _master_to_detach_to() -> str:
    """`follow=False` (`det experiment create -d`) with no master configured: the URL of the master running on the
    data dir, which runs the experiment after this command returns. With none, refused before anything is staged
    or created: the master this command would start stops when it returns, so a detached experiment would wait,
    ACTIVE, with nothing running it until some command runs a master on the data dir."""
    from determined.master import embedded

    url = embedded.running_master_url(common.data_dir())
    if url is None:
        raise errors.DeterminedError(
            "no master is running to detach to: start one with `det master up` (on this data dir, or set "
            "DET_MASTER to a master), or drop -d to run the experiment here in the foreground")
    return url


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
        with _sigterm_as_ctrl_c():
            desc = _follow_with_pause(session, experiment_id, console, True, follow_first_trial)
        return _finish(session, desc, console, True)
    return _run_in_foreground(console, begin, True, follow_first_trial)


def exit_code_for(desc: Description) -> int:
    state = desc.state
    return 0 if state in ("COMPLETED", "PAUSED") else 1

