"""Users of the master: passwords (salted scrypt), lookups, creation and changes.

An empty `password_hash` means a blank password, the state of the default users `admin` and `determined`
until someone sets one.
"""
import base64
import hashlib
import hmac
import re
import secrets
from typing import Any, Dict, List, Optional

from sqlalchemy import select
from sqlalchemy.orm import Session

from determined.master.db import AuthToken, User
from determined.master.problems import RequestProblem

DEFAULT_USERS = ("admin", "determined")
MAX_USERNAME_CHARS = 128
USERNAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}$")
MAX_PASSWORD_CHARS = 1024

# scrypt cost: 2**14 x 8 blocks (16 MiB, tens of milliseconds per check).
_SCRYPT_N, _SCRYPT_R, _SCRYPT_P = 2**14, 8, 1


def hash_password(password: str) -> str:
    """`scrypt$N$r$p$salt$hash` for a non-empty password; "" for the blank password."""
    if password == "":
        return ""
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=_SCRYPT_N, r=_SCRYPT_R, p=_SCRYPT_P, dklen=32)
    b64 = lambda b: base64.b64encode(b).decode("ascii")  # noqa: E731
    return f"scrypt${_SCRYPT_N}${_SCRYPT_R}${_SCRYPT_P}${b64(salt)}${b64(digest)}"


def check_password(password: str, stored: str) -> bool:
    """Whether `password` matches the stored hash (compared in constant time)."""
    if stored == "":
        return hmac.compare_digest(password.encode(), b"")
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        expected = base64.b64decode(digest)
        got = hashlib.scrypt(password.encode(), salt=base64.b64decode(salt), n=int(n), r=int(r), p=int(p),
                             dklen=len(expected))
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got, expected)


def to_json(user: User) -> Dict[str, Any]:
    return {"id": user.id, "username": user.username, "admin": bool(user.admin), "active": bool(user.active),
            "agent_user_group": agent_user_group(user)}


# The OS account a user's trials run as (`det user link-with-agent-user`, Determined's `agent_user_group`).
AGENT_FIELDS = ("agent_uid", "agent_gid", "agent_user", "agent_group")
# POSIX portable user and group names (useradd's default rule), at most 32 characters.
AGENT_NAME_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,30}[a-z0-9_$-]?$")
MAX_AGENT_ID = 2**31 - 2  # (uid_t)-1 and above are not accounts


def agent_user_group(user: User) -> Optional[Dict[str, Any]]:
    """`{"agent_uid", "agent_gid", "agent_user", "agent_group"}` of a linked user; None when not linked."""
    if user.agent_uid is None:
        return None
    return {"agent_uid": user.agent_uid, "agent_gid": user.agent_gid, "agent_user": user.agent_user,
            "agent_group": user.agent_group}


def _check_agent_user_group(value: Any) -> Optional[Dict[str, Any]]:
    """The link to store (None: unlink); refuses what is not four valid fields, and root's ids."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RequestProblem(400, "invalid user update", [
            "agent_user_group: must be {\"agent_uid\", \"agent_gid\", \"agent_user\", \"agent_group\"}, or null "
            "to unlink"])
    problems = [f"agent_user_group.{k}: unknown field (allowed: {', '.join(AGENT_FIELDS)})"
                for k in sorted(set(value) - set(AGENT_FIELDS))]
    for key in ("agent_uid", "agent_gid"):
        v = value.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_AGENT_ID:
            problems.append(f"agent_user_group.{key}: required, an integer from 1 to {MAX_AGENT_ID}")
        elif v == 0:
            problems.append(f"agent_user_group.{key}: 0 is root's; trials would run with every privilege: link an "
                            "unprivileged account")
    for key in ("agent_user", "agent_group"):
        v = value.get(key)
        if not isinstance(v, str) or not AGENT_NAME_RE.match(v):
            problems.append(f"agent_user_group.{key}: required, a user or group name of 1 to 32 characters "
                            "(lowercase letters, digits, _ and -, starting with a letter or _)")
        elif v == "root":
            problems.append(f"agent_user_group.{key}: root: link an unprivileged account")
    if problems:
        raise RequestProblem(400, "invalid user update", problems)
    return {k: value[k] for k in AGENT_FIELDS}


def find(s: Session, username: str) -> Optional[User]:
    return s.scalars(select(User).where(User.username == username)).first()


def get(s: Session, username: str) -> User:
    user = find(s, username)
    if user is None:
        raise RequestProblem(404, f"user {username!r} not found; `det user list` shows the users")
    return user


def all_users(s: Session) -> List[User]:
    return list(s.scalars(select(User).order_by(User.id)))


def blank_default_users(s: Session) -> List[str]:
    """The default users whose password is still blank."""
    rows = s.scalars(select(User).where(User.username.in_(DEFAULT_USERS), User.password_hash == ""))
    return sorted(u.username for u in rows)


def _check_password_value(password: Any) -> str:
    if not isinstance(password, str):
        raise RequestProblem(400, "invalid user", ["password: must be a string"])
    if len(password) > MAX_PASSWORD_CHARS:
        raise RequestProblem(400, "invalid user", [f"password: at most {MAX_PASSWORD_CHARS} characters"])
    return password


def _check_flag(body: Dict[str, Any], key: str) -> Optional[bool]:
    if key not in body:
        return None
    if not isinstance(body[key], bool):
        raise RequestProblem(400, "invalid user", [f"{key}: must be true or false"])
    return bool(body[key])


def _check_keys(body: Any, allowed: "tuple[str, ...]", what: str) -> Dict[str, Any]:
    if not isinstance(body, dict):
        raise RequestProblem(400, f"invalid {what}: the body must be a JSON object with keys {', '.join(allowed)}")
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise RequestProblem(400, f"invalid {what}", [f"{k}: unknown field (allowed: {', '.join(allowed)})" for k in unknown])
    return body


def create(s: Session, body: Any) -> User:
    """A new user from `{"username", "password"?, "admin"?}`; 409 when the name is taken."""
    body = _check_keys(body, ("username", "password", "admin", "active"), "user")
    username = body.get("username")
    if not isinstance(username, str) or not USERNAME_RE.match(username):
        raise RequestProblem(400, "invalid user", [
            "username: 1 to 128 characters: letters, digits and _ . @ -, starting with a letter or digit"])
    password = _check_password_value(body.get("password", ""))
    admin = _check_flag(body, "admin") or False
    active = _check_flag(body, "active")
    if find(s, username) is not None:
        raise RequestProblem(409, f"user {username!r} already exists; pick another name")
    user = User(username=username, password_hash=hash_password(password), admin=admin,
                active=True if active is None else active)
    s.add(user)
    s.flush()
    return user


def update(s: Session, user: User, body: Any, *, by_admin: bool, by_self: bool) -> User:
    """Apply `{"password"?, "active"?, "admin"?, "agent_user_group"?}`: the password by the user or an admin, the
    flags and the link with an OS account (`agent_user_group`, null unlinks) by an admin.

    Deactivating a user or changing a password revokes the user's tokens.
    """
    body = _check_keys(body, ("password", "active", "admin", "agent_user_group"), "user update")
    if "agent_user_group" in body and not by_admin:
        raise RequestProblem(403, "only an admin may link a user with an agent user (the OS account their trials "
                                  "run as)")
    link = _check_agent_user_group(body["agent_user_group"]) if "agent_user_group" in body else None
    if "password" in body and not (by_self or by_admin):
        raise RequestProblem(403, f"only {user.username!r} or an admin may change {user.username!r}'s password")
    flags = {k: _check_flag(body, k) for k in ("active", "admin")}
    changed_flags = [k for k, v in flags.items() if v is not None]
    if changed_flags and not by_admin:
        raise RequestProblem(403, f"only an admin may change {', '.join(changed_flags)} of a user")
    if by_self and (flags["active"] is False or flags["admin"] is False):
        raise RequestProblem(400, "an admin cannot deactivate or demote themselves; ask another admin")
    revoke = False
    if "password" in body:
        user.password_hash = hash_password(_check_password_value(body["password"]))
        revoke = True
    if flags["active"] is not None:
        user.active = flags["active"]
        revoke = revoke or not flags["active"]
    if flags["admin"] is not None:
        user.admin = flags["admin"]
    if "agent_user_group" in body:
        for key in AGENT_FIELDS:
            setattr(user, key, None if link is None else link[key])
    if revoke:
        revoke_tokens(s, user.id)
    s.flush()
    return user


def revoke_tokens(s: Session, user_id: int) -> None:
    for token in s.scalars(select(AuthToken).where(AuthToken.user_id == user_id, AuthToken.revoked.is_(False))):
        token.revoked = True
