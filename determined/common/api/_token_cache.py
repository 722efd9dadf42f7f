"""The client's cache of login tokens: `$XDG_CONFIG_HOME/determined/auth.json` (default ~/.config), mode 0600.

Layout: `{"masters": {<master key>: {"tokens": {<user>: {"token", "expires_at"}}, "last_user": <user>}}}`.
A master key is the master's URL, or `local:<data dir>` for a master on this machine.
"""
import contextlib
import datetime
import json
import os
import pathlib
import tempfile
from typing import Any, Dict, Optional

MAX_MASTERS = 64


def cache_path() -> pathlib.Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return pathlib.Path(base) / "determined" / "auth.json"


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


def _expired(entry: Dict[str, Any]) -> bool:
    try:
        expires = datetime.datetime.fromisoformat(str(entry.get("expires_at", "")).rstrip("Z"))
    except ValueError:
        return False
    return expires <= _now()


def _load() -> Dict[str, Any]:
    try:
        data = json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return {"masters": {}}
    if not isinstance(data, dict) or not isinstance(data.get("masters"), dict):
        return {"masters": {}}
    return data


def _save(data: Dict[str, Any]) -> None:
    path = cache_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    masters = data["masters"]
    for key in list(masters):
        tokens = masters[key].get("tokens", {})
        for user in [u for u, e in tokens.items() if _expired(e)]:
            del tokens[user]
        if not tokens:
            del masters[key]
    while len(masters) > MAX_MASTERS:
        del masters[next(iter(masters))]
    fd, tmp = tempfile.mkstemp(prefix=".auth-", dir=str(path.parent))
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def get_token(master_key: str, user: str) -> Optional[str]:
    """The cached, unexpired token of `user` on that master, or None."""
    entry = _load()["masters"].get(master_key, {}).get("tokens", {}).get(user)
    if not isinstance(entry, dict) or _expired(entry) or not isinstance(entry.get("token"), str):
        return None
    return str(entry["token"])


def last_user(master_key: str) -> Optional[str]:
    """The user who last logged in to that master with `det user login`, or None."""
    user = _load()["masters"].get(master_key, {}).get("last_user")
    return user if isinstance(user, str) and get_token(master_key, user) else None


def store_token(master_key: str, user: str, token: str, expires_at: Optional[str], *, make_default: bool) -> None:
    data = _load()
    master = data["masters"].setdefault(master_key, {})
    master.setdefault("tokens", {})[user] = {"token": token, "expires_at": expires_at or ""}
    if make_default:
        master["last_user"] = user
    _save(data)


def drop_token(master_key: str, user: str) -> None:
    data = _load()
    master = data["masters"].get(master_key)
    if not master:
        return
    master.get("tokens", {}).pop(user, None)
    if master.get("last_user") == user:
        master.pop("last_user", None)
    _save(data)
