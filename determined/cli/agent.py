"""`det agent list` (`det a ls`), `det agent enable|disable [--drain] AGENT_ID|--all`, `det slot list` (`det s ls`)
and `det slot enable|disable AGENT_ID SLOT_ID`: the machines and slots the master's resource manager hands out (the
local resource manager: one agent, this machine; the Ray resource manager: each node, by its node id)."""
import argparse
from typing import Any, List

from determined import errors
from determined.cli import _render


def _pools(args: argparse.Namespace) -> Any:
    from determined.cli import _lookup
    from determined.experimental.client._resource_pools import ResourcePools

    return ResourcePools(_lookup.connection(args))


def list_agents(args: argparse.Namespace) -> int:
    agents = _pools(args).list_agents()
    if args.json:
        _render.print_json([a.to_json() for a in agents])
        return 0
    rows = [[a.id, a.slots, a.containers, ", ".join(a.resource_pools), a.enabled, a.draining, ", ".join(a.addresses)]
            for a in agents]
    _render.table(["Agent ID", "Slots", "Containers", "Resource Pool", "Enabled", "Draining", "Addresses"], rows,
                  empty="No agents: no scheduler runs on this master")
    return 0


def _show(agent: Any, what: str) -> None:
    state = "disabled, draining" if agent.draining else ("enabled" if agent.enabled else "disabled")
    print(f"{what} agent {agent.id} ({state}; {agent.containers} run(s) on it)")


def _targets(args: argparse.Namespace, pools: Any) -> List[str]:
    if args.all:
        if args.agent_id:
            raise errors.DeterminedError("give an agent id or --all, not both")
        return [a.id for a in pools.list_agents()]
    if not args.agent_id:
        raise errors.DeterminedError("give the agent's id (`det agent list`), or --all for every agent")
    return [args.agent_id]


def enable_agent(args: argparse.Namespace) -> int:
    pools = _pools(args)
    for agent_id in _targets(args, pools):
        _show(pools.enable_agent(agent_id), "Enabled")
    return 0


def disable_agent(args: argparse.Namespace) -> int:
    pools = _pools(args)
    for agent_id in _targets(args, pools):
        agent = pools.disable_agent(agent_id, drain=args.drain)
        _show(agent, "Disabled")
        if agent.containers:
            print("its runs finish there; nothing new starts on it" if args.drain
                  else "its trials checkpoint and resume from that checkpoint on another agent (this machine's: once "
                       "it is enabled again)")
    return 0


def _show_slot(agent_id: str, slot: Any, what: str) -> None:
    held = f"; run {slot.allocation_id} goes on there" if slot.allocation_id and not slot.enabled else ""
    print(f"{what} slot {slot.id} of agent {agent_id}{held}")


def enable_slot(args: argparse.Namespace) -> int:
    _show_slot(args.agent_id, _pools(args).enable_slot(args.agent_id, args.slot_id), "Enabled")
    return 0


def disable_slot(args: argparse.Namespace) -> int:
    _show_slot(args.agent_id, _pools(args).disable_slot(args.agent_id, args.slot_id), "Disabled")
    return 0


def list_slots(args: argparse.Namespace) -> int:
    pools = _pools(args)
    slots = [(a.id, s) for a in pools.list_agents() for s in pools.list_slots(a.id)]
    if args.json:
        _render.print_json([{"agent_id": agent, **s.to_json()} for agent, s in slots])
        return 0
    rows = [[agent, s.resource_pool, s.id, s.enabled, s.draining, s.allocation_id or "FREE",
             f"trial {s.trial_id} (experiment {s.experiment_id})" if s.trial_id is not None else "FREE",
             s.device_type, s.device_id] for agent, s in slots]
    _render.table(["Agent ID", "Resource Pool", "Slot ID", "Enabled", "Draining", "Allocation ID", "Task Name",
                   "Type", "Device"], rows, empty="No slots: no scheduler runs on this master")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    a = sub.add_parser("agent", aliases=["a"], help="the machines whose slots the master hands out")
    s = a.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    ls = s.add_parser("list", aliases=["ls"], help="the agents: slots, runs, pools")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=list_agents)
    en = s.add_parser("enable", help="let new runs go to the agent again (admins)")
    en.add_argument("agent_id", nargs="?", help="the agent (`det agent list`; a Ray node id or its first 8+ chars)")
    en.add_argument("--all", action="store_true", help="every agent")
    en.set_defaults(func=enable_agent)
    dis = s.add_parser("disable", help="start nothing new on the agent; its trials checkpoint and move (admins)")
    dis.add_argument("agent_id", nargs="?", help="the agent (`det agent list`; a Ray node id or its first 8+ chars)")
    dis.add_argument("--all", action="store_true", help="every agent")
    dis.add_argument("--drain", action="store_true", help="let its runs finish there instead of moving them")
    dis.set_defaults(func=disable_agent)
    sl = sub.add_parser("slot", aliases=["s"], help="the slots of the agents")
    ss = sl.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    sls = ss.add_parser("list", aliases=["ls"], help="every slot: its pool and the run holding it")
    sls.add_argument("--json", action="store_true", help="print JSON")
    sls.set_defaults(func=list_slots)
    for verb, func, words in (("enable", enable_slot, "a new run may get the slot again (admins)"),
                              ("disable", disable_slot, "no new run gets the slot; its run goes on (admins)")):
        p = ss.add_parser(verb, help=words)
        p.add_argument("agent_id", help="the agent (`det slot list`)")
        p.add_argument("slot_id", type=int, help="the slot's id on that agent (`det slot list`)")
        p.set_defaults(func=func)
