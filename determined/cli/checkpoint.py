"""`det checkpoint ...`"""
import argparse
import json
from typing import Any, Dict

from determined.cli import _render


def json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def versions_text(c: Dict[str, Any]) -> str:
    return ", ".join(f"{v['model_name']} v{v['version']}" for v in c.get("model_versions") or [])


def describe(args: argparse.Namespace) -> int:
    from determined.experimental import _connect

    c = _connect.read_session(args.master).get(f"/checkpoints/{args.uuid}")["checkpoint"]
    if args.json:
        _render.print_json(c)
        return 0
    size = sum((c.get("resources") or {}).values())
    _render.fields([
        ("UUID", c["uuid"]), ("Experiment", c["experiment_id"]), ("Trial", c["trial_id"]),
        ("Batch", c["steps_completed"]), ("State", c["state"]), ("Framework", c.get("framework")),
        ("Format", c.get("format")), ("Size", _render.fmt_bytes(size)), ("Saved", _render.fmt_time(c.get("end_time"))),
        ("Validation metrics", _render.metrics_text(c.get("validation_metrics"))),
        ("Model versions", versions_text(c)),
    ])
    if c.get("metadata"):
        print()
        _render.table(["Key", "Value"], sorted((k, json_text(v)) for k, v in c["metadata"].items()),
                      title="Metadata")
    if c.get("resources"):
        print()
        _render.table(["File", "Bytes"], sorted((c.get("resources") or {}).items()), title="Files")
    return 0


def print_downloaded(checkpoint: Any, path: str, quiet: bool) -> None:
    if quiet:
        print(path)
    else:
        print(f"Checkpoint {checkpoint.uuid} (trial {checkpoint.trial_id}, batch {checkpoint.batch_number}) "
              f"downloaded to:\n{path}")


def download(args: argparse.Namespace) -> int:
    from determined.experimental.client import Determined

    checkpoint = Determined(args.master).get_checkpoint(args.uuid)
    print_downloaded(checkpoint, checkpoint.download(args.output_dir), args.quiet)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("checkpoint", aliases=["c"], help="inspect and download checkpoints")
    s = p.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    d = s.add_parser("describe", help="describe a checkpoint")
    d.add_argument("uuid")
    d.add_argument("--json", action="store_true")
    d.set_defaults(func=describe)
    dl = s.add_parser("download", help="download a checkpoint (with metadata.json and its model code)")
    dl.add_argument("uuid")
    dl.add_argument("-o", "--output-dir", default=None, help="directory to download into (default: checkpoints/UUID)")
    dl.add_argument("-q", "--quiet", action="store_true", help="print only the local path")
    dl.set_defaults(func=download)
