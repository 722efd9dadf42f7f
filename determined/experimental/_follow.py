"""Following an experiment from a client: a live progress display, and the final summary."""
import math
import time
from typing import Any, Dict, Iterator, List, Optional

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from determined.common.api import Session
from determined.config import flat_hparams

TERMINAL_STATES = {"COMPLETED", "CANCELED", "ERROR", "DELETED"}


def make_console() -> Console:
    """A console for tables: the terminal's width, or wide enough not to fold when output goes to a file."""
    import sys

    return Console() if sys.stdout.isatty() else Console(width=200)


def _fmt_metric(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return f"{value:.4f}"
    return str(value)


def _fmt_value(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def _hparam_columns(flat: List[Dict[str, Any]]) -> List[str]:
    """Hyperparameters that differ between trials (all of them when there is one trial), by (dotted) name."""
    names = sorted({k for values in flat for k in values})
    if len(flat) <= 1:
        return [n for n in names if n != "global_batch_size"] or names
    varying = [n for n in names if len({repr(values.get(n)) for values in flat}) > 1]
    return varying


def trials_table(experiment: Dict[str, Any], trials: List[Dict[str, Any]], title: Optional[str] = None) -> Table:
    metric = experiment.get("searcher_metric") or "metric"
    specs = (experiment.get("config") or {}).get("hyperparameters")
    flat = {t["id"]: flat_hparams(t.get("hparams") or {}, specs) for t in trials}
    hp_names = _hparam_columns(list(flat.values()))
    table = Table(title=title, title_justify="left")
    table.add_column("trial", justify="right")
    table.add_column("state")
    table.add_column("batches", justify="right")
    table.add_column(f"best {metric}", justify="right")
    table.add_column("restarts", justify="right")
    for name in hp_names:
        table.add_column(name, justify="right")
    best_id = experiment.get("best_trial_id")
    for t in sorted(trials, key=lambda t: t["id"]):
        style = "bold green" if t["id"] == best_id else None
        hparams = flat[t["id"]]
        table.add_row(
            str(t["id"]),
            t["state"],
            str(t.get("total_batches", 0)),
            _fmt_metric(t.get("best_validation")),
            str(t.get("restarts", 0)),
            *[_fmt_value(hparams.get(n, "")) for n in hp_names],
            style=style,
        )
    return table


def _header(experiment: Dict[str, Any]) -> Text:
    progress = experiment.get("progress") or 0.0
    best = experiment.get("best_validation")
    metric = experiment.get("searcher_metric")
    text = Text()
    text.append(f"Experiment {experiment['id']} ", style="bold")
    text.append(f"{experiment['state']}  ")
    text.append(f"progress {progress * 100:5.1f}%  ")
    text.append(f"trials {experiment.get('num_trials', 0)}  ")
    text.append(f"best {metric}: {_fmt_metric(best)}")
    return text


def follow(session: Session, experiment_id: int, console: Optional[Console] = None, interval: float = 0.5) -> Dict[str, Any]:
    """Show live progress until the experiment reaches a terminal state or is paused; returns the final describe."""
    console = console or make_console()
    desc = session.get(f"/experiments/{experiment_id}")
    with Live(console=console, refresh_per_second=4, transient=True) as live:
        while True:
            exp, trials = desc["experiment"], desc["trials"]
            live.update(Group(_header(exp), trials_table(exp, trials)))
            if exp["state"] in TERMINAL_STATES or exp["state"] == "PAUSED":
                break
            time.sleep(interval)
            desc = session.get(f"/experiments/{experiment_id}")
    return desc


def best_checkpoint(session: Session, experiment: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The checkpoint with the best searcher metric of the experiment, if any."""
    ckpts = session.get(f"/experiments/{experiment['id']}/checkpoints")["checkpoints"]
    metric = experiment.get("searcher_metric")
    sib = experiment.get("smaller_is_better", True)
    scored = [
        c for c in ckpts
        if c.get("state") == "COMPLETED" and isinstance((c.get("validation_metrics") or {}).get(metric), (int, float))
    ]
    if not scored:
        return None
    return sorted(scored, key=lambda c: c["validation_metrics"][metric] * (1 if sib else -1))[0]


def log_pages(session: Session, trial_id: int, offset: int = 0) -> Iterator[Dict[str, Any]]:
    """Pages of a trial's logs from `offset` up to the current end; the last page yielded is empty."""
    while True:
        page = session.get(f"/trials/{trial_id}/logs", params={"offset": offset, "limit": 1000})
        yield page
        if not page["logs"]:
            return
        offset = page["next_offset"]


def log_tail(session: Session, trial_id: int, lines: int = 20) -> List[str]:
    """The last `lines` lines of a trial's logs."""
    tail: List[str] = []
    for page in log_pages(session, trial_id):
        tail = (tail + [entry["message"] for entry in page["logs"]])[-lines:]
    return tail


def print_failures(session: Session, trials: List[Dict[str, Any]], console: Console, limit: int = 3) -> None:
    """For trials that ended in ERROR, the end of their logs: where the user's traceback is."""
    failed = [t for t in sorted(trials, key=lambda t: t["id"]) if t["state"] == "ERROR"]
    for t in failed[:limit]:
        console.print(f"\nTrial {t['id']} failed; the end of its logs (all of them: det trial logs {t['id']}):",
                      style="bold red")
        for line in log_tail(session, t["id"]):
            console.print(line, markup=False, highlight=False)
    if len(failed) > limit:
        console.print(f"{len(failed) - limit} more trials failed: see det experiment describe {failed[0]['experiment_id']}")


def print_summary(session: Session, desc: Dict[str, Any], console: Optional[Console] = None) -> None:
    console = console or make_console()
    exp, trials = desc["experiment"], desc["trials"]
    console.print(trials_table(exp, trials, title=f"Experiment {exp['id']}: {exp['state']}"))
    print_failures(session, trials, console)
    best = best_checkpoint(session, exp)
    metric = exp.get("searcher_metric")
    if exp.get("best_trial_id") is not None:
        console.print(f"Best trial: {exp['best_trial_id']}  {metric} = {_fmt_metric(exp.get('best_validation'))}")
    if best:
        console.print(
            f"Best checkpoint: {best['uuid']} (trial {best['trial_id']}, batch {best['steps_completed']}, "
            f"{metric} = {_fmt_metric(best['validation_metrics'][metric])})"
        )
