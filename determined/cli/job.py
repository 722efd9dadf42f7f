"""`det job list|update` (`det j ls`): the job queue of the master's resource pools (Determined 0.38)."""
import argparse
import sys
from typing import Any

from determined.cli import _render

REMOVED_MOVES = ("--ahead-of/--behind-of were deprecated in Determined 0.33 and removed in 0.35 (change the priority "
                 "instead); this master keeps their 0.34 meaning")


def _jobs(args: argparse.Namespace) -> Any:
    from determined.cli import _lookup
    from determined.experimental.client._jobs import Jobs

    return Jobs(_lookup.connection(args))


def _pools(args: argparse.Namespace) -> Any:
    from determined.cli import _lookup
    from determined.experimental.client._resource_pools import ResourcePools

    return ResourcePools(_lookup.connection(args)).list_resource_pools()


def list_jobs(args: argparse.Namespace) -> int:
    jobs = _jobs(args).list_jobs(args.resource_pool, reverse=args.reverse, offset=args.offset, limit=args.limit)
    if args.json:
        _render.print_json([j.to_json() for j in jobs])
        return 0
    # Determined shows a Weight column for a fair_share pool, a Priority column otherwise.
    pools = _pools(args)
    pool = args.resource_pool or next((p.name for p in pools if p.default_compute_pool), "default")
    weights = any(p.name == pool and p.scheduler_type == "SCHEDULER_TYPE_FAIR_SHARE" for p in pools)
    rows = []
    for j in jobs:
        name = f"{j.name} ({j.entity_id})" if j.type == "TYPE_EXPERIMENT" else j.name
        rows.append([j.jobs_ahead if j.state == "STATE_QUEUED" else "N/A", j.job_id, j.type.replace("TYPE_", ""),
                     name, j.weight if weights else j.priority, (j.submission_time or "")[:19].replace("T", " "),
                     f"{j.allocated_slots}/{j.requested_slots}", j.state.replace("STATE_", ""), j.username,
                     j.resource_pool])
    _render.table(["#", "ID", "Type", "Job Name", "Weight" if weights else "Priority", "Submitted (UTC)",
                   "Slots (acquired/needed)", "State", "User", "Resource Pool"], rows,
                  empty="No jobs in the queue" + (f" of pool {args.resource_pool}" if args.resource_pool else ""))
    return 0


def update(args: argparse.Namespace) -> int:
    if args.ahead_of is not None or args.behind_of is not None:
        print(f"Note: {REMOVED_MOVES}.", file=sys.stderr)
    job = _jobs(args).update_job(args.job_id, priority=args.priority, weight=args.weight,
                                 resource_pool=args.resource_pool, ahead_of=args.ahead_of, behind_of=args.behind_of)
    print(f"Updated job {job.job_id} ({job.name}): priority {job.priority}, weight {job.weight}, pool "
          f"{job.resource_pool}, {job.jobs_ahead} job(s) ahead")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("job", aliases=["j"], help="the job queue: list it, change a job's priority or place")
    s = p.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    ls = s.add_parser("list", aliases=["ls"], help="the queued and scheduled jobs, in scheduling order")
    ls.add_argument("-p", "-rp", "--resource-pool", dest="resource_pool", default=None,
                    help="only the jobs of this pool (default: every pool)")
    ls.add_argument("--offset", type=int, default=0, help="skip this many jobs")
    ls.add_argument("--limit", type=int, default=100, help="show at most this many jobs (up to 1000)")
    ls.add_argument("--reverse", action="store_true", help="the last job first")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=list_jobs)
    u = s.add_parser("update", help="change one thing of a job: its priority, weight, pool or place in the queue")
    u.add_argument("job_id", metavar="JOB_ID", help="a job id from `det job list`")
    g = u.add_mutually_exclusive_group(required=True)
    g.add_argument("-p", "--priority", type=int, help="1 (runs first) to 99; the default is 42")
    g.add_argument("-w", "--weight", type=float, help="its share of the pool's slots under fair_share")
    g.add_argument("--resource-pool", dest="resource_pool", help="move an experiment to this pool")
    g.add_argument("--ahead-of", dest="ahead_of", metavar="JOB_ID",
                   help="place it just before this job (Determined <= 0.34; takes that job's priority)")
    g.add_argument("--behind-of", dest="behind_of", metavar="JOB_ID",
                   help="place it just after this job (Determined <= 0.34; takes that job's priority)")
    u.set_defaults(func=update)
