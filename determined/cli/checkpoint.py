"""`det checkpoint ...`"""
import argparse
import json
from typing import Any, Dict, List

from determined import errors
from determined.cli import _args, _lookup, _render


def json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def versions_text(c: Dict[str, Any]) -> str:
    return ", ".join(f"{v['model_name']} v{v['version']}" for v in c.get("model_versions") or [])


def checkpoint_columns(metric: str) -> List[_render.Column]:
    return [_render.Column("Trial", _render.NUMBER), _render.Column("Batch", _render.NUMBER),
            _render.Column("State", _render.TEXT), _render.Column(f"Validation {metric}", _render.NUMBER),
            _render.Column("UUID", _render.KEY), _render.Column("Size", _render.NUMBER, drop=2),
            _render.Column("Model versions", _render.TEXT, drop=1)]


def checkpoint_rows(checkpoints: List[Dict[str, Any]], metric: str) -> List[List[Any]]:
    return [[c["trial_id"], c["steps_completed"], c["state"], (c.get("validation_metrics") or {}).get(metric),
             c["uuid"], _render.fmt_bytes(sum((c.get("resources") or {}).values())), versions_text(c)]
            for c in checkpoints]


def describe(args: argparse.Namespace) -> int:
    c = _lookup.client(args).get_checkpoint(args.uuid).to_json()
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
    checkpoint = _lookup.client(args).get_checkpoint(args.uuid)
    print_downloaded(checkpoint, checkpoint.download(args.output_dir, mode=args.mode), args.quiet)
    return 0


def list_checkpoints(args: argparse.Namespace) -> int:
    """`det checkpoint list ID` and `det experiment list-checkpoints ID`."""
    from determined.experimental.client import _ranking

    if args.best is not None and args.best < 1:
        raise errors.DeterminedError(f"--best must be a positive number of checkpoints, not {args.best}")
    exp = _lookup.experiment(args)
    record = exp.to_json()
    checkpoints = exp.checkpoints_json()
    metric, smaller_is_better = record["searcher_metric"], record["smaller_is_better"]
    if args.best is not None:
        checkpoints = _ranking.ranked(checkpoints, metric, smaller_is_better)[: args.best]
    if args.json:
        _render.print_json(checkpoints)
        return 0
    if getattr(args, "csv", False):
        _render.csv_rows([c.header for c in checkpoint_columns(metric)], checkpoint_rows(checkpoints, metric))
        return 0
    empty = (f"No validated checkpoints with {metric} yet." if args.best is not None else
             "No checkpoints yet: trials checkpoint at validations (checkpoint_policy) and every min_checkpoint_period.")
    _render.print_table(checkpoint_columns(metric), checkpoint_rows(checkpoints, metric), empty=empty)
    return 0


def _confirm_uuids(args: argparse.Namespace, what: str) -> bool:
    return bool(args.yes) or _args.confirm(f"{what} of checkpoint(s) {', '.join(args.uuids)}? This cannot be undone.")


def delete(args: argparse.Namespace) -> int:
    if not _confirm_uuids(args, "Delete the files"):
        print("Aborted: nothing was changed.")
        return 1
    d = _lookup.client(args)
    for uuid in args.uuids:
        checkpoint = d.get_checkpoint(uuid)
        checkpoint.delete()
        c = checkpoint.to_json()
        print(f"Checkpoint {c['uuid']} is {c['state']}")
    return 0


def remove_files(args: argparse.Namespace) -> int:
    if not _confirm_uuids(args, f"Delete the files matching {', '.join(args.globs)}"):
        print("Aborted: nothing was changed.")
        return 1
    d = _lookup.client(args)
    for uuid in args.uuids:
        checkpoint = d.get_checkpoint(uuid)
        removed = checkpoint.remove_files(args.globs)
        print(f"Checkpoint {uuid}: removed {len(removed)} file(s)" + (f" ({', '.join(removed)})" if removed else "")
              + f"; it is {checkpoint.to_json()['state']}")
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
