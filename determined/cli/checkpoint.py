"""`det checkpoint ...`"""
import argparse

from determined.cli import _render
from determined.experimental import _connect


def describe(args: argparse.Namespace) -> int:
    c = _connect.read_session(args.master).get(f"/checkpoints/{args.uuid}")["checkpoint"]
    if args.json:
        _render.print_json(c)
        return 0
    size = sum((c.get("resources") or {}).values())
    _render.table(
        ["UUID", "Experiment", "Trial", "Batch", "State", "Framework", "Format", "Size", "Validation metrics"],
        [[c["uuid"], c["experiment_id"], c["trial_id"], c["steps_completed"], c["state"], c.get("framework"),
          c.get("format"), f"{size / 2**20:.2f} MiB", _render.metrics_text(c.get("validation_metrics"))]],
    )
    if c.get("resources"):
        _render.table(["File", "Bytes"], sorted((c.get("resources") or {}).items()), title="Files")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("checkpoint", aliases=["c"], help="inspect checkpoints")
    s = p.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    d = s.add_parser("describe", help="describe a checkpoint")
    d.add_argument("uuid")
    d.add_argument("--json", action="store_true")
    d.set_defaults(func=describe)
