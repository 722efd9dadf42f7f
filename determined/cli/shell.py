"""`det shell start|open|list|logs|kill|config|show-ssh-command`: an SSH server on the cluster, reached through the
master (docs/tasks.md). The connection is `ssh` with `python -m determined.cli.tunnel` as its ProxyCommand and the
shell's own key, which only its owner and admins get; arguments after `--` go to ssh (`-- -L 8888:localhost:8888`)."""
import argparse
import os
import shlex
import subprocess
import sys
from typing import Any, List

from determined.cli import task as _task


def _key_file(shell_id: str, private_key: str) -> str:
    """The shell's private key at <cache>/determined/shell/<id>/key (mode 0600), as Determined keeps it."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    directory = os.path.join(base, "determined", "shell", shell_id)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = os.path.join(directory, "key")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(private_key)
    return path


def ssh_command(tasks: Any, shell_id: str, ssh_args: List[str], *, tty: bool) -> List[str]:
    from determined import errors

    shell = tasks._session.get(f"/shells/{shell_id}")
    if not shell.get("privateKey"):
        raise errors.DeterminedError(f"shell {shell_id} is not yours (or has ended): only its owner or an admin may "
                                     "connect to it")
    key = _key_file(shell_id, shell["privateKey"])
    master = tasks._session.master
    user = tasks._session.username() if hasattr(tasks._session, "username") else shell["task"]["username"]
    proxy = f"{shlex.quote(sys.executable)} -m determined.cli.tunnel {shlex.quote(master)} %h --user {shlex.quote(user)}"
    return (["ssh", "-o", f"ProxyCommand={proxy}", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
             "-o", "LogLevel=ERROR", "-o", "IdentitiesOnly=yes", "-i", key] + (["-tt"] if tty else [])
            + [f"{shell['task']['username']}@{shell_id}", *ssh_args])


def _connect(tasks: Any, shell_id: str, ssh_args: List[str], show: bool) -> int:
    argv = ssh_command(tasks, shell_id, ssh_args, tty=not ssh_args)
    if show:
        print(shlex.join(argv))
    code = subprocess.call(argv)
    print(f"To reconnect, run: det shell open {shell_id}", file=sys.stderr)
    return code


def _ssh_args(args: argparse.Namespace) -> List[str]:
    extra = list(args.ssh_opts or [])
    return extra[1:] if extra[:1] == ["--"] else extra


def start(args: argparse.Namespace) -> int:
    answer = _task.launch(args, "shell", _task.config_of(args))
    tasks, shell_id = answer["_tasks"], answer["task"]["id"]
    if args.detach and not tasks.runs_master:
        return 0
    task = tasks.wait(shell_id, until="STATE_RUNNING")
    if task["state"] != "STATE_RUNNING":
        print(f"Shell {shell_id} ended before it answered: {task.get('exitStatus')}; see det shell logs {shell_id}")
        return 1
    if args.detach:
        return 0
    return _connect(tasks, shell_id, _ssh_args(args), args.show_ssh_command)


def open_(args: argparse.Namespace) -> int:
    tasks = _task.tasks_of(args)
    return _connect(tasks, tasks.resolve(args.task_id, "shell"), _ssh_args(args), args.show_ssh_command)


def show_ssh_command(args: argparse.Namespace) -> int:
    tasks = _task.tasks_of(args)
    print(shlex.join(ssh_command(tasks, tasks.resolve(args.task_id, "shell"), _ssh_args(args), tty=False)))
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("shell", help="an SSH server on the cluster, through the master")
    s = p.add_subparsers(dest="shell_command", required=True, metavar="COMMAND")
    st = s.add_parser("start", help="start a shell and connect to it with ssh")
    _task.add_launch_args(st)
    st.add_argument("--show-ssh-command", action="store_true", help="print the ssh command line, then connect")
    st.add_argument("ssh_opts", nargs=argparse.REMAINDER, metavar="-- SSH_ARGS", help="arguments for ssh")
    st.set_defaults(func=start)
    o = s.add_parser("open", help="connect to a running shell with ssh")
    o.add_argument("task_id", metavar="ID")
    o.add_argument("--show-ssh-command", action="store_true")
    o.add_argument("ssh_opts", nargs=argparse.REMAINDER, metavar="-- SSH_ARGS")
    o.set_defaults(func=open_)
    sh = s.add_parser("show-ssh-command", aliases=["show_ssh_command"],
                      help="print the ssh command line of a shell (for VS Code's Remote-SSH, scp, port forwards)")
    sh.add_argument("task_id", metavar="ID")
    sh.add_argument("ssh_opts", nargs=argparse.REMAINDER, metavar="-- SSH_ARGS")
    sh.set_defaults(func=show_ssh_command)
    _task.add_common_verbs(s, "shell", "shell", "No shells. Start one with: det shell start")
