"""`det user ...`: log in and out, and manage the master's users."""
import argparse
import os
import sys
from typing import Any

from determined import errors
from determined.cli import _lookup, _render


def _session(args: argparse.Namespace) -> Any:
    from determined.experimental import _connect

    return _connect.read_session(args.master)


def _read_password(prompt: str, *, confirm: bool = False) -> str:
    """Ask on the terminal (hidden); without a terminal, read one line from stdin (for scripts and tests)."""
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\r\n")
    import getpass  # only here: every `det` command imports this module to build its parser

    password = getpass.getpass(prompt)
    if confirm and getpass.getpass("Confirm password: ") != password:
        raise errors.DeterminedError("the passwords do not match; nothing changed")
    return password


def _target_user(args: argparse.Namespace) -> str:
    from determined.common.api._session import DEFAULT_USER

    return args.username or os.environ.get("DET_USER") or DEFAULT_USER


def login(args: argparse.Namespace) -> int:
    username = _target_user(args)
    session = _session(args)
    password = _read_password(f"Password for user '{username}': ")
    try:
        session.login(username, password)
    except errors.APIError as e:
        if e.status_code in (401, 403):
            raise errors.DeterminedError(f"{e.message} (master {session.master})") from None
        raise
    print(f"Logged in as user '{username}'.")
    return 0


def logout(args: argparse.Namespace) -> int:
    d = _lookup.client(args)
    username = d.user
    d.logout()
    print(f"Logged out user '{username}'.")
    return 0


def whoami(args: argparse.Namespace) -> int:
    user = _lookup.client(args).whoami()
    print(f"You are logged in as user '{user.username}'" + (" (admin)." if user.admin else "."))
    return 0


def list_users(args: argparse.Namespace) -> int:
    users = [u.to_json() for u in _lookup.client(args).list_users()]
    if args.json:
        _render.print_json(users)
        return 0
    _render.table(["Username", "Admin", "Active", "Agent User", "Agent UID"],
                  [[u["username"], u["admin"], u["active"], *_agent_cells(u)] for u in users])
    return 0


def _agent_cells(user: Any) -> Any:
    link = user.get("agent_user_group") or {}
    return [link.get("agent_user", ""), link.get("agent_uid", "")]


def describe(args: argparse.Namespace) -> int:
    user = _lookup.client(args).get_user_by_name(args.username).to_json()
    if args.json:
        _render.print_json(user)
        return 0
    link = user.get("agent_user_group") or {}
    _render.table(["Username", "ID", "Admin", "Active", "Agent UID", "Agent GID", "Agent User", "Agent Group"],
                  [[user["username"], user["id"], user["admin"], user["active"],
                    *[link.get(k, "") for k in ("agent_uid", "agent_gid", "agent_user", "agent_group")]]])
    return 0


def link_with_agent_user(args: argparse.Namespace) -> int:
    user = _lookup.client(args).get_user_by_name(args.det_username)
    user.link_with_agent(agent_gid=args.agent_gid, agent_uid=args.agent_uid, agent_group=args.agent_group,
                         agent_user=args.agent_user)
    print(f"Linked user '{args.det_username}' with agent user {args.agent_user} (uid {args.agent_uid}, group "
          f"{args.agent_group} gid {args.agent_gid}): their trials run as that OS account.")
    return 0


def create(args: argparse.Namespace) -> int:
    user = _lookup.client(args).create_user(args.username, admin=bool(args.admin))
    kind = "admin" if user.admin else "user"
    print(f"Created {kind} '{user.username}' with a blank password; set one with "
          f"`det user change-password {user.username}`.")
    return 0


def change_password(args: argparse.Namespace) -> int:
    d = _lookup.client(args)
    username = args.username or d.whoami().username
    password = _read_password(f"New password for user '{username}': ", confirm=True)
    # Changing one's own password revokes one's tokens: the client logs in again with the new one, without making
    # the user the default one (only `det user login` changes who plain `det` acts as; docs/auth.md).
    d.get_user_by_name(username).change_password(password)
    print(f"Changed the password of user '{username}'.")
    return 0


def _set_active(args: argparse.Namespace, active: bool) -> int:
    user = _lookup.client(args).get_user_by_name(args.username)
    user.activate() if active else user.deactivate()
    print(f"{'Activated' if active else 'Deactivated'} user '{args.username}'.")
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("user", aliases=["u"], help="log in and out, manage users")
    cmds = p.add_subparsers(dest="user_command", required=True, metavar="SUBCOMMAND")

    c = cmds.add_parser("login", help="log in (asks for the password; reads it from stdin without a terminal)")
    c.add_argument("username", nargs="?", default=None, help="default: $DET_USER or 'determined'")
    c.set_defaults(func=login)

    c = cmds.add_parser("logout", help="revoke the current user's token and forget it")
    c.set_defaults(func=logout)

    c = cmds.add_parser("whoami", help="print the current user")
    c.set_defaults(func=whoami)

    c = cmds.add_parser("list", aliases=["ls"], help="list users")
    c.add_argument("--json", action="store_true", help="print JSON")
    c.set_defaults(func=list_users)

    c = cmds.add_parser("describe", help="show a user, with the OS account their trials run as")
    c.add_argument("username")
    c.add_argument("--json", action="store_true", help="print JSON")
    c.set_defaults(func=describe)

    c = cmds.add_parser("link-with-agent-user",
                        help="run a user's trials as an OS account (admins only; a server run as root)")
    c.add_argument("det_username", metavar="username")
    for flag, kind, what in (("--agent-uid", int, "its uid"), ("--agent-gid", int, "its primary gid"),
                             ("--agent-user", str, "its user name"), ("--agent-group", str, "its group name")):
        c.add_argument(flag, type=kind, required=True, help=what + " (required)")
    c.set_defaults(func=link_with_agent_user)

    c = cmds.add_parser("create", help="create a user with a blank password (admins only)")
    c.add_argument("username")
    c.add_argument("--admin", action="store_true", help="make the user an admin")
    c.set_defaults(func=create)

    c = cmds.add_parser("change-password", help="set a user's password (yours, or anyone's as an admin)")
    c.add_argument("username", nargs="?", default=None, help="default: the current user")
    c.set_defaults(func=change_password)

    c = cmds.add_parser("activate", help="let a deactivated user log in again (admins only)")
    c.add_argument("username")
    c.set_defaults(func=lambda args: _set_active(args, True))

    c = cmds.add_parser("deactivate", help="stop a user from logging in; revokes their tokens (admins only)")
    c.add_argument("username")
    c.set_defaults(func=lambda args: _set_active(args, False))
