"""`det workspace|w ...` and `det project|p ...`: workspaces and their projects; `det experiment move`."""
import argparse
from typing import Any, Dict, List

from determined import errors
from determined.cli import _args, _lookup, _render

Workspace = Project = Any  # determined.experimental.client's, imported when a command runs


def _confirmed(args: argparse.Namespace, question: str) -> bool:
    """--yes, or the user answers yes (else "Nothing deleted.")."""
    if args.yes or _args.confirm(question):
        return True
    print("Nothing deleted.")
    return False


# ---------------------------------------------------------------- workspaces


def _workspace_json(w: Workspace) -> Dict[str, Any]:
    return {"id": w.id, "name": w.name, "archived": w.archived, "username": w.username, "immutable": w.immutable}


_WORKSPACE_HEADERS = ["ID", "Name", "Owner", "Archived"]


def _workspace_rows(workspaces: List[Workspace]) -> List[List[Any]]:
    return [[w.id, w.name, w.username or "", "yes" if w.archived else ""] for w in workspaces]


def _show_workspaces(args: argparse.Namespace, workspaces: List[Workspace]) -> None:
    if args.json:
        _render.print_json([_workspace_json(w) for w in workspaces])
    else:
        _render.table(_WORKSPACE_HEADERS, _workspace_rows(workspaces))


def _ordered(args: argparse.Namespace, items: List[Any], key: Any = None) -> List[Any]:
    """`items` sorted by `--sort-by` (id or name) in `--order-by` order, then paged by `--offset` and `--limit`
    (Determined 0.38's flags); `key` reads a field of an item (default: its attribute)."""
    key = key or getattr
    field = getattr(args, "sort_by", "id")
    items = sorted(items, key=lambda x: (str(key(x, field)).lower() if field == "name" else key(x, field),
                                         key(x, "id")), reverse=getattr(args, "order_by", "asc") == "desc")
    offset, limit = getattr(args, "offset", None), getattr(args, "limit", None)
    if offset is not None and offset < 0 or limit is not None and limit < 0:
        raise errors.DeterminedError("--offset and --limit must not be negative")
    items = items[offset or 0:]
    return items[:limit] if limit is not None else items


def _add_order_arguments(parser: argparse.ArgumentParser, pages: bool = False) -> None:
    parser.add_argument("--sort-by", choices=["id", "name"], default="id", help="sort by this field (default id)")
    parser.add_argument("--order-by", choices=["asc", "desc"], default="asc", help="ascending (default) or descending")
    if pages:
        parser.add_argument("--limit", type=int, default=200, help="show at most this many (default 200)")
        parser.add_argument("--offset", type=int, default=None, help="skip this many first")


def list_workspaces(args: argparse.Namespace) -> int:
    _show_workspaces(args, _ordered(args, _lookup.client(args).list_workspaces()))
    return 0


def create_workspace(args: argparse.Namespace) -> int:
    w = _lookup.client(args).create_workspace(args.name, default_compute_pool=args.default_compute_pool,
                                              default_aux_pool=args.default_aux_pool)
    if args.json:
        _render.print_json(_workspace_json(w))
    else:
        _render.say(f"Created workspace {w.name} (id {w.id})")
    return 0


def describe_workspace(args: argparse.Namespace) -> int:
    w = _lookup.client(args).get_workspace(args.name)
    projects = w.list_projects()
    if args.json:
        _render.print_json({**_workspace_json(w), "projects": [_project_json(p) for p in projects]})
        return 0
    _render.table(_WORKSPACE_HEADERS, _workspace_rows([w]))
    print()
    _render.table(_PROJECT_HEADERS, _project_rows(projects), title="Projects",
                  empty=f"No projects yet. Create one with: det project create {w.name} NAME")
    return 0


def edit_workspace(args: argparse.Namespace) -> int:
    if args.new_name is None and args.default_compute_pool is None and args.default_aux_pool is None:
        raise errors.DeterminedError("give what to change: --name NEW_NAME, --default-compute-pool POOL and/or "
                                     "--default-aux-pool POOL (\"\" for the cluster's default)")
    w = _lookup.client(args).get_workspace(args.name)
    if args.default_compute_pool is not None or args.default_aux_pool is not None:
        from determined.experimental.client._pool_bindings import PoolBindings

        pools = PoolBindings(_lookup.connection(args)).set_default_pools(
            args.name, compute=args.default_compute_pool, aux=args.default_aux_pool)
        if not args.json:
            _render.say(f"Workspace {args.name}: default compute pool {pools.default_compute_pool}, default aux pool "
                        f"{pools.default_aux_pool}")
    if args.new_name is not None:
        w.set_name(args.new_name)
        if not args.json:
            _render.say(f"Renamed workspace {args.name} to {w.name}")
    if args.json:
        w.reload()
        _render.print_json(_workspace_json(w))
    return 0


def list_workspace_pools(args: argparse.Namespace) -> int:
    from determined.experimental.client._pool_bindings import PoolBindings

    pools = PoolBindings(_lookup.connection(args)).workspace_pools(args.name)
    if args.json:
        _render.print_json(pools.to_json())
        return 0
    _render.table(["Workspace", "Available Resource Pools", "Default Compute Pool", "Default Aux Pool"],
                  [[pools.workspace_name, ", ".join(pools.resource_pools), pools.default_compute_pool,
                    pools.default_aux_pool]])
    return 0


def _archive_workspace(archived: bool) -> Any:
    def run(args: argparse.Namespace) -> int:
        w = _lookup.client(args).get_workspace(args.name)
        w.archive() if archived else w.unarchive()
        _render.say(f"{'Archived' if archived else 'Unarchived'} workspace {w.name}")
        return 0

    return run


def delete_workspace(args: argparse.Namespace) -> int:
    d = _lookup.client(args)
    w = d.get_workspace(args.name)
    if not _confirmed(args, f"Delete workspace {w.name} and its (empty) projects?"):
        return 1
    d.delete_workspace(args.name)
    _render.say(f"Deleted workspace {w.name}")
    return 0


def list_workspace_projects(args: argparse.Namespace) -> int:
    _show_projects(args, _ordered(args, _lookup.client(args).get_workspace(args.name).list_projects()))
    return 0


# ---------------------------------------------------------------- projects


def _project_json(p: Project) -> Dict[str, Any]:
    return {"id": p.id, "name": p.name, "description": p.description, "workspace_id": p.workspace_id,
            "archived": p.archived, "username": p.username, "n_experiments": p.n_experiments,
            "n_active_experiments": p.n_active_experiments, "immutable": p.immutable}


_PROJECT_HEADERS = ["ID", "Name", "Description", "Owner", "Experiments", "Active", "Archived"]


def _project_rows(projects: List[Project]) -> List[List[Any]]:
    return [[p.id, p.name, p.description or "", p.username or "", p.n_experiments, p.n_active_experiments,
             "yes" if p.archived else ""] for p in projects]


def _show_projects(args: argparse.Namespace, projects: List[Project]) -> None:
    if args.json:
        _render.print_json([_project_json(p) for p in projects])
    else:
        _render.table(_PROJECT_HEADERS, _project_rows(projects))


def _project(args: argparse.Namespace) -> Project:
    return _lookup.client(args).get_workspace(args.workspace_name).get_project(args.project_name)


def create_project(args: argparse.Namespace) -> int:
    p = _lookup.client(args).get_workspace(args.workspace_name).create_project(args.name, args.description)
    if args.json:
        _render.print_json(_project_json(p))
    else:
        _render.say(f"Created project {p.name} (id {p.id}) in workspace {args.workspace_name}")
    return 0


def describe_project(args: argparse.Namespace) -> int:
    p = _project(args)
    experiments = _experiments_of(args, p)
    if args.json:
        _render.print_json({**_project_json(p), "experiments": experiments})
        return 0
    _render.table(_PROJECT_HEADERS, _project_rows([p]))
    print()
    _show_experiment_table(experiments, p, args)
    return 0


def _experiments_of(args: argparse.Namespace, p: Project) -> List[Dict[str, Any]]:
    rows = [e.to_json() for e in p.list_experiments()]
    rows = [e for e in rows if getattr(args, "all", True) or not e.get("archived")]
    return _ordered(args, rows, key=lambda e, field: e.get(field))


def _show_experiment_table(experiments: List[Dict[str, Any]], p: Project, args: argparse.Namespace) -> None:
    rows = [[e["id"], e["name"], e["state"], e["owner"], e["num_trials"], "yes" if e["archived"] else ""]
            for e in experiments]
    _render.table(["ID", "Name", "State", "Owner", "Trials", "Archived"], rows, title="Experiments",
                  empty=f"No experiments. Move one here with: det experiment move ID {args.workspace_name} {p.name}")


def list_project_experiments(args: argparse.Namespace) -> int:
    p = _project(args)
    experiments = _experiments_of(args, p)
    if args.json:
        _render.print_json(experiments)
    else:
        _show_experiment_table(experiments, p, args)
    return 0


def edit_project(args: argparse.Namespace) -> int:
    if args.new_name is None and args.description is None:
        raise errors.DeterminedError("give --name NEW and/or --description TEXT")
    p = _project(args)
    if args.new_name is not None:
        p.set_name(args.new_name)
    if args.description is not None:
        p.set_description(args.description)
    if getattr(args, "json", False):
        _render.print_json(_project_json(p))
    else:
        _render.say(f"Updated project {p.name} of workspace {args.workspace_name}")
    return 0


def _archive_project(archived: bool) -> Any:
    def run(args: argparse.Namespace) -> int:
        p = _project(args)
        p.archive() if archived else p.unarchive()
        _render.say(f"{'Archived' if archived else 'Unarchived'} project {p.name} of workspace {args.workspace_name}")
        return 0

    return run


def delete_project(args: argparse.Namespace) -> int:
    w = _lookup.client(args).get_workspace(args.workspace_name)
    p = w.get_project(args.project_name)
    if not _confirmed(args, f"Delete project {p.name} of workspace {w.name}?"):
        return 1
    w.delete_project(p.name)
    _render.say(f"Deleted project {p.name} of workspace {w.name}")
    return 0


# ---------------------------------------------------------------- experiments


def move_experiment(args: argparse.Namespace) -> int:
    """`det experiment move ID WORKSPACE PROJECT`."""
    _lookup.experiment(args).move_to_project(args.workspace_name, args.project_name)
    _render.say(f"Moved experiment {args.experiment_id} to project {args.project_name} of workspace "
                f"{args.workspace_name}")
    return 0


def add_move_parser(s: argparse._SubParsersAction) -> None:
    """`move` under `det experiment`."""
    m = s.add_parser("move", help="move an experiment to a project (of a workspace)")
    m.add_argument("experiment_id", type=int)
    m.add_argument("workspace_name")
    m.add_argument("project_name")
    m.set_defaults(func=move_experiment)


def project_target(args: argparse.Namespace, raw: Dict[str, Any]) -> Dict[str, Any]:
    """The config of `det experiment create` with `--project_id N` or `--project WORKSPACE/PROJECT` applied (as its
    `workspace` and `project`, which the master resolves)."""
    if args.project_id is not None and args.project is not None:
        raise errors.DeterminedError("give --project_id or --project, not both")
    if args.project is not None:
        workspace_name, sep, project_name = args.project.partition("/")
        if not sep or not workspace_name or not project_name:
            raise errors.DeterminedError(f"--project {args.project!r}: write it as WORKSPACE/PROJECT (names), e.g. "
                                         "--project Uncategorized/Uncategorized, or give --project_id N")
        return {**raw, "workspace": workspace_name, "project": project_name}
    if args.project_id is not None:
        p = _lookup.client(args).get_project(args.project_id)
        return {**raw, "workspace": p.get_workspace().name, "project": p.name}
    return raw


def add_create_arguments(c: argparse.ArgumentParser) -> None:
    """`--project_id` and `--project` of `det experiment create`."""
    c.add_argument("--project_id", "--project-id", dest="project_id", type=int, default=None, metavar="N",
                   help="create the experiment in the project with this id (default: the config's workspace and "
                        "project, else Uncategorized)")
    c.add_argument("--project", default=None, metavar="WORKSPACE/PROJECT",
                   help="create the experiment in this project of this workspace (names)")


# ---------------------------------------------------------------- parsers


def _add_default_pool_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--default-compute-pool", dest="default_compute_pool", default=None, metavar="POOL",
                        help="the pool of its jobs with slots that name none (admins; \"\": the cluster's default)")
    parser.add_argument("--default-aux-pool", dest="default_aux_pool", default=None, metavar="POOL",
                        help="the pool of its zero-slot jobs that name none (admins; \"\": the cluster's default)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("workspace", aliases=["w"], help="manage workspaces (groups of projects)")
    s = p.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    ls = s.add_parser("list", aliases=["ls"], help="list the workspaces")
    _add_order_arguments(ls, pages=True)
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=list_workspaces)
    lp = s.add_parser("list-projects", help="list the projects of a workspace")
    lp.add_argument("name", metavar="WORKSPACE")
    _add_order_arguments(lp, pages=True)
    lp.add_argument("--json", action="store_true")
    lp.set_defaults(func=list_workspace_projects)
    c = s.add_parser("create", help="create a workspace")
    c.add_argument("name")
    _add_default_pool_arguments(c)
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=create_workspace)
    d = s.add_parser("describe", help="describe a workspace and list its projects")
    d.add_argument("name")
    d.add_argument("--json", action="store_true")
    d.set_defaults(func=describe_workspace)
    e = s.add_parser("edit", help="rename a workspace or set its default resource pools")
    e.add_argument("name")
    e.add_argument("--name", dest="new_name", default=None, metavar="NEW_NAME")
    _add_default_pool_arguments(e)
    e.add_argument("--json", action="store_true")
    e.set_defaults(func=edit_workspace)
    lpools = s.add_parser("list-pools", help="the resource pools a workspace may use, and its default pools")
    lpools.add_argument("name", metavar="WORKSPACE")
    lpools.add_argument("--json", action="store_true")
    lpools.set_defaults(func=list_workspace_pools)
    for verb, archived in (("archive", True), ("unarchive", False)):
        a = s.add_parser(verb, help=f"{verb} a workspace" + (" (it takes no new projects or experiments)"
                                                              if archived else ""))
        a.add_argument("name")
        a.set_defaults(func=_archive_workspace(archived))
    rm = s.add_parser("delete", help="delete a workspace that holds no experiments or models")
    rm.add_argument("name")
    rm.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    rm.set_defaults(func=delete_workspace)

    p = sub.add_parser("project", aliases=["p"], help="manage projects (groups of experiments in a workspace)")
    s = p.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    ls = s.add_parser("list", aliases=["ls"], help="list the projects of a workspace")
    ls.add_argument("name", metavar="WORKSPACE")
    _add_order_arguments(ls)
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=list_workspace_projects)
    le = s.add_parser("list-experiments", help="list the experiments of a project")
    le.add_argument("workspace_name")
    le.add_argument("project_name")
    le.add_argument("-a", "--all", action="store_true", help="include archived experiments")
    _add_order_arguments(le)
    le.add_argument("--json", action="store_true")
    le.set_defaults(func=list_project_experiments)
    c = s.add_parser("create", help="create a project in a workspace")
    c.add_argument("workspace_name")
    c.add_argument("name")
    c.add_argument("--description", default="")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=create_project)
    d = s.add_parser("describe", help="describe a project and list its experiments")
    d.add_argument("workspace_name")
    d.add_argument("project_name")
    d.add_argument("-a", "--all", action="store_true", help="include archived experiments")
    d.add_argument("--json", action="store_true")
    d.set_defaults(func=describe_project)
    e = s.add_parser("edit", help="rename a project or change its description")
    e.add_argument("workspace_name")
    e.add_argument("project_name")
    e.add_argument("--name", "--new_name", "--new-name", dest="new_name", default=None, metavar="NEW_NAME")
    e.add_argument("--description", default=None)
    e.add_argument("--json", action="store_true")
    e.set_defaults(func=edit_project)
    for verb, archived in (("archive", True), ("unarchive", False)):
        a = s.add_parser(verb, help=f"{verb} a project" + (" (it takes no new experiments)" if archived else ""))
        a.add_argument("workspace_name")
        a.add_argument("project_name")
        a.set_defaults(func=_archive_project(archived))
    rm = s.add_parser("delete", help="delete a project that holds no experiments")
    rm.add_argument("workspace_name")
    rm.add_argument("project_name")
    rm.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    rm.set_defaults(func=delete_project)
