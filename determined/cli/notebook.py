"""`det notebook start|list|open|logs|kill|config`: JupyterLab on the cluster, reached through the master's
/proxy/<id>/ (docs/tasks.md)."""
import argparse
from typing import Any

from determined.cli import task as _task


def _open(tasks: Any, task_id: str, browser: bool, what: str = "notebook") -> None:
    url = tasks.open_url(task_id)
    name = "JupyterLab" if what == "notebook" else "TensorBoard"
    print(f"{name} is at {url}  (a one-time address, valid for a minute; `det {what} open {task_id}` makes "
          "another)")
    if browser:
        import webbrowser

        webbrowser.open(url)


def start(args: argparse.Namespace) -> int:
    answer = _task.launch(args, "notebook", _task.config_of(args))
    tasks, task_id = answer["_tasks"], answer["task"]["id"]
    if args.detach and not tasks.runs_master:
        return 0
    task = tasks.wait(task_id, until="STATE_RUNNING")
    if task["state"] != "STATE_RUNNING":
        print(f"Notebook {task_id} ended before it answered: {task.get('exitStatus')}; see det notebook logs "
              f"{task_id}")
        return 1
    _open(tasks, task_id, not args.no_browser)
    if tasks.runs_master:  # this process is the master: the notebook lives while it runs
        print("This det process runs the master (none was running): the notebook stops when you press Ctrl-C. "
              "Start a master with `det master up` to keep notebooks without a terminal.")
        try:
            tasks.wait(task_id)
        except KeyboardInterrupt:
            tasks.kill(task_id)
    return 0


def open_(args: argparse.Namespace) -> int:
    tasks = _task.tasks_of(args)
    task_id = tasks.resolve(args.task_id, "notebook")
    _open(tasks, task_id, not args.no_browser)
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("notebook", help="JupyterLab on the cluster, through the master")
    s = p.add_subparsers(dest="notebook_command", required=True, metavar="COMMAND")
    st = s.add_parser("start", help="start JupyterLab and open it in a browser")
    _task.add_launch_args(st)
    st.add_argument("--no-browser", action="store_true", help="print the address only")
    st.set_defaults(func=start)
    o = s.add_parser("open", help="open a running notebook (a fresh one-time address)")
    o.add_argument("task_id", metavar="ID")
    o.add_argument("--no-browser", action="store_true", help="print the address only")
    o.set_defaults(func=open_)
    _task.add_common_verbs(s, "notebook", "notebook", "No notebooks. Start one with: det notebook start")
