"""Logging in and out, token expiry and revocation, forged tokens, the client's token cache."""
import os
import stat
import time

import pytest
from sqlalchemy import select

from determined import errors
from determined.common.api import AuthenticationError, Session
from determined.common.api import _token_cache
from determined.master.security import auth
from determined.master.app import blank_password_warning
from determined.master.db import AuthToken, User

from ._helpers import InProcessMaster, add_user


def _refused(status: int, call, *args):  # type: ignore[no-untyped-def]
    with pytest.raises(errors.APIError) as info:
        call(*args)
    assert info.value.status_code == status, str(info.value)
    return info.value


def test_every_route_needs_a_token_but_login_and_info(master: InProcessMaster) -> None:
    anonymous = master.raw()
    assert anonymous.get("/master/info")["version"]
    for method, path in [("GET", "/experiments"), ("GET", "/me"), ("GET", "/users"), ("POST", "/experiments"),
                         ("GET", "/trials/1"), ("GET", "/models"), ("POST", "/auth/logout"),
                         ("GET", "/checkpoints/x"), ("POST", "/trials/1/training_metrics")]:
        problem = _refused(401, anonymous.request, method, path)
        assert "det user login" in str(problem)
    raw = master.client().get("/api/v1/experiments")
    assert raw.status_code == 401 and raw.headers["www-authenticate"] == "Bearer"
    assert master.client().get("/openapi.json").status_code == 200


def test_login_gives_an_expiring_token_and_logout_revokes_it(master: InProcessMaster) -> None:
    answer = master.raw().post("/auth/login", {"username": "admin", "password": ""})
    assert answer["user"] == {"id": 1, "username": "admin", "admin": True, "active": True, "agent_user_group": None}
    assert answer["expires_at"].endswith("Z") and len(answer["token"]) >= 40
    user = master.raw(answer["token"])
    assert user.get("/me")["user"]["username"] == "admin"
    with master.master.read() as s:  # only a hash of the token is stored
        stored = list(s.scalars(select(AuthToken.token_hash)))
    assert answer["token"] not in stored and auth.hash_token(answer["token"]) in stored
    user.post("/auth/logout")
    _refused(401, user.get, "/me")


def test_bad_logins_say_nothing_about_which_part_was_wrong(master: InProcessMaster) -> None:
    admin = master.session("admin")
    add_user(admin, "alice", "s3cret")
    anonymous = master.raw()
    messages = {str(_refused(401, anonymous.post, "/auth/login", {"username": u, "password": p}))
                for u, p in [("alice", "wrong"), ("nobody", "s3cret"), ("alice", "")]}
    assert len(messages) == 1 and "alice" not in messages.pop()
    assert anonymous.post("/auth/login", {"username": "alice", "password": "s3cret"})["user"]["username"] == "alice"
    _refused(400, anonymous.post, "/auth/login", {"username": 3})
    with master.master.read() as s:  # salted scrypt, never the password
        stored = s.scalars(select(User.password_hash).where(User.username == "alice")).one()
    assert stored.startswith("scrypt$") and "s3cret" not in stored


def test_forged_expired_and_revoked_tokens_are_refused(master: InProcessMaster, monkeypatch: pytest.MonkeyPatch) -> None:
    real = master.raw().post("/auth/login", {"username": "determined", "password": ""})["token"]
    for forged in ("forged", real[:-1] + ("A" if real[-1] != "A" else "B"), auth.hash_token(real), ""):
        problem = _refused(401, master.raw(forged).get, "/experiments")
        assert "token" in str(problem) or "authentication" in str(problem)
    monkeypatch.setenv("DET_TOKEN_LIFETIME", "1s")
    short = master.raw().post("/auth/login", {"username": "determined", "password": ""})["token"]
    assert master.raw(short).get("/me")["user"]["username"] == "determined"
    time.sleep(1.2)
    _refused(401, master.raw(short).get, "/me")
    # revoked: logging out, changing the password and deactivating all revoke
    admin = master.session("admin")
    add_user(admin, "bob", "pw")
    bob = master.raw().post("/auth/login", {"username": "bob", "password": "pw"})["token"]
    admin.patch("/users/bob", {"active": False})
    _refused(401, master.raw(bob).get, "/me")
    _refused(403, master.raw().post, "/auth/login", {"username": "bob", "password": "pw"})
    admin.patch("/users/bob", {"active": True})
    bob = master.raw().post("/auth/login", {"username": "bob", "password": "pw"})["token"]
    master.raw(bob).patch("/users/bob", {"password": "new"})
    _refused(401, master.raw(bob).get, "/me")
    assert master.raw(real).get("/me")["user"]["username"] == "determined"


def test_token_lifetime_setting_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DET_TOKEN_LIFETIME", "12h")
    assert auth.token_lifetime().total_seconds() == 12 * 3600
    monkeypatch.setenv("DET_TOKEN_LIFETIME", "soon")
    with pytest.raises(ValueError, match="DET_TOKEN_LIFETIME"):
        auth.token_lifetime()


def test_users_admin_rules(master: InProcessMaster) -> None:
    admin, plain = master.session("admin"), master.session("determined")
    _refused(403, plain.post, "/users", {"username": "eve"})
    add_user(admin, "carol", "pw", is_admin=False)
    _refused(409, admin.post, "/users", {"username": "carol"})
    _refused(400, admin.post, "/users", {"username": "bad name!"})
    _refused(400, admin.post, "/users", {"username": "dave", "colour": "red"})
    _refused(403, plain.patch, "/users/carol", {"password": "x"})
    _refused(403, plain.patch, "/users/determined", {"admin": True})
    _refused(404, admin.patch, "/users/nobody", {"active": False})
    _refused(400, admin.patch, "/users/admin", {"active": False})
    assert admin.patch("/users/carol", {"admin": True})["user"]["admin"] is True
    assert [u["username"] for u in plain.get("/users")["users"]] == ["admin", "determined", "carol"]


def test_blank_password_warning_names_the_default_users(master: InProcessMaster) -> None:
    warning = blank_password_warning(master.master)
    assert warning is not None and "admin, determined" in warning
    admin = master.session("admin")
    admin.patch("/users/admin", {"password": "a"})
    admin = master.session("admin", "a")
    admin.patch("/users/determined", {"password": "d"})
    assert blank_password_warning(master.master) is None


def test_session_logs_in_by_itself_and_caches_the_token_0600(master: InProcessMaster) -> None:
    session = master.session()
    assert session.get("/me")["user"]["username"] == "determined"
    path = _token_cache.cache_path()
    assert path.parent == __import__("pathlib").Path(os.environ["XDG_CONFIG_HOME"]) / "determined"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    token = session.token
    again = master.session()
    assert again.get("/me")["user"]["username"] == "determined" and again.token == token  # from the cache
    # a cached token the master refuses (logged out elsewhere) is replaced by a fresh login
    master.raw(token).post("/auth/logout")
    third = master.session()
    assert third.get("/me")["user"]["username"] == "determined" and third.token != token


def test_session_user_choice_and_clear_error(master: InProcessMaster, monkeypatch: pytest.MonkeyPatch) -> None:
    admin = master.session("admin")
    add_user(admin, "erin", "pw")
    monkeypatch.setenv("DET_USER", "admin")
    assert master.session().get("/me")["user"]["username"] == "admin"
    monkeypatch.setenv("DET_USER", "erin")
    with pytest.raises(AuthenticationError) as info:
        master.session().get("/experiments")
    assert "det user login erin" in str(info.value)
    monkeypatch.delenv("DET_USER")
    Session("http://in-process", client=master.client()).login("erin", "pw")  # becomes the default user
    assert master.session().get("/me")["user"]["username"] == "erin"
    monkeypatch.setenv("DET_SESSION_TOKEN", "token-of-a-trial")
    _refused(401, master.session().get, "/experiments")  # a trial's session uses that token, nothing else


def test_a_serving_master_warns_at_start_while_passwords_are_blank(tmp_path, caplog) -> None:  # type: ignore[no-untyped-def]
    import logging

    from determined.master import create_app

    from ._helpers import TestClient

    app = create_app(tmp_path / "served", run_scheduler=False, warn_blank_passwords=True)
    with caplog.at_level(logging.WARNING, logger="determined.master"), TestClient(app):
        pass
    assert any("blank password" in r.getMessage() and "admin, determined" in r.getMessage() for r in caplog.records)
