"""Following an experiment from a client: the live display (progress, elapsed time, ETA, batches per second and
the trials with their status), the trials table, and the final summary."""
import collections
import sys
import time
from typing import Any, Callable, Deque, Dict, Iterator, List, Optional, Sequence, Tuple

from determined.common.formats import duration_between, escape_control, fmt_duration, fmt_number
from determined.common.table import HPARAM, KEY, NUMBER, Column, render, terminal_width

Description = Any  # client/_records.py's: an experiment's record and its trials' (imported where one is read)

TERMINAL_STATES = {"COMPLETED", "CANCELED", "ERROR", "DELETED"}
# Statuses whose reason says something a table row cannot (why a trial waits, stopped or failed).
_EXPLAINED = ("WAITING", "STOPPED", "ERROR", "CANCELED", "STOPPING")


def make_console() -> Any:
    """A rich console for the live display: the terminal's width, or wide enough not to fold in a file."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=200)


def flat_hparams(hparams: Dict[str, Any], specs: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """A trial's hyperparameters with nested ones under dotted names (determined.config.flat_hparams decides, with
    the experiment's section, what a group is; it is imported only when a value is a mapping)."""
    if not any(isinstance(v, dict) for v in hparams.values()):
        return dict(hparams)
    from determined.config import flat_hparams as config_flat_hparams

    return config_flat_hparams(hparams, specs)


def _hparam_names(flat: Sequence[Dict[str, Any]]) -> List[str]:
    """Hyperparameters that differ between trials (all but global_batch_size when there is one trial), by name;
    nested hyperparameters by dotted names."""
    names = sorted({k for h in flat for k in h})
    if len(flat) <= 1:
        return [n for n in names if n != "global_batch_size"] or names
    return [n for n in names if len({repr(h.get(n)) for h in flat}) > 1]


def status_of(trial: Dict[str, Any]) -> str:
    return str(trial.get("status") or trial.get("state") or "")


def trials_table(experiment: Dict[str, Any], trials: Sequence[Dict[str, Any]]) -> Tuple[List[Column], List[List[Any]]]:
    """Columns and rows of a trials table: key columns, then the hyperparameters that differ (left out first
    when the table does not fit)."""
    metric = experiment.get("searcher_metric") or "metric"
    specs = (experiment.get("config") or {}).get("hyperparameters")
    flat = {t["id"]: flat_hparams(t.get("hparams") or {}, specs) for t in trials}
    names = _hparam_names(list(flat.values()))
    best_id = experiment.get("best_trial_id")
    columns = [Column("Trial", KEY, align="right"), Column("State", KEY), Column("Batches", NUMBER),
               Column(f"Best {metric}", NUMBER), Column("Restarts", NUMBER, drop=2),
               Column("Duration", NUMBER, drop=1)]
    columns += [Column(n, HPARAM) for n in names]
    rows = []
    for t in sorted(trials, key=lambda t: t["id"]):
        duration = duration_between(t.get("start_time"), t.get("end_time")) if t.get("start_time") else None
        rows.append([f"{t['id']}{'*' if t['id'] == best_id else ''}", status_of(t), t.get("total_batches", 0),
                     t.get("best_validation"), t.get("restarts", 0), fmt_duration(duration),
                     *[flat[t["id"]].get(n) for n in names]])
    return columns, rows


def reasons(trials: Sequence[Dict[str, Any]], limit: int = 20) -> List[str]:
    """`Trial 3: stopped by the searcher ...` for trials whose status needs a word of explanation."""
    lines = [f"Trial {t['id']}: {t['status_reason']}" for t in sorted(trials, key=lambda t: t["id"])
             if t.get("status") in _EXPLAINED and t.get("status_reason")]
    if len(lines) > limit:
        lines = lines[:limit] + [f"... and {len(lines) - limit} more: det trial describe ID"]
    return [escape_control(line) for line in lines]


def trials_lines(experiment: Dict[str, Any], trials: Sequence[Dict[str, Any]], width: Optional[int],
                 explain: bool = True) -> List[str]:
    columns, rows = trials_table(experiment, trials)
    lines = render(columns, rows, width)
    if experiment.get("best_trial_id") is not None:
        lines.append("* the best trial")
    return lines + (reasons(trials) if explain else [])


def print_trials(experiment: Dict[str, Any], trials: Sequence[Dict[str, Any]], title: Optional[str] = None) -> None:
    if title:
        print(escape_control(title))
    if not trials:
        print("No trials yet.")
        return
    print("\n".join(trials_lines(experiment, trials, terminal_width())))


class Rates:
    """Batches per second and the time left, from what the display saw over the last minute."""

    WINDOW_S = 60.0

    def __init__(self) -> None:
        self.samples: Deque[Tuple[float, int, float]] = collections.deque()  # (time, batches, progress)

    def add(self, now: float, batches: int, progress: float) -> None:
        self.samples.append((now, batches, progress))
        while len(self.samples) > 2 and now - self.samples[0][0] > self.WINDOW_S:
            self.samples.popleft()

    def batches_per_second(self) -> Optional[float]:
        if len(self.samples) < 2:
            return None
        (t0, b0, _), (t1, b1, _) = self.samples[0], self.samples[-1]
        return (b1 - b0) / (t1 - t0) if t1 > t0 and b1 >= b0 else None

    def seconds_left(self, progress: float, elapsed: Optional[float]) -> Optional[float]:
        """At the pace of the window; before the window has any, at the pace since the experiment started."""
        if progress >= 1.0:
            return 0.0
        if len(self.samples) >= 2:
            (t0, _, p0), (t1, _, p1) = self.samples[0], self.samples[-1]
            if t1 > t0 and p1 > p0:
                return (1.0 - progress) * (t1 - t0) / (p1 - p0)
        if elapsed and progress > 0:
            return (1.0 - progress) * elapsed / progress
        return None


def header(experiment: Dict[str, Any], rates: Optional[Rates] = None, now: Optional[float] = None) -> str:
    """`Experiment 3 ACTIVE  42.0%  elapsed 3m 05s  ETA 4m 10s  51.2 batches/s  trials 16  best loss 0.1234`."""
    progress = float(experiment.get("progress") or 0.0)
    elapsed = duration_between(experiment.get("start_time"), experiment.get("end_time"))
    parts = [f"Experiment {experiment['id']} {experiment['state']}", f"{progress * 100:.1f}%",
             f"elapsed {fmt_duration(elapsed)}"]
    if rates is not None and experiment["state"] not in TERMINAL_STATES:
        left = rates.seconds_left(progress, elapsed)
        parts.append(f"ETA {fmt_duration(left)}" if left is not None else "ETA -")
        speed = rates.batches_per_second()
        parts.append(f"{fmt_number(round(speed, 1)) if speed is not None else '-'} batches/s")
    parts.append(f"trials {experiment.get('num_trials', 0)}")
    best = experiment.get("best_validation")
    parts.append(f"best {experiment.get('searcher_metric')} {fmt_number(best) if best is not None else '-'}")
    return escape_control("  ".join(parts))


def fit_parts(text: str, width: Optional[int]) -> List[str]:
    """A header's `  `-separated parts on as few lines of `width` as they fit (never cut mid-part)."""
    if width is None or len(text) <= width:
        return [text]
    lines: List[str] = []
    for part in text.split("  "):
        if lines and len(lines[-1]) + 2 + len(part) <= width:
            lines[-1] += "  " + part
        else:
            lines.append(part)
    return lines


def total_batches(trials: Sequence[Dict[str, Any]]) -> int:
    return sum(int(t.get("total_batches") or 0) for t in trials)


def live_lines(desc: Description, rates: Rates, width: int) -> List[str]:
    exp, trials = desc.experiment, desc.trials
    return fit_parts(header(exp, rates), width) + trials_lines(exp, trials, width, explain=False)


def follow(session: Any, experiment_id: int, console: Optional[Any] = None, interval: float = 0.5,
           wait: Optional[Callable[[float], None]] = None) -> Description:
    """Show live progress until the experiment reaches a terminal state or is paused; returns the final describe.
    `wait(interval)` sleeps between two looks (by default `time.sleep`; a process that runs the master wakes as
    soon as an experiment's state changes)."""
    from rich.live import Live
    from rich.text import Text

    from determined.experimental.client._records import describe_experiment

    console = console or make_console()
    rates = Rates()
    desc = describe_experiment(session, experiment_id)
    with Live(console=console, refresh_per_second=4, transient=True) as live:
        while True:
            exp, trials = desc.experiment, desc.trials
            rates.add(time.monotonic(), total_batches(trials), float(exp.get("progress") or 0.0))
            live.update(Text("\n".join(live_lines(desc, rates, console.width)), no_wrap=True, overflow="crop"))
            if exp["state"] in TERMINAL_STATES or exp["state"] == "PAUSED":
                break
            (wait or time.sleep)(interval)
            desc = describe_experiment(session, experiment_id)
    return desc


def best_checkpoint(session: Any, experiment: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The experiment's best COMPLETED checkpoint by its searcher metric, if any: the first in the one order of
    "best" (determined.common.checkpoint_order), the one GC keeps and `top_checkpoint()` returns."""
    from determined.experimental.client import _ranking
    from determined.experimental.client._records import experiment_checkpoints

    ranked = _ranking.ranked(experiment_checkpoints(session, experiment["id"]), str(experiment.get("searcher_metric")),
                             bool(experiment.get("smaller_is_better", True)))
    return ranked[0] if ranked else None


def best_trial(session: Any, experiment: Dict[str, Any], trials: Sequence[Dict[str, Any]]) -> Optional[int]:
    """The trial of the experiment's best validation in the same order as the best checkpoint: the searcher metric,
    then more batches, then the lower trial id. Trials tied on the metric are told apart by their validations."""
    from determined.common import checkpoint_order

    sib = bool(experiment.get("smaller_is_better", True))
    keyed = [(checkpoint_order.validation_key(t.get("best_validation"), sib, 0, 0)[:2], t["id"]) for t in trials
             if checkpoint_order.metric_value(t.get("best_validation")) is not None]
    if not keyed:
        return experiment.get("best_trial_id")
    top = min(k for k, _ in keyed)
    tied = sorted(tid for k, tid in keyed if k == top)
    if len(tied) == 1:
        return tied[0]
    from determined.experimental.client._metrics import trial_metric_records

    metric = str(experiment.get("searcher_metric"))
    keys = []
    for tid in tied:
        last_at: Dict[int, Any] = {}  # the last validation at each steps counts, as for a checkpoint
        for record in trial_metric_records(session, tid, "validation"):
            last_at[int(record.get("steps_completed") or 0)] = (record.get("metrics") or {}).get(metric)
        keys.extend(checkpoint_order.validation_key(value, sib, steps, tid) for steps, value in last_at.items())
    return min(keys)[3] if keys else tied[0]


def log_pages(session: Any, trial_id: int, offset: int = 0) -> Iterator[Any]:
    """Pages of a trial's logs (client/_records.py's LogPage) from `offset` up to the current end; the last page
    yielded is empty."""
    from determined.experimental.client._records import trial_log_page

    while True:
        page = trial_log_page(session, trial_id, offset)
        yield page
        if not page.logs:
            return
        offset = page.next_offset


def log_tail(session: Any, trial_id: int, lines: int = 20, own_output: bool = False) -> List[str]:
    """The last `lines` lines of a trial's logs (with `own_output`, of what its processes printed: no master lines)."""
    tail: List[str] = []
    for page in log_pages(session, trial_id):
        tail = (tail + [entry["message"] for entry in page.logs
                        if not own_output or entry.get("stream") != "master"])[-lines:]
    return tail


def print_failures(session: Any, trials: List[Dict[str, Any]], console: Any, limit: int = 3) -> None:
    """For trials that ended in ERROR, the end of their logs: where the user's traceback is."""
    failed = [t for t in sorted(trials, key=lambda t: t["id"]) if t["state"] == "ERROR"]
    for t in failed[:limit]:
        console.print(f"\nTrial {t['id']} failed; the end of its logs (all of them: det trial logs {t['id']}):",
                      style="bold red")
        for line in log_tail(session, t["id"], own_output=True):
            console.print(escape_control(line), markup=False, highlight=False)
    if len(failed) > limit:
        console.print(f"{len(failed) - limit} more trials failed: see det experiment describe {failed[0]['experiment_id']}")


def print_summary(session: Any, desc: Description, console: Optional[Any] = None) -> None:
    """The final table of trials with their status and batches, why trials stopped, failures and the best."""
    console = console or make_console()
    exp, trials = desc.experiment, desc.trials
    width = console.width if console.is_terminal else terminal_width()
    lines = fit_parts(header(exp), width) + trials_lines(exp, trials, width)
    console.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)
    print_failures(session, trials, console)
    best = best_checkpoint(session, exp)
    metric = exp.get("searcher_metric")
    trial_id = best_trial(session, exp, trials)
    if trial_id is not None:
        value = next((t.get("best_validation") for t in trials if t["id"] == trial_id), exp.get("best_validation"))
        console.print(f"Best trial: {trial_id}  {metric} = {fmt_number(value)}", markup=False, highlight=False)
    if best:
        console.print(
            f"Best checkpoint: {best['uuid']} (trial {best['trial_id']}, batch {best['steps_completed']}, "
            f"{metric} = {fmt_number(best['validation_metrics'][metric])})", markup=False, highlight=False)


def running_trials(desc: Description) -> List[int]:
    """Trials of a describe that still have a process: after a pause, those checkpointing before they stop."""
    return [t["id"] for t in desc.trials if t.get("status") in ("RUNNING", "STOPPING")]
