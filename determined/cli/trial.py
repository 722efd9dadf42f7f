"""`det trial ...`"""
import argparse
from typing import Any, Dict

from determined import errors
from determined.cli import _args, _lookup, _render
from determined.common.formats import duration_between, escape_control, fmt_duration

def metrics_summary(records_by_group: Dict[str, Any]) -> Dict[str, Dict[str, Dict[str, Any]]]:
    """{group: {metric: {count, last, min, max, mean}}} of a trial's reports (Determined 0.38's summary metrics);
    a metric with values that are not numbers counts them and keeps the last."""
    out: Dict[str, Dict[str, Dict[str, Any]]] = {}
    for group, records in records_by_group.items():
        for record in sorted(records, key=lambda r: r["steps_completed"]):
            for name, value in (record.get("metrics") or {}).items():
                entry = out.setdefault(group, {}).setdefault(name, {"count": 0, "last": None})
                entry["count"] += 1
                entry["last"] = value
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    numbers = entry.setdefault("_values", [])
                    numbers.append(value)
    for metrics in out.values():
        for entry in metrics.values():
            numbers = entry.pop("_values", [])
            if numbers:
                entry.update(min=min(numbers), max=max(numbers), mean=sum(numbers) / len(numbers))
    return out


def _print_metrics_summary(args: argparse.Namespace, records_by_group: Dict[str, Any]) -> int:
    summary = metrics_summary(records_by_group)
    if args.json:
        _render.print_json(summary)
        return 0
    rows = [[group, name, e["count"], e["last"], e.get("min"), e.get("max"), e.get("mean")]
            for group, metrics in summary.items() for name, e in sorted(metrics.items())]
    _render.table(["Group", "Metric", "Count", "Last", "Min", "Max", "Mean"], rows,
                  title=f"Trial {args.trial_id}: summary of its metrics", empty="No metrics reported yet.")
    return 0


def describe(args: argparse.Namespace) -> int:
    from determined.experimental import _follow

    trial = _lookup.trial(args)
    d = trial.describe()
    other_groups = [g for g in d["metric_groups"] if g not in ("training", "validation")]
    summary = getattr(args, "metrics_summary", False)
    groups = {g: trial.metrics_json(g) for g in other_groups} if args.metrics or summary else {}
    if summary:
        return _print_metrics_summary(args, {"training": d["training_metrics"],
                                             "validation": d["validation_metrics"], **groups})
    if args.json:
        out = dict(d)
        if args.metrics:
            out["metrics"] = groups  # the groups other than training and validation (report_metrics, profiler)
        _render.print_json(out)
        return 0
    t = d
    state = _follow.status_of(t) + (f": {t['status_reason']}" if t.get("status_reason") else "")
    _render.fields([
        ("Trial", f"{t['id']} (experiment {t['experiment_id']})"), ("State", state), ("Batches", t.get("total_batches")),
        ("Best validation", t.get("best_validation")), ("Restarts", t.get("restarts")),
        ("Started", _render.fmt_time(t.get("start_time")) or "not yet"), ("Ended", _render.fmt_time(t.get("end_time"))),
        ("Duration", fmt_duration(duration_between(t.get("start_time"), t.get("end_time")))
         if t.get("start_time") else ""),
        ("Started from", t.get("warm_start_checkpoint_uuid")), ("Status set by the code", t.get("runner_status")),
    ])
    hparams = _follow.flat_hparams(t.get("hparams") or {}, None)
    if hparams:
        print()
        _render.fields(sorted(hparams.items()), title="Hyperparameters")
    by_batch: Dict[int, Dict[str, Any]] = {}
    for v in d["validation_metrics"]:
        by_batch.setdefault(v["steps_completed"], {})["validation"] = v["metrics"]
    for c in d["checkpoints"]:
        by_batch.setdefault(c["steps_completed"], {})["checkpoint"] = c
    if args.metrics:
        for m in d["training_metrics"]:
            by_batch.setdefault(m["steps_completed"], {})["training"] = m["metrics"]
    rows = []
    for batches in sorted(by_batch):
        entry = by_batch[batches]
        ckpt = entry.get("checkpoint")
        row = [batches, _render.metrics_text(entry.get("validation"))]
        if args.metrics:
            row.insert(1, _render.metrics_text(entry.get("training")))
        row += [ckpt["uuid"] if ckpt else "", ckpt["state"] if ckpt else ""]
        rows.append(row)
    columns = [_render.Column("Batches", _render.NUMBER)]
    columns += [_render.Column("Training metrics", _render.WRAP)] if args.metrics else []
    columns += [_render.Column("Validation metrics", _render.WRAP), _render.Column("Checkpoint", _render.KEY),
                _render.Column("State", drop=1)]
    print()
    _render.print_table(columns, rows, title="Workloads", empty="No validations or checkpoints yet.")
    for group, records in groups.items():  # report_metrics(group, ...) and the profiler's groups
        print()
        _render.table(["Steps", "Metrics"], [[r["steps_completed"], _render.metrics_text(r["metrics"])]
                                             for r in records], title=f"Metrics: {group}")
    if other_groups and not args.metrics:
        print(f"\nOther metric groups: {', '.join(other_groups)} (show them with --metrics)")
    return 0


def print_logs(trial: Any, args: argparse.Namespace) -> int:
    """Print a trial's log lines (of a client Trial) with the filters of `det trial logs` (Determined 0.38's
    flags)."""
    import json

    shown = 0
    try:
        for line in trial.iter_log_records(args.follow, head=args.head, tail=args.tail, rank_ids=args.rank_ids,
                                           stdtypes=args.stdtypes, min_level=args.level,
                                           timestamp_before=args.timestamp_before,
                                           timestamp_after=args.timestamp_after, sources=args.sources):
            shown += 1
            if args.json:
                print(json.dumps({k: line.get(k) for k in ("id", "timestamp", "stream", "source", "level", "rank_id",
                                                           "message")}), flush=True)
            else:
                print(escape_control(line["message"]), flush=True)
    except KeyboardInterrupt:
        return 0
    if not shown and not args.follow and not args.json:
        trial.reload()
        state = trial.to_json()["state"]
        print(f"Trial {trial.id} has no logs" + (" yet (it has not run)." if state in ("ACTIVE", "PAUSED") else
                                                 " that match." if _filtered(args) else "."), flush=True)
    return 0


def _filtered(args: argparse.Namespace) -> bool:
    return any(getattr(args, k) is not None for k in ("rank_ids", "stdtypes", "level", "timestamp_before",
                                                      "timestamp_after", "sources"))


def logs(args: argparse.Namespace) -> int:
    return print_logs(_lookup.trial(args), args)


def add_log_arguments(lg: argparse.ArgumentParser) -> None:
    """The flags of `det trial logs` and `det experiment logs` (Determined 0.38)."""
    from determined.experimental._logs import LEVELS, SOURCES, STDTYPES

    lg.add_argument("-f", "--follow", action="store_true", help="keep printing new lines until the trial ends")
    g = lg.add_mutually_exclusive_group()
    g.add_argument("--head", type=int, help="only the first N lines")
    g.add_argument("--tail", type=int, help="only the last N lines")
    for flag in ("--agent-id", "--container-id"):
        lg.add_argument(flag, action="append", default=None, metavar="ID",
                        help="accepted for Determined 0.38 scripts: trials run as processes of the master's machine, "
                             "with no agents or containers to tell apart, so it keeps every line")
    lg.add_argument("--rank-id", dest="rank_ids", type=int, action="append", default=None, metavar="RANK",
                    help="only lines of this worker rank (a `[rank=N]` prefix); repeatable")
    lg.add_argument("--stdtype", dest="stdtypes", choices=STDTYPES, action="append", default=None,
                    help="only lines of stdout or stderr; repeatable")
    lg.add_argument("--source", dest="sources", choices=SOURCES, action="append", default=None,
                    help="only lines of the trial's processes or of the master; repeatable")
    lg.add_argument("--level", choices=LEVELS, type=str.upper, default=None,
                    help="only lines of this logging level or above (lines naming none count as INFO)")
    lg.add_argument("--timestamp-before", default=None, metavar="TIME", help="only lines before this ISO 8601 time")
    lg.add_argument("--timestamp-after", default=None, metavar="TIME", help="only lines after this ISO 8601 time")
    lg.add_argument("--json", action="store_true", help="one JSON object per line, with its time, stream and level")


def kill(args: argparse.Namespace) -> int:
    trial = _lookup.trial(args)
    trial.kill()
    t = trial.to_json()
    print(f"Trial {t['id']} is {t['state']}")
    return 0


def download(args: argparse.Namespace) -> int:
    from determined.cli.checkpoint import print_downloaded

    if (args.sort_by is not None or args.smaller_is_better is not None) and not args.best:
        raise errors.DeterminedError("--sort-by and --smaller-is-better only go with --best")
    if args.smaller_is_better is not None and args.sort_by is None:
        raise errors.DeterminedError("--smaller-is-better only goes with --sort-by METRIC")
    trial = _lookup.client(args).get_trial(args.trial_id)
    checkpoint = trial.select_checkpoint(latest=args.latest, best=args.best, uuid=args.uuid, sort_by=args.sort_by,
                                         smaller_is_better=_args.smaller_is_better(args.smaller_is_better))
    print_downloaded(checkpoint, checkpoint.download(args.output_dir), args.quiet)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trial", aliases=["t"], help="inspect trials")
    s = p.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    d = s.add_parser("describe", help="describe a trial")
    d.add_argument("trial_id", type=int)
    d.add_argument("--json", action="store_true")
    d.add_argument("--metrics-summary", action="store_true",
                   help="only the count, last, min, max and mean of each metric of each group")
    d.add_argument("--metrics", action="store_true",
                   help="include training metrics and every other metric group (report_metrics, the profiler's)")
    d.set_defaults(func=describe)
    lg = s.add_parser("logs", help="print a trial's logs")
    lg.add_argument("trial_id", type=int)
    add_log_arguments(lg)
    lg.set_defaults(func=logs)
    dl = s.add_parser("download", help="download a checkpoint of a trial: the best, the latest or one by uuid")
    dl.add_argument("trial_id", type=int)
    which = dl.add_mutually_exclusive_group(required=True)
    which.add_argument("--best", action="store_true", help="the best checkpoint by the searcher metric (or --sort-by)")
    which.add_argument("--latest", action="store_true", help="the latest checkpoint")
    which.add_argument("--uuid", default=None, help="the checkpoint with this uuid")
    dl.add_argument("-o", "--output-dir", default=None, help="directory to download into (default: checkpoints/UUID)")
    dl.add_argument("--sort-by", default=None, metavar="METRIC", help="validation metric to rank by (with --best)")
    dl.add_argument("--smaller-is-better", default=None, metavar="BOOL", help="true or false (with --sort-by)")
    dl.add_argument("-q", "--quiet", action="store_true", help="print only the local path")
    dl.set_defaults(func=download)
    k = s.add_parser("kill", help="kill a trial")
    k.add_argument("trial_id", type=int)
    k.set_defaults(func=kill)
