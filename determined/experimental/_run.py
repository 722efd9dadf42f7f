"""Creating and running experiments from a client: on a configured master, or in the foreground on the
embedded master of the local data dir."""
import contextlib
import signal
import time
from typing import Any, Callable, Dict, Iterator, Optional

from determined import common, config as det_config
from determined.common import context as det_context
from determined.common.api import Session
from determined.experimental import _connect, _follow

Console = Any  # a rich.console.Console (rich is imported when a display starts)
PAUSE_WAIT_S = 120.0  # how long a Ctrl-C waits for the running trials to checkpoint


def validate_config(raw: Dict[str, Any]) -> Dict[str, Any]:
    """The canonical config, or InvalidExperimentConfig listing every problem; nothing is stored either way."""
    return det_config.load_experiment_config(raw)


def prepare_submission(raw: Dict[str, Any], model_dir: str) -> Dict[str, Any]:
    """Validate the config and the model dir and build the body of POST /experiments."""
    canonical = validate_config(raw)
    native = (canonical.get("internal") or {}).get("native")
    if not native:
        det_context.check_entrypoint(model_dir, canonical.get("entrypoint"))
    return {"config": raw, "model_definition": det_context.pack_model_dir_b64(model_dir), "activate": True}


@contextlib.contextmanager
def _foreground_master(console: Console) -> Iterator[Session]:
    """Use the master already running on the data dir, or become it for the life of the block."""
    from determined.master import embedded

    data_dir = common.data_dir()
    url = embedded.running_master_url(data_dir)
    if url:
        console.print(f"Using the master running at {url}")
        yield Session(url)
        return
    master = embedded.start(data_dir)
    try:
        yield master.session()
    finally:
        _stop_master(master, console)


def _stop_master(master: Any, console: Console) -> None:
    previous = signal.getsignal(signal.SIGINT)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        master.stop()
    finally:
        signal.signal(signal.SIGINT, previous)


def _follow_with_pause(session: Session, experiment_id: int, console: Console, show_progress: bool) -> Dict[str, Any]:
    try:
        if show_progress:
            return _follow.follow(session, experiment_id, console)
        return _wait(session, experiment_id)
    except KeyboardInterrupt:
        return _pause(session, experiment_id, console)


def _pause(session: Session, experiment_id: int, console: Console) -> Dict[str, Any]:
    """Ctrl-C: pause the experiment, then wait (up to PAUSE_WAIT_S; a second Ctrl-C stops waiting) until its running
    trials have checkpointed, so the final table shows the batches they keep. The pause comes first: output that
    cannot be written any more (`| tee` ended by the same Ctrl-C) must not leave the experiment running."""
    session.post(f"/experiments/{experiment_id}/pause")
    _print(console, f"\nPausing experiment {experiment_id}: running trials checkpoint first… (Ctrl-C again: stop waiting)")
    deadline = time.monotonic() + PAUSE_WAIT_S
    desc = session.get(f"/experiments/{experiment_id}")
    try:
        while _follow.running_trials(desc) and time.monotonic() < deadline:
            time.sleep(0.2)
            desc = session.get(f"/experiments/{experiment_id}")
    except KeyboardInterrupt:
        pass
    return desc


def _print(console: Console, text: str) -> None:
    try:
        console.print(text, markup=False, highlight=False)
    except (BrokenPipeError, OSError):  # stdout went away (a pipe whose reader ended)
        pass


def _wait(session: Session, experiment_id: int, interval: float = 0.5) -> Dict[str, Any]:
    import time

    while True:
        desc = session.get(f"/experiments/{experiment_id}")
        if desc["experiment"]["state"] in _follow.TERMINAL_STATES or desc["experiment"]["state"] == "PAUSED":
            return desc
        time.sleep(interval)


def _finish(session: Session, desc: Dict[str, Any], console: Console, show_progress: bool) -> Dict[str, Any]:
    exp = desc["experiment"]
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
    model_dir: str,
    *,
    master: Optional[str] = None,
    local: bool = False,
    follow: bool = True,
    show_progress: bool = True,
    console: Optional[Console] = None,
    on_created: Optional[Callable[[int], None]] = None,
) -> Dict[str, Any]:
    """Create an experiment and, on the embedded master, run it in the foreground.

    With a configured master (argument, DET_MASTER) and `local` false, the experiment is submitted there and,
    when `follow`, its progress is shown until it ends. Returns the last describe of the experiment.
    """
    console = console or _follow.make_console()
    body = prepare_submission(raw, model_dir)
    url = None if local else _connect.configured_master(master)
    if url:
        session = Session(url)
        exp = session.post("/experiments", body)["experiment"]
        console.print(f"Created experiment {exp['id']}")
        if on_created:
            on_created(exp["id"])
        if not follow:
            return session.get(f"/experiments/{exp['id']}")
        desc = _follow_with_pause(session, exp["id"], console, show_progress)
        return _finish(session, desc, console, show_progress)
    with _foreground_master(console) as session:
        exp = session.post("/experiments", body)["experiment"]
        console.print(f"Created experiment {exp['id']}")
        if on_created:
            on_created(exp["id"])
        desc = _follow_with_pause(session, exp["id"], console, show_progress)
        return _finish(session, desc, console, show_progress)


def activate_experiment(
    experiment_id: int, *, master: Optional[str] = None, show_progress: bool = True, console: Optional[Console] = None
) -> Dict[str, Any]:
    """Activate an experiment; with no running master, run it in the foreground until it ends or is paused."""
    console = console or _follow.make_console()
    url = _connect.configured_master(master)
    if url:
        session = Session(url)
        session.post(f"/experiments/{experiment_id}/activate")
        console.print(f"Activated experiment {experiment_id}")
        return session.get(f"/experiments/{experiment_id}")
    with _foreground_master(console) as session:
        session.post(f"/experiments/{experiment_id}/activate")
        console.print(f"Activated experiment {experiment_id}")
        desc = _follow_with_pause(session, experiment_id, console, show_progress)
        return _finish(session, desc, console, show_progress)


def exit_code_for(desc: Dict[str, Any]) -> int:
    state = desc["experiment"]["state"]
    return 0 if state in ("COMPLETED", "PAUSED") else 1

