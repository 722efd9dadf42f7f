"""`det cmd run|list|logs|kill|config`: a command on the cluster's slots, its output in its logs (docs/tasks.md)."""
import argparse
from typing import Any

from determined.cli import task as _task


def run(args: argparse.Namespace) -> int:
    from determined import errors

    config = _task.config_of(args)
    if args.entrypoint:
        config.setdefault("entrypoint", list(args.entrypoint))
    if not config.get("entrypoint"):
        raise errors.DeterminedError("det cmd run needs a command: det cmd run 'python prep.py' (quote shell syntax)")
    answer = _task.launch(args, "command", config)
    tasks, task_id = answer["_tasks"], answer["task"]["id"]
    if args.detach and not tasks.runs_master:
        return 0
    try:
        _task.print_logs(tasks, task_id, follow=True, tail=None)
    except KeyboardInterrupt:  # as Determined: Ctrl-C stops the log stream, the command keeps running
        print(f"\nThe command keeps running. Follow it with: det cmd logs -f {task_id}; stop it with: "
              f"det cmd kill {task_id}")
        return 130
    task = tasks.get(task_id)
    code = task.get("exitCode")
    if code not in (0, None):
        print(f"Command {task_id} ended: {task.get('exitStatus')}")
        return 1
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("cmd", aliases=["command"], help="run commands on the cluster's slots")
    s = p.add_subparsers(dest="cmd_command", required=True, metavar="COMMAND")
    r = s.add_parser("run", help="run a command (one argument: through /bin/sh -c) and follow its logs")
    _task.add_launch_args(r)
    r.add_argument("entrypoint", nargs=argparse.REMAINDER, metavar="COMMAND", help="the command line")
    r.set_defaults(func=run)
    _task.add_common_verbs(s, "command", "command", "No commands. Run one with: det cmd run 'echo hi'")
