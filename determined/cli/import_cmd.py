"""`det import determined`: a Determined 0.20-0.38 cluster's history (its PostgreSQL database, or a pg_dump of it)
imported into this platform (admin only; docs/import.md)."""
import argparse
import sys
from typing import Any, Dict

from determined.cli import _render


def _progress_bars() -> Any:
    """A rich progress bar per table (on stderr), or None when stderr is no terminal."""
    if not sys.stderr.isatty():
        return None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description:<15}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=Console(stderr=True))


def import_determined(args: argparse.Namespace) -> int:
    from determined import errors
    from determined.experimental import _connect
    from determined.experimental.determined_import import Source, run_import
    from determined.experimental.determined_import._runner import check_admin
    from determined.experimental.determined_import._throwaway import restored

    if bool(args.db_url) == bool(args.dump):
        raise errors.DeterminedError("det import determined: give either --db-url URL or --dump FILE")
    session = _connect.Connection(args.master, local_reads=False).session
    check_admin(session)
    with (restored(args.dump) if args.dump else _nothing(args.db_url)) as url:
        source = Source(url)
        try:
            print(f"Source: Determined cluster {source.cluster_id}, schema {source.generation}"
                  + (" (dry run: nothing is written)" if args.dry_run else ""), file=sys.stderr)
            if not args.dry_run and not args.yes and sys.stdin.isatty():
                if input("Import it into this master? [y/N] ").strip().lower() not in ("y", "yes"):
                    print("Nothing imported.")
                    return 1
            bars = _progress_bars()
            tasks: Dict[str, Any] = {}

            def progress(kind: str, done: int, total: int) -> None:
                if bars is None:
                    return
                if kind not in tasks:
                    tasks[kind] = bars.add_task(kind, total=max(total, 1))
                bars.update(tasks[kind], completed=min(done, max(total, 1)) if total else 1)

            if bars is not None:
                with bars:
                    summary = run_import(session, source, dry_run=args.dry_run, logs=args.logs, progress=progress)
            else:
                summary = run_import(session, source, dry_run=args.dry_run, logs=args.logs, progress=progress)
        finally:
            source.close()
    _print_summary(summary)
    return 0


class _nothing:
    def __init__(self, value: str) -> None:
        self.value = value

    def __enter__(self) -> str:
        return self.value

    def __exit__(self, *exc: Any) -> None:
        return None


def _print_summary(summary: Any) -> None:
    verb = "Would import" if summary.dry_run else "Imported"
    rows = [[kind, c.read, c.imported, c.skipped, c.already] for kind, c in summary.counts.items()]
    _render.table(["Table", "Read", "Would import" if summary.dry_run else "Imported", "Skipped", "Already there"],
                  rows, title=f"{verb} from Determined cluster {summary.source}")
    if summary.skipped:
        print(f"\nSkipped rows ({len(summary.skipped)}):")
        _render.table(["Table", "Source id", "Reason"], [list(s) for s in summary.skipped])
    users = summary.counts.get("users")
    if users is not None and users.imported and not summary.dry_run:
        print("\nImported users have no password: an admin gives each one "
              "(det user change-password NAME) before they can log in.")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("import", help="import another cluster's history (admin only)")
    what = p.add_subparsers(dest="source_kind", required=True, metavar="SOURCE")
    d = what.add_parser("determined", help="a Determined 0.20-0.38 master's PostgreSQL database (or a pg_dump of it): "
                                           "users, workspaces, projects, experiments, trials, metrics, checkpoints, "
                                           "the model registry, trial logs")
    d.add_argument("--db-url", default=None, help="the source database, e.g. postgresql://user:pw@host/determined")
    d.add_argument("--dump", default=None, help="a pg_dump file (plain or custom format), restored into a "
                                                "throwaway PostgreSQL that the command starts and stops")
    d.add_argument("--dry-run", action="store_true", help="read and check everything, write nothing")
    d.add_argument("--logs", action="store_true", help="also import the trials' logs (task_logs)")
    d.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    d.set_defaults(func=import_determined)
