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
    print_downloaded(checkpoint, checkpoint.download(args.output_dir, mode=args.mode), args.quiet)
    return 0


def list_checkpoints(args: argparse.Namespace) -> int:
    from determined.cli.experiment import list_checkpoints as list_experiment_checkpoints

    return list_experiment_checkpoints(args)


def _confirm_uuids(args: argparse.Namespace, what: str) -> bool:
    from determined.cli.experiment import _confirm

    return bool(args.yes) or _confirm(f"{what} of checkpoint(s) {', '.join(args.uuids)}? This cannot be undone.")


def delete(args: argparse.Namespace) -> int:
    from determined.experimental import _connect

    if not _confirm_uuids(args, "Delete the files"):
        print("Aborted: nothing was changed.")
        return 1
    session = _connect.read_session(args.master)
    for uuid in args.uuids:
        c = session.delete(f"/checkpoints/{uuid}")["checkpoint"]
        print(f"Checkpoint {c['uuid']} is {c['state']}")
    return 0


def remove_files(args: argparse.Namespace) -> int:
    from determined.experimental import _connect

    if not _confirm_uuids(args, f"Delete the files matching {', '.join(args.globs)}"):
        print("Aborted: nothing was changed.")
        return 1
    session = _connect.read_session(args.master)
    for uuid in args.uuids:
        answer = session.post(f"/checkpoints/{uuid}/remove_files", {"globs": args.globs})
        removed = answer["removed"]
        print(f"Checkpoint {uuid}: removed {len(removed)} file(s)" + (f" ({', '.join(removed)})" if removed else "")
              + f"; it is {answer['state']}")
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
    dl.add_argument("--mode", choices=["auto", "direct", "master"], default="auto",
                    help="direct: read the checkpoint storage; master: stream the files through the master; auto "
                         "(default): direct when this machine can read the storage, else master")
    dl.set_defaults(func=download)
    ls = s.add_parser("list", aliases=["ls"], help="list the checkpoints of an experiment")
    ls.add_argument("experiment_id", type=int)
    ls.add_argument("--best", type=int, default=None, metavar="N",
                    help="only the N best checkpoints by the searcher metric, best first")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=list_checkpoints)
    de = s.add_parser("delete", help="delete checkpoints' files (they stay listed, DELETED)")
    de.add_argument("uuids", nargs="+", metavar="UUID")
    de.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    de.set_defaults(func=delete)
    rm = s.add_parser("rm", help="delete the files of checkpoints that match globs (PARTIALLY_DELETED)")
    rm.add_argument("uuids", nargs="+", metavar="UUID")
    rm.add_argument("--glob", dest="globs", action="append", required=True, metavar="GLOB",
                    help="a pattern of paths in the checkpoint, e.g. '*.pt' (repeatable)")
    rm.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    rm.set_defaults(func=remove_files)
