"""Users and their tokens: /auth/login, /auth/logout, /me, /users (security/users.to_json)."""
from typing import Any, List, Optional

from pydantic import Field

from determined.master.api.schemas._base import StrictWire, Wire


class AgentUserGroup(Wire):
    """The OS account a user's trials run as (`det user link-with-agent-user`)."""

    agent_uid: int
    agent_gid: int
    agent_user: str
    agent_group: str


class User(Wire):
    """An account."""

    id: int
    username: str
    admin: bool
    active: bool
    agent_user_group: Optional[AgentUserGroup] = Field(
        None, description="the OS account the user's trials run as; null: the master's default (trial_user)")


class CurrentUser(User):
    """The caller's account; a trial's token also names the trial."""

    trial_id: Optional[int] = Field(None, description="only for a trial's token: the trial it belongs to")


class LoginAnswer(Wire):
    """A new bearer token for the user, and when it expires."""

    token: str = Field(description="send it as `Authorization: Bearer <token>`")
    user: User
    expires_at: str


class MeAnswer(Wire):
    """The caller: `{"user": {...}}`."""

    user: CurrentUser


class UserAnswer(Wire):
    """One user: `{"user": {...}}`."""

    user: User


class UserList(Wire):
    """Every user, by id."""

    users: List[User]


class LoginBody(StrictWire):
    """POST /auth/login."""

    username: Any = Field(None, description="a username (required)")
    password: Any = Field(None, description="its password, a string (default '')")


class CreateUserBody(StrictWire):
    """POST /users (admins): a new user."""

    username: Any = Field(None, description="1 to 128 characters: letters, digits and _ . @ -, starting with a "
                                            "letter or digit (required)")
    password: Any = Field(None, description="a string (default '')")
    admin: Any = Field(None, description="true or false (default false)")
    active: Any = Field(None, description="true or false (default true)")


class UpdateUserBody(StrictWire):
    """PATCH /users/{username}: the fields to change; absent ones stay."""

    password: Any = Field(None, description="a string: by the user or an admin")
    active: Any = Field(None, description="true or false: by an admin")
    admin: Any = Field(None, description="true or false: by an admin")
    agent_user_group: Any = Field(None, description="by an admin: {agent_uid, agent_gid, agent_user, agent_group} "
                                                    "links the user with that OS account; null unlinks")
