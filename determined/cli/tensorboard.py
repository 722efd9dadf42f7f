"""`det tensorboard start|list|kill`: TensorBoard on experiments' metrics, as a local process on 127.0.0.1."""
import argparse
import pathlib
from typing import Any

from determined import common
from determined.cli import _render


def start(args: argparse.Namespace) -> int:
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


def list_(args: argparse.Namespace) -> int:
    from determined.master.insights import tensorboard

    instances = tensorboard.list_instances(common.data_dir())
    if args.json:
        _render.print_json([i.to_json() for i in instances])
        return 0
    _render.table(["ID", "URL", "Experiments", "PID", "Started", "Logdir"],
                  [[i.id, i.url, ", ".join(map(str, i.experiment_ids)), i.pid, i.start_time, i.logdir]
                   for i in instances], empty="No TensorBoard runs. Start one with: det tensorboard start EXPERIMENT_ID")
    return 0


def kill(args: argparse.Namespace) -> int:
    from determined.master.insights import tensorboard

    instance = tensorboard.kill(common.data_dir(), args.tensorboard_id)
    print(f"Stopped TensorBoard {instance.id} ({instance.url})")
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("tensorboard", help="TensorBoard on the metrics of experiments")
    tsub = p.add_subparsers(dest="tensorboard_command", required=True, metavar="COMMAND")

    s = tsub.add_parser("start", help="start TensorBoard on experiments' metrics and print its URL")
    s.add_argument("experiment_ids", type=int, nargs="+", metavar="EXPERIMENT_ID")
    s.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
    s.add_argument("--json", action="store_true", help="print the instance as JSON")
    s.set_defaults(func=start)

    ls = tsub.add_parser("list", help="list the running TensorBoard instances")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=list_)

    k = tsub.add_parser("kill", help="stop a TensorBoard instance")
    k.add_argument("tensorboard_id", metavar="TENSORBOARD_ID")
    k.set_defaults(func=kill)
