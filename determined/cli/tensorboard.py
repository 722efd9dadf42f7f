"""`det tensorboard start|list|open|logs|kill|config`: TensorBoard on experiments' metrics as a task of the master,
opened through its URL by every user who may read the experiments (docs/tasks.md); `--local`: as a process of this
machine on 127.0.0.1 (the files written here from the master's metrics), which only this machine reaches."""
import argparse
import pathlib
from typing import Any

from determined import common
from determined.cli import _render


def start_local(args: argparse.Namespace) -> int:
    from determined.master.insights import tensorboard

    from determined.experimental import _connect
    from determined.experimental.client._info import master_info

    tensorboard.require_tensorboard()
    session = _connect.read_session(args.master)  # the master's event-file writer reads the metrics through it
    info = master_info(session)
    root = tensorboard.event_root(info.get("data_dir"), pathlib.Path(common.data_dir()),
                                  info.get("url") or _connect.configured_master(args.master) or "in-process")
    logdirs = {int(e): tensorboard.fill_event_files(session, int(e), root) for e in args.experiment_ids}
    instance = tensorboard.start(common.data_dir(), logdirs, port=args.port)
    if args.json:
        _render.print_json(instance.to_json())
    else:
        print(f"TensorBoard {instance.id} for experiment(s) {', '.join(map(str, instance.experiment_ids))} "
              f"serves at {instance.url}")
        print(f"Stop it with: det tensorboard kill {instance.id}")
    return 0


def list_local(args: argparse.Namespace) -> int:
    from determined.master.insights import tensorboard

    instances = tensorboard.list_instances(common.data_dir())
    if args.json:
        _render.print_json([i.to_json() for i in instances])
        return 0
    _render.table(["ID", "URL", "Experiments", "PID", "Started", "Logdir"],
                  [[i.id, i.url, ", ".join(map(str, i.experiment_ids)), i.pid, i.start_time, i.logdir]
                   for i in instances], empty="No TensorBoard runs. Start one with: det tensorboard start EXPERIMENT_ID")
    return 0


def kill_local(args: argparse.Namespace) -> int:
    from determined.master.insights import tensorboard

    instance = tensorboard.kill(common.data_dir(), args.task_ids[0])
    print(f"Stopped TensorBoard {instance.id} ({instance.url})")
    return 0


def start(args: argparse.Namespace) -> int:
    if args.local:
        if not args.experiment_ids:
            from determined import errors

            raise errors.DeterminedError("det tensorboard start --local needs experiment ids: det tensorboard start "
                                         "--local 3 7")
        return start_local(args)
    from determined.cli import task as _task
    from determined.cli.notebook import _open

    answer = _task.launch(args, "tensorboard", _task.config_of(args), experiment_ids=list(args.experiment_ids))
    tasks, task_id = answer["_tasks"], answer["task"]["id"]
    if args.detach and not tasks.runs_master:
        return 0
    task = tasks.wait(task_id, until="STATE_RUNNING")
    if task["state"] != "STATE_RUNNING":
        print(f"TensorBoard {task_id} ended before it answered: {task.get('exitStatus')}; see det tensorboard logs "
              f"{task_id}")
        return 1
    _open(tasks, task_id, not args.no_browser, "tensorboard")
    if tasks.runs_master:
        print("This det process runs the master (none was running): TensorBoard stops when you press Ctrl-C.")
        try:
            tasks.wait(task_id)
        except KeyboardInterrupt:
            tasks.kill(task_id)
    return 0


def list_(args: argparse.Namespace) -> int:
    if args.local:
        return list_local(args)
    from determined.cli import task as _task

    return _task.list_kind(args, "tensorboard", "No TensorBoards. Start one with: det tensorboard start EXPERIMENT_ID")


def kill(args: argparse.Namespace) -> int:
    if args.local:
        return kill_local(args)
    from determined.cli import task as _task

    return _task.kill(args, "tensorboard")


def open_(args: argparse.Namespace) -> int:
    from determined.cli import task as _task
    from determined.cli.notebook import _open

    tasks = _task.tasks_of(args)
    _open(tasks, tasks.resolve(args.task_id, "tensorboard"), not args.no_browser, "tensorboard")
    return 0


def add_parser(sub: Any) -> None:
    from determined.cli import task as _task

    p = sub.add_parser("tensorboard", help="TensorBoard on the metrics of experiments")
    tsub = p.add_subparsers(dest="tensorboard_command", required=True, metavar="COMMAND")

    s = tsub.add_parser("start", help="start TensorBoard on experiments' metrics (a task of the master; --local: "
                                      "on this machine) and print its URL")
    s.add_argument("experiment_ids", type=int, nargs="+", metavar="EXPERIMENT_ID")
    _task.add_launch_args(s, template=False)
    s.add_argument("--no-browser", action="store_true", help="print the address only")
    s.add_argument("--local", action="store_true", help="run it on this machine, on 127.0.0.1, not on the master")
    s.add_argument("--port", type=int, default=None, help="with --local: the port on 127.0.0.1 (default: a free one)")
    s.add_argument("--json", action="store_true", help="with --local: print the instance as JSON")
    s.set_defaults(func=start)

    ls = tsub.add_parser("list", aliases=["ls"], help="list TensorBoards (--local: those running on this machine)")
    ls.add_argument("--local", action="store_true")
    ls.add_argument("-a", "--all", action="store_true", help="every user's, ended ones too")
    ls.add_argument("-q", "--quiet", action="store_true")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=list_)

    o = tsub.add_parser("open", help="open a TensorBoard of the master (a fresh one-time address)")
    o.add_argument("task_id", metavar="ID")
    o.add_argument("--no-browser", action="store_true")
    o.set_defaults(func=open_)

    k = tsub.add_parser("kill", help="stop TensorBoards (--local: one running on this machine)")
    k.add_argument("task_ids", nargs="+", metavar="ID")
    k.add_argument("--local", action="store_true")
    k.add_argument("-f", "--force", action="store_true", help="go on after an error")
    k.set_defaults(func=kill)

    lg = tsub.add_parser("logs", help="print a TensorBoard's logs")
    lg.add_argument("task_id", metavar="ID")
    lg.add_argument("-f", "--follow", action="store_true")
    lg.add_argument("--tail", type=int, default=None, metavar="N")
    lg.add_argument("--json", action="store_true")
    lg.set_defaults(func=lambda args: _task.logs(args, "tensorboard"))
    c = tsub.add_parser("config", help="print a TensorBoard's resolved config")
    c.add_argument("task_id", metavar="ID")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=lambda args: _task.show_config(args, "tensorboard"))
