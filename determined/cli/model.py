"""`det model ...`: the model registry."""
import argparse
import json
from typing import Any, Dict, List

from determined import errors
from determined.cli import _render
from determined.cli.checkpoint import json_text

_SORT_BY = {"name": "NAME", "description": "DESCRIPTION", "creation_time": "CREATION_TIME",
            "last_updated_time": "LAST_UPDATED_TIME"}
_ORDER_BY = {"asc": "ASCENDING", "desc": "DESCENDING"}

Model = ModelVersion = Any  # determined.experimental.client's, imported when a command runs


def _determined(master: Any) -> Any:
    from determined.experimental.client import Determined

    return Determined(master)


def _model_json(m: Model) -> Dict[str, Any]:
    return {"name": m.name, "description": m.description, "metadata": m.metadata,
            "creation_time": m.creation_time.isoformat() if m.creation_time else None,
            "last_updated_time": m.last_updated_time.isoformat() if m.last_updated_time else None,
            "num_versions": m.num_versions, "workspace_id": m.workspace_id}


def _version_json(v: ModelVersion) -> Dict[str, Any]:
    c = v.checkpoint
    return {"version": v.model_version, "model_name": v.model_name, "uuid": c.uuid, "name": v.name,
            "comment": v.comment, "notes": v.notes, "version_metadata": v.metadata,
            "experiment_id": c.experiment_id, "trial_id": c.trial_id, "batch_number": c.batch_number,
            "validation_metrics": c.validation_metrics, "metadata": c.metadata}


def _time(value: Any) -> str:
    return _render.fmt_time(value)


def _model_rows(models: List[Model]) -> List[List[Any]]:
    return [[m.name, m.description, m.num_versions, _time(m.creation_time), _time(m.last_updated_time),
             json_text(m.metadata) if m.metadata else ""] for m in models]


_MODEL_HEADERS = ["Name", "Description", "Versions", "Created", "Last updated", "Metadata"]
# `det model list` at any width: the name (what `det model describe NAME` takes), the count and the times are never
# cut; the description is shortened, and the metadata, the creation time, then the time of the last update are left
# out (named under the table) when the terminal is too narrow for them.
_MODEL_COLUMNS = [_render.Column("Name", _render.KEY), _render.Column("Description"),
                  _render.Column("Versions", _render.NUMBER),
                  _render.Column("Created", _render.NUMBER, drop=2, align="left"),
                  _render.Column("Last updated", _render.NUMBER, drop=1, align="left"),
                  _render.Column("Metadata", drop=3)]


def _print_model(m: Model) -> None:
    """One model, a field a line: nothing of it is cut, however narrow the terminal (its versions follow)."""
    _render.fields(list(zip(_MODEL_HEADERS, _model_rows([m])[0])))


def _version_rows(versions: List[ModelVersion]) -> List[List[Any]]:
    return [[v.model_version, v.checkpoint.uuid, v.checkpoint.experiment_id, v.checkpoint.trial_id,
             v.checkpoint.batch_number, _render.metrics_text(v.checkpoint.validation_metrics)] for v in versions]


_VERSION_HEADERS = ["Version", "Checkpoint", "Experiment", "Trial", "Batch", "Validation metrics"]


def parse_metadata(text: str) -> Dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as e:
        raise errors.DeterminedError(f"--metadata is not valid JSON ({e}); give a JSON object, e.g. '{{\"k\": 1}}'") from None
    if not isinstance(value, dict):
        raise errors.DeterminedError(f"--metadata must be a JSON object like '{{\"k\": 1}}', not {text!r}")
    return value


def create(args: argparse.Namespace) -> int:
    metadata = parse_metadata(args.metadata) if args.metadata is not None else None
    m = _determined(args.master).create_model(args.name, description=args.description, metadata=metadata,
                                              workspace_name=args.workspace_name)
    if args.json:
        _render.print_json(_model_json(m))
    else:
        _render.say(f"Created model {m.name}")
    return 0


def list_models(args: argparse.Namespace) -> int:
    from determined.experimental.client import ModelSortBy, OrderBy

    names = [n.strip() for n in args.workspace_names.split(",") if n.strip()] if args.workspace_names else None
    if names:
        known = {w.name for w in _determined(args.master).list_workspaces()}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise errors.DeterminedError(f"workspace(s) {', '.join(map(repr, unknown))} not found; the workspaces "
                                         f"are: {', '.join(map(repr, sorted(known)))}")
    models = _determined(args.master).list_models(sort_by=ModelSortBy[_SORT_BY[args.sort_by]],
                                                  order_by=OrderBy[_ORDER_BY[args.order_by]],
                                                  workspace_names=names)
    if args.json:
        _render.print_json([_model_json(m) for m in models])
    else:
        _render.print_table(_MODEL_COLUMNS, _model_rows(models),
                            empty="No models in the registry yet. Add one with: det model create NAME")
    return 0


def describe(args: argparse.Namespace) -> int:
    m = _determined(args.master).get_model(args.name)
    latest = m.get_version(args.version)
    if args.json:
        out = _model_json(m)
        out["latest_version" if args.version == -1 else "version"] = _version_json(latest) if latest else None
        _render.print_json(out)
        return 0
    _print_model(m)
    if latest is not None:
        print()
        _render.table(_VERSION_HEADERS, _version_rows([latest]),
                      title="Latest version" if args.version == -1 else f"Version {latest.model_version}")
    return 0


def list_versions(args: argparse.Namespace) -> int:
    m = _determined(args.master).get_model(args.name)
    versions = m.list_versions()
    if args.json:
        _render.print_json([_version_json(c) for c in versions])
        return 0
    _print_model(m)
    print()
    _render.table(_VERSION_HEADERS, _version_rows(versions), title="Versions",
                  empty=f"No versions yet. Register a checkpoint with: det model register-version {m.name} UUID")
    return 0


def register_version(args: argparse.Namespace) -> int:
    m = _determined(args.master).get_model(args.name)
    v = m.register_version(args.uuid)
    if args.json:
        _render.print_json(_version_json(v))
    else:
        _render.say(f"Registered checkpoint {v.checkpoint.uuid} as version {v.model_version} of model {m.name}")
    return 0


def move(args: argparse.Namespace) -> int:
    m = _determined(args.master).get_model(args.name)
    m.move_to_workspace(args.workspace_name)
    _render.say(f"Moved model {m.name} to workspace {args.workspace_name}")
    return 0


def delete(args: argparse.Namespace) -> int:
    from determined.cli._args import confirm as _confirm

    m = _determined(args.master).get_model(args.name)
    if not args.yes and not _confirm(f"Delete model {m.name} and its {m.num_versions} version(s) (the checkpoints "
                                     "stay)?"):
        print("Aborted: nothing was changed.")
        return 1
    m.delete()
    _render.say(f"Deleted model {m.name}")
    return 0


def delete_version(args: argparse.Namespace) -> int:
    from determined.cli._args import confirm as _confirm

    v = _determined(args.master).get_model(args.name).get_version(args.version)
    if v is None:
        raise errors.DeterminedError(f"model {args.name} has no versions")
    if not args.yes and not _confirm(f"Delete version {v.model_version} of model {v.model_name} (its checkpoint "
                                     "stays)?"):
        print("Aborted: nothing was changed.")
        return 1
    v.delete()
    _render.say(f"Deleted version {v.model_version} of model {v.model_name}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    aliases = [] if "m" in sub.choices else ["m"]
    p = sub.add_parser("model", aliases=aliases, help="manage the model registry")
    s = p.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")

    c = s.add_parser("create", help="add a model to the registry")
    c.add_argument("name")
    c.add_argument("-w", "--workspace-name", default=None, metavar="WORKSPACE",
                   help="the workspace of the model (default: Uncategorized)")
    c.add_argument("--description", default="")
    c.add_argument("--metadata", default=None, help="a JSON object, e.g. '{\"team\": \"vision\"}'")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=create)

    ls = s.add_parser("list", aliases=["ls"], help="list the models of the registry")
    ls.add_argument("-w", "--workspace-names", default=None, metavar="WS1,WS2",
                    help="only the models of these workspaces (comma-separated names)")
    ls.add_argument("--sort-by", choices=sorted(_SORT_BY), default="last_updated_time")
    ls.add_argument("--order-by", choices=sorted(_ORDER_BY), default="asc")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=list_models)

    d = s.add_parser("describe", help="describe a model and its latest version")
    d.add_argument("name")
    d.add_argument("--json", action="store_true")
    d.add_argument("--version", type=int, default=-1, help="the version to show (default -1: the latest)")
    d.set_defaults(func=describe)

    mv = s.add_parser("move", help="move a model to a workspace")
    mv.add_argument("name")
    mv.add_argument("-w", "--workspace-name", required=True, metavar="WORKSPACE")
    mv.set_defaults(func=move)

    lv = s.add_parser("list-versions", help="list the versions of a model")
    lv.add_argument("name")
    lv.add_argument("--json", action="store_true")
    lv.set_defaults(func=list_versions)

    r = s.add_parser("register-version", help="register a checkpoint as the next version of a model")
    r.add_argument("name")
    r.add_argument("uuid", metavar="CHECKPOINT_UUID")
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=register_version)

    dl = s.add_parser("delete", help="delete a model and its versions (the checkpoints stay)")
    dl.add_argument("name")
    dl.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    dl.set_defaults(func=delete)

    dv = s.add_parser("delete-version", help="delete a version of a model (its checkpoint stays)")
    dv.add_argument("name")
    dv.add_argument("version", type=int)
    dv.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    dv.set_defaults(func=delete_version)
