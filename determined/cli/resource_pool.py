"""`det resource-pool list` (`det rp ls`): the resource pools, their slots and schedulers. Determined had no such
command (its pools were listed in the WebUI and by GET /api/v1/resource-pools); this prints what that listed.

`det rp bindings add|remove|replace POOL WORKSPACE...` and `det rp bindings list-workspaces POOL` (Determined
0.23.4+): which workspaces may use a pool (admins bind; a pool bound to workspaces is usable only from them)."""
import argparse
from typing import Any, Callable, List

from determined import errors
from determined.cli import _render


def _pools(args: argparse.Namespace) -> Any:
    from determined.cli import _lookup
    from determined.experimental.client._resource_pools import ResourcePools

    return ResourcePools(_lookup.connection(args))


def list_pools(args: argparse.Namespace) -> int:
    pools = _pools(args).list_resource_pools()
    if args.json:
        _render.print_json([p.to_json() for p in pools])
        return 0
    rows = []
    for p in pools:
        scheduler = p.scheduler_type.replace("SCHEDULER_TYPE_", "").lower()
        if scheduler == "priority":
            scheduler += f" (preemption {'on' if p.preemption else 'off'}, default {p.default_priority})"
        defaults = ", ".join(d for d, on in (("compute", p.default_compute_pool), ("aux", p.default_aux_pool)) if on)
        total = "-" if p.slots_available is None else p.slots_available
        rows.append([p.name, p.description, p.slot_type or "-", total, p.slots_used, defaults or "-", scheduler,
                     p.stats["queued_count"], p.stats["scheduled_count"]])
    _render.table(["Name", "Description", "Slot Type", "Slots", "Slots Used", "Default For", "Scheduler",
                   "Queued Jobs", "Scheduled Jobs"], rows, empty="No resource pools")
    return 0


def _bindings(args: argparse.Namespace) -> Any:
    from determined.cli import _lookup
    from determined.experimental.client._pool_bindings import PoolBindings

    return PoolBindings(_lookup.connection(args))


def _show_bindings(args: argparse.Namespace, pool: str, workspaces: List[str]) -> None:
    if args.json:
        _render.print_json({"resource_pool": pool, "workspaces": workspaces})
        return
    _render.table(["Resource Pool", "Workspaces"],
                  [[pool, ", ".join(workspaces) if workspaces else "(not bound: every workspace may use it)"]])


def list_bound_workspaces(args: argparse.Namespace) -> int:
    _show_bindings(args, args.pool_name, _bindings(args).list_workspaces(args.pool_name))
    return 0


def _change_bindings(verb: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        names = list(args.workspace_names or []) + list(args.workspace or [])
        if not names and verb != "replace":
            raise errors.DeterminedError(f"name the workspaces to {verb}: det rp bindings {verb} {args.pool_name} "
                                         "WORKSPACE [WORKSPACE ...]")
        _show_bindings(args, args.pool_name, _bindings(args).change(verb, args.pool_name, names))
        return 0

    return run


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("resource-pool", aliases=["rp"], help="the resource pools of the master")
    s = p.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    ls = s.add_parser("list", aliases=["ls"], help="the pools: slots total and used, defaults, scheduler")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=list_pools)
    b = s.add_parser("bindings", help="which workspaces may use a pool (admins change them)")
    bs = b.add_subparsers(dest="bindings_command", required=True, metavar="SUBCOMMAND")
    for verb, text in (("add", "bind the pool to these workspaces as well: only bound workspaces may use it"),
                       ("remove", "unbind these workspaces from the pool (their running jobs go on)"),
                       ("replace", "make these workspaces the pool's only ones (none: unbind it from all)")):
        c = bs.add_parser(verb, help=text)
        c.add_argument("pool_name", metavar="POOL")
        c.add_argument("workspace_names", metavar="WORKSPACE", nargs="*", help="workspace names")
        c.add_argument("--workspace", "-w", action="append", metavar="NAME", help="a workspace name (repeatable)")
        c.add_argument("--json", action="store_true", help="print JSON")
        c.set_defaults(func=_change_bindings(verb))
    lw = bs.add_parser("list-workspaces", help="the workspaces the pool is bound to")
    lw.add_argument("pool_name", metavar="POOL")
    lw.add_argument("--json", action="store_true", help="print JSON")
    lw.set_defaults(func=list_bound_workspaces)
