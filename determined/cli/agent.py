"""`det agent list` (`det a ls`), `det agent enable|disable [--drain] AGENT_ID` and `det slot list` (`det s ls`): the
machines and slots the master's resource manager hands out (the local resource manager: one agent, this machine; the
Ray resource manager: each node, by its node id)."""
import argparse
from typing import Any

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


def enable_agent(args: argparse.Namespace) -> int:
    _show(_pools(args).enable_agent(args.agent_id), "Enabled")
    return 0


def disable_agent(args: argparse.Namespace) -> int:
    agent = _pools(args).disable_agent(args.agent_id, drain=args.drain)
    _show(agent, "Disabled")
    if agent.containers:
        print("its runs finish there; nothing new starts on it" if args.drain
              else "its trials checkpoint and resume from that checkpoint on other agents")
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
    en.add_argument("agent_id", help="the agent (`det agent list`; a Ray node id or its first 8+ characters)")
    en.set_defaults(func=enable_agent)
    dis = s.add_parser("disable", help="start nothing new on the agent; its trials checkpoint and move (admins)")
    dis.add_argument("agent_id", help="the agent (`det agent list`; a Ray node id or its first 8+ characters)")
    dis.add_argument("--drain", action="store_true", help="let its runs finish there instead of moving them")
    dis.set_defaults(func=disable_agent)
    sl = sub.add_parser("slot", aliases=["s"], help="the slots of the agents")
    ss = sl.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    sls = ss.add_parser("list", aliases=["ls"], help="every slot: its pool and the run holding it")
    sls.add_argument("--json", action="store_true", help="print JSON")
    sls.set_defaults(func=list_slots)
