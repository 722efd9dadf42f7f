"""`det trial ...`"""
import argparse
import time
from typing import Any, Dict, List

from determined import errors
from determined.cli import _render
from determined.common.formats import duration_between, escape_control, fmt_duration

_TRIAL_TERMINAL = {"COMPLETED", "CANCELED", "ERROR"}


def describe(args: argparse.Namespace) -> int:
    from determined.experimental import _connect, _follow

    session = _connect.read_session(args.master)
    d = session.get(f"/trials/{args.trial_id}")
    other_groups = [g for g in d.get("metric_groups", []) if g not in ("training", "validation")]
    groups = {g: session.get(f"/trials/{args.trial_id}/metrics", params={"group": g})["metrics"]
              for g in other_groups} if args.metrics else {}
    if args.json:
        out = dict(d["trial"])
        for key in ("training_metrics", "validation_metrics", "checkpoints"):
            out[key] = d[key]
        out["metric_groups"] = d.get("metric_groups", ["training", "validation"])
        if args.metrics:
            out["metrics"] = groups  # the groups other than training and validation (report_metrics, profiler)
        _render.print_json(out)
        return 0
    t = d["trial"]
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
    columns += [_render.Column("Training metrics")] if args.metrics else []
    columns += [_render.Column("Validation metrics"), _render.Column("Checkpoint", _render.KEY),
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


def logs(args: argparse.Namespace) -> int:
    from determined.experimental import _connect, _follow

    session = _connect.read_session(args.master)
    offset = 0
    collected: List[Dict[str, Any]] = []
    state = ""
    for page in _follow.log_pages(session, args.trial_id, offset):
        collected.extend(page["logs"])
        offset = page["next_offset"]
        state = page.get("trial_state", "")
        if args.head is not None and len(collected) >= args.head:
            break
    if args.head is not None:
        collected = collected[: args.head]
    elif args.tail is not None:
        collected = collected[-args.tail:] if args.tail else []
    for line in collected:
        print(escape_control(line["message"]), flush=True)
    if not collected and not args.follow:
        print(f"Trial {args.trial_id} has no logs yet" + (" (it has not run)." if state in ("ACTIVE", "PAUSED", "")
                                                            else "."), flush=True)
    if not args.follow or args.head is not None:
        return 0
    try:
        while True:
            page = session.get(f"/trials/{args.trial_id}/logs", params={"offset": offset, "limit": 1000})
            for line in page["logs"]:
                print(escape_control(line["message"]), flush=True)
            offset = page["next_offset"]
            state = page.get("trial_state", state)
            if not page["logs"]:
                if state in _TRIAL_TERMINAL:
                    return 0
                time.sleep(0.5)
    except KeyboardInterrupt:
        return 0


def kill(args: argparse.Namespace) -> int:
    from determined.experimental import _connect

    t = _connect.read_session(args.master).post(f"/trials/{args.trial_id}/kill")["trial"]
    print(f"Trial {t['id']} is {t['state']}")
    return 0


def download(args: argparse.Namespace) -> int:
    from determined.cli.checkpoint import print_downloaded
    from determined.cli.experiment import _smaller_is_better
    from determined.experimental.client import Determined

    if (args.sort_by is not None or args.smaller_is_better is not None) and not args.best:
        raise errors.DeterminedError("--sort-by and --smaller-is-better only go with --best")
    if args.smaller_is_better is not None and args.sort_by is None:
        raise errors.DeterminedError("--smaller-is-better only goes with --sort-by METRIC")
    trial = Determined(args.master).get_trial(args.trial_id)
    checkpoint = trial.select_checkpoint(latest=args.latest, best=args.best, uuid=args.uuid, sort_by=args.sort_by,
                                         smaller_is_better=_smaller_is_better(args.smaller_is_better))
    print_downloaded(checkpoint, checkpoint.download(args.output_dir), args.quiet)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trial", aliases=["t"], help="inspect trials")
    s = p.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    d = s.add_parser("describe", help="describe a trial")
    d.add_argument("trial_id", type=int)
    d.add_argument("--json", action="store_true")
    d.add_argument("--metrics", action="store_true",
                   help="include training metrics and every other metric group (report_metrics, the profiler's)")
    d.set_defaults(func=describe)
    lg = s.add_parser("logs", help="print a trial's logs")
    lg.add_argument("trial_id", type=int)
    lg.add_argument("-f", "--follow", action="store_true", help="keep printing new lines until the trial ends")
    g = lg.add_mutually_exclusive_group()
    g.add_argument("--head", type=int, help="only the first N lines")
    g.add_argument("--tail", type=int, help="only the last N lines")
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
