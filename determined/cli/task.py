"""`det task list|logs`, and what `det cmd`, `det notebook` and `det tensorboard` share: the launch flags
(--config-file, --config KEY=VALUE, --context, --template, -w, --detach), the list table, logs, kill, config."""
import argparse
import sys
from typing import Any, Dict, List, Optional

from determined.cli import _render


def tasks_of(args: argparse.Namespace) -> Any:
    """The task functions of the client SDK on the command's master."""
    from determined.cli import _lookup
    from determined.experimental.client._task import Tasks

    return Tasks(_lookup.connection(args))


# ---------------------------------------------------------------- the config of a launch


def _parse_value(text: str) -> Any:
    import yaml

    if text[:1] in ("[", "{"):
        return yaml.safe_load(text)
    if "," in text:
        return [yaml.safe_load(part) for part in text.split(",")]
    return yaml.safe_load(text) if text else ""


def config_of(args: argparse.Namespace) -> Dict[str, Any]:
    """--config-file, then each --config KEY=VALUE over it (dotted keys nest), as Determined's CLI merges them."""
    from determined import config as det_config
    from determined import errors

    config: Dict[str, Any] = {}
    if getattr(args, "config_file", None):
        text = det_config.read_config_file(args.config_file, header="cannot read the task config file")
        loaded = det_config.load_config_text(text, args.config_file, "cannot read the task config file")
        if loaded is not None and not isinstance(loaded, dict):
            raise errors.DeterminedError(f"{args.config_file}: a task config is a mapping of fields (docs/tasks.md)")
        config = dict(loaded or {})
    for item in getattr(args, "config", None) or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise errors.DeterminedError(f"--config {item!r}: expected KEY=VALUE, e.g. --config resources.slots=0")
        node = config
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {}) if isinstance(node.get(part), dict) or part not in node else node[part]
            if not isinstance(node, dict):
                raise errors.DeterminedError(f"--config {key}: {part} is not a mapping in the config")
        parsed = _parse_value(value)
        if parts[-1] == "bind_mounts" and isinstance(parsed, dict):
            parsed = [parsed]
        node[parts[-1]] = parsed
    return config


def add_launch_args(p: argparse.ArgumentParser, *, template: bool = True) -> None:
    p.add_argument("--config-file", default=None, metavar="FILE", help="a YAML task config (docs/tasks.md)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="a config field over the file's, dotted keys nest (repeatable): --config resources.slots=0")
    p.add_argument("-c", "--context", default=None, metavar="DIR",
                   help="copy DIR's contents into the task's working directory (startup-hook.sh runs first)")
    if template:
        p.add_argument("--template", default=None, help="a config template (det template) merged under the config")
    p.add_argument("-w", "--workspace-name", default=None, help="launch into this workspace (default Uncategorized)")
    p.add_argument("-d", "--detach", action="store_true", help="print only the new task's id and exit")


def launch(args: argparse.Namespace, kind: str, config: Dict[str, Any], **kwargs: Any) -> Dict[str, Any]:
    tasks = tasks_of(args)
    answer = tasks.launch(kind, config, context_dir=args.context, template=getattr(args, "template", None),
                          workspace=args.workspace_name, **kwargs)
    task = answer["task"]
    if args.detach:
        print(task["id"])
    else:
        print(f"Launched {kind} (id: {task['id']}, name: {task['description']}).")
    for warning in answer["warnings"]:
        print(f"Warning: {warning}", file=sys.stderr)
    answer["_tasks"] = tasks
    return answer


# ---------------------------------------------------------------- list, logs, kill, config


def _age(task: Dict[str, Any]) -> str:
    return (task.get("startTime") or task.get("registeredTime") or "")[:19].replace("T", " ")


def render_list(tasks: List[Dict[str, Any]], args: argparse.Namespace, empty: str) -> None:
    if getattr(args, "quiet", False):
        for t in tasks:
            print(t["id"])
        return
    if getattr(args, "json", False):
        _render.print_json(tasks)
        return
    _render.table(["ID", "Type", "Owner", "Description", "State", "Exit status", "Slots", "Resource pool", "Started"],
                  [[t["id"], t["type"], t["username"], t["description"], t["state"].replace("STATE_", ""),
                    t.get("exitStatus") or "", t["slots"], t["resourcePool"], _age(t)] for t in tasks], empty=empty)


def list_kind(args: argparse.Namespace, kind: Optional[str], empty: str) -> int:
    tasks = tasks_of(args)
    users = None
    if not getattr(args, "all", False) and hasattr(tasks._session, "username"):  # the user the session acts as
        users = [tasks._session.username()]
    render_list(tasks.list(kind, users=users, active=not getattr(args, "all", False) and kind is None), args, empty)
    return 0


def print_logs(tasks: Any, task_id: str, *, follow: bool, tail: Optional[int], as_json: bool = False) -> None:
    from determined.common.formats import escape_control

    for line in tasks.logs(task_id, follow=follow, tail=tail):
        if as_json:
            _render.print_json(line)
        else:
            prefix = "[master] " if line["stream"] == "master" else ""
            print(prefix + escape_control(line["message"]), flush=True)


def logs(args: argparse.Namespace, kind: Optional[str] = None) -> int:
    tasks = tasks_of(args)
    task_id = tasks.resolve(args.task_id, kind)
    print_logs(tasks, task_id, follow=args.follow, tail=args.tail, as_json=getattr(args, "json", False))
    if not args.follow:
        return 0
    task = tasks.get(task_id)
    return 0 if task.get("exitCode") in (0, None) else 1


def kill(args: argparse.Namespace, kind: Optional[str] = None) -> int:
    from determined import errors

    tasks = tasks_of(args)
    for i, prefix in enumerate(args.task_ids):
        try:
            task = tasks.kill(tasks.resolve(prefix, kind))
            print(f"Killed {task['type'].lower()} {task['id']} ({task['state'].replace('STATE_', '')})")
        except errors.DeterminedError as e:
            if not args.force:
                for skipped in args.task_ids[i + 1:]:
                    print(f"Cowardly not killing {skipped}", file=sys.stderr)
                raise
            print(f"Error: {e}", file=sys.stderr)
    return 0


def show_config(args: argparse.Namespace, kind: Optional[str] = None) -> int:
    import yaml

    tasks = tasks_of(args)
    config = tasks.config(tasks.resolve(args.task_id, kind))
    if getattr(args, "json", False):
        _render.print_json(config)
    else:
        sys.stdout.write(yaml.safe_dump(config, sort_keys=False))
    return 0


def add_common_verbs(s: Any, kind: Optional[str], noun: str, empty: str) -> None:
    """list, logs, kill and config of one kind of task."""
    ls = s.add_parser("list", aliases=["ls"], help=f"list {noun}s (yours; -a: everyone's)")
    ls.add_argument("-a", "--all", action="store_true", help="every user's, ended ones too")
    ls.add_argument("-q", "--quiet", action="store_true", help="only the ids")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=lambda args: list_kind(args, kind, empty))
    lg = s.add_parser("logs", help=f"print a {noun}'s logs")
    lg.add_argument("task_id", metavar="ID", help="its id, or a unique prefix of it")
    lg.add_argument("-f", "--follow", action="store_true", help="keep printing until it ends")
    lg.add_argument("--tail", type=int, default=None, metavar="N", help="only the last N lines")
    lg.add_argument("--json", action="store_true")
    lg.set_defaults(func=lambda args: logs(args, kind))
    k = s.add_parser("kill", help=f"kill {noun}s (yours, or any as an admin)")
    k.add_argument("task_ids", nargs="+", metavar="ID")
    k.add_argument("-f", "--force", action="store_true", help="go on after an error")
    k.set_defaults(func=lambda args: kill(args, kind))
    c = s.add_parser("config", help=f"print a {noun}'s resolved config")
    c.add_argument("task_id", metavar="ID")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=lambda args: show_config(args, kind))


def add_parser(sub: Any) -> None:
    p = sub.add_parser("task", help="interactive tasks of every type: commands, notebooks, TensorBoards")
    s = p.add_subparsers(dest="task_command", required=True, metavar="COMMAND")
    ls = s.add_parser("list", aliases=["ls"], help="the tasks that have not ended (-a: ended ones too)")
    ls.add_argument("-a", "--all", action="store_true", help="every task, ended ones too")
    ls.add_argument("-q", "--quiet", action="store_true")
    ls.add_argument("--json", action="store_true")

    def list_all(args: argparse.Namespace) -> int:
        tasks = tasks_of(args)
        render_list(tasks.list(None, active=not args.all), args, "No tasks. Start one with: det cmd run 'echo hi'")
        return 0

    ls.set_defaults(func=list_all)
    lg = s.add_parser("logs", help="print a task's logs")
    lg.add_argument("task_id", metavar="TASK_ID")
    lg.add_argument("-f", "--follow", action="store_true")
    lg.add_argument("--tail", type=int, default=None, metavar="N")
    lg.add_argument("--json", action="store_true")
    lg.set_defaults(func=logs)
