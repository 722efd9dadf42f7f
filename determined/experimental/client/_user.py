"""User: an account of the master (0.38's `client.User`)."""
from __future__ import annotations

from typing import Any, Dict, Optional

from determined.experimental.client._common import Connection, UsageError


class User:
    """An account: `username`, `user_id`, `admin`, `active`."""

    def __init__(self, user_id: int, username: str, admin: bool, active: bool,
                 _connection: Optional[Connection] = None) -> None:
        self.user_id = user_id
        self.username = username
        self.admin = admin
        self.active = active
        self.display_name: Optional[str] = None
        self.remote = False
        self._connection = _connection
        self._json: Optional[Dict[str, Any]] = None

    @classmethod
    def _from_json(cls, data: Dict[str, Any], connection: Connection) -> "User":
        user = cls(int(data["id"]), data["username"], bool(data.get("admin")), bool(data.get("active", True)),
                   connection)
        user._json = dict(data)
        return user

    def to_json(self) -> Dict[str, Any]:
        """The master's record of the user as of the last read (id, username, admin, active, ...)."""
        return dict(self._json) if self._json is not None else {"id": self.user_id, "username": self.username,
                                                                 "admin": self.admin, "active": self.active}

    def __repr__(self) -> str:
        return f"User(username={self.username!r}, admin={self.admin}, active={self.active})"

    def _patch(self, body: Dict[str, Any]) -> None:
        if self._connection is None:
            raise UsageError("this User is not bound to a master; get it from Determined().get_user_by_name()")
        data = self._connection.session.patch(f"/users/{self.username}", body)["user"]
        self._json = dict(data)
        self.admin, self.active = bool(data.get("admin")), bool(data.get("active", True))

    def reload(self) -> None:
        if self._connection is None:
            raise UsageError("this User is not bound to a master; get it from Determined().get_user_by_name()")
        for u in self._connection.session.get("/users")["users"]:
            if u["username"] == self.username:
                self._json = dict(u)
                self.admin, self.active = bool(u.get("admin")), bool(u.get("active", True))

    def activate(self) -> None:
        self._patch({"active": True})

    def deactivate(self) -> None:
        self._patch({"active": False})

    def change_password(self, new_password: str) -> None:
        """Set the user's password (yours, or anyone's as an admin). The change revokes the user's tokens: when
        it is the user this client acts as, the client logs in again with the new password (caching the token as
        `det user login` does, without making the user the default one)."""
        if self._connection is None:
            raise UsageError("this User is not bound to a master; get it from Determined().get_user_by_name()")
        session = self._connection.session
        myself = session.username() == self.username
        self._patch({"password": new_password})
        if myself:
            session.login(self.username, new_password, make_default=False)

    def change_admin(self, admin: bool) -> None:
        self._patch({"admin": bool(admin)})

    @property
    def agent_user_group(self) -> Optional[Dict[str, Any]]:
        """The OS account the user's trials run as (`agent_uid`, `agent_gid`, `agent_user`, `agent_group`) as of the
        last read; None: not linked (the master's default account)."""
        link = (self._json or {}).get("agent_user_group")
        return dict(link) if link else None

    def link_with_agent(self, agent_gid: int, agent_uid: int, agent_group: str, agent_user: str) -> None:
        """Run the user's trials as this OS account (admins only; `det user link-with-agent-user`)."""
        self._patch({"agent_user_group": {"agent_uid": agent_uid, "agent_gid": agent_gid, "agent_user": agent_user,
                                          "agent_group": agent_group}})

    def unlink_agent(self) -> None:
        """Run the user's trials as the master's default account again (admins only)."""
        self._patch({"agent_user_group": None})
