"""`det trial ...`"""
import argparse
import time
from typing import Any, Dict, List

from determined.cli import _render
from determined.experimental import _connect, _follow

_TRIAL_TERMINAL = {"COMPLETED", "CANCELED", "ERROR"}


def describe(args: argparse.Namespace) -> int:
    d = _connect.read_session(args.master).get(f"/trials/{args.trial_id}")
    if args.json:
        out = dict(d["trial"])
        for key in ("training_metrics", "validation_metrics", "checkpoints"):
            out[key] = d[key]
        _render.print_json(out)
        return 0
    t = d["trial"]
    _render.table(
        ["Trial", "Experiment", "State", "Batches", "Restarts", "Best", "Start", "End", "Hyperparameters"],
        [[t["id"], t["experiment_id"], t["state"], t.get("total_batches"), t.get("restarts"),
          _render.fmt_metric(t.get("best_validation")), _render.fmt_time(t.get("start_time")),
          _render.fmt_time(t.get("end_time")), _render.metrics_text(t.get("hparams"))]],
    )
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
    headers = ["Batches"] + (["Training metrics"] if args.metrics else []) + ["Validation metrics", "Checkpoint", "State"]
    _render.table(headers, rows, title="Workloads")
    return 0


def logs(args: argparse.Namespace) -> int:
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
        print(line["message"], flush=True)
    if not args.follow or args.head is not None:
        return 0
    try:
        while True:
            page = session.get(f"/trials/{args.trial_id}/logs", params={"offset": offset, "limit": 1000})
            for line in page["logs"]:
                print(line["message"], flush=True)
            offset = page["next_offset"]
            state = page.get("trial_state", state)
            if not page["logs"]:
                if state in _TRIAL_TERMINAL:
                    return 0
                time.sleep(0.5)
    except KeyboardInterrupt:
        return 0


def kill(args: argparse.Namespace) -> int:
    t = _connect.read_session(args.master).post(f"/trials/{args.trial_id}/kill")["trial"]
    print(f"Trial {t['id']} is {t['state']}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trial", aliases=["t"], help="inspect trials")
    s = p.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    d = s.add_parser("describe", help="describe a trial")
    d.add_argument("trial_id", type=int)
    d.add_argument("--json", action="store_true")
    d.add_argument("--metrics", action="store_true", help="include training metrics")
    d.set_defaults(func=describe)
    lg = s.add_parser("logs", help="print a trial's logs")
    lg.add_argument("trial_id", type=int)
    lg.add_argument("-f", "--follow", action="store_true", help="keep printing new lines until the trial ends")
    g = lg.add_mutually_exclusive_group()
    g.add_argument("--head", type=int, help="only the first N lines")
    g.add_argument("--tail", type=int, help="only the last N lines")
    lg.set_defaults(func=logs)
    k = s.add_parser("kill", help="kill a trial")
    k.add_argument("trial_id", type=int)
    k.set_defaults(func=kill)
