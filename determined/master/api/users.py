"""Log in and out, who am I, and managing users (docs/auth.md)."""
import functools
from typing import Any, Dict, Optional

from fastapi import APIRouter, HTTPException, Request
from starlette.concurrency import run_in_threadpool

from determined.master.security import auth, login_throttle, users
from determined.master.views import serialize
from determined.master.api._deps import master_of, problems_as_http
from determined.master.api.schemas._base import Empty, fields_of
from determined.master.api.schemas.users import (CreateUserBody, LoginAnswer, LoginBody, MeAnswer, UpdateUserBody,
                                                UserAnswer, UserList)
from determined.master.db import User
from determined.master.master import Master
from determined.master.problems import RequestProblem

router = APIRouter()

_BAD_LOGIN = "login failed: unknown username or wrong password"


def _fields(body: Any) -> Optional[Dict[str, Any]]:
    """The JSON object the client sent (None: no body)."""
    return fields_of(body) if body is not None else None


@router.post("/auth/login", response_model=LoginAnswer)
async def login(request: Request, body: Optional[LoginBody] = None) -> Dict[str, Any]:
    """`{"username", "password"}` -> `{"token", "user", "expires_at"}`; a 401 does not say which part was wrong.

    Repeated failures of a user or from an address are answered 429 with Retry-After (login_throttle.py); the
    password hash runs on the master's small pool of hashing threads, never on the event loop.
    """
    sent = _fields(body)
    with problems_as_http():
        if not isinstance(sent, dict) or not isinstance(sent.get("username"), str):
            raise RequestProblem(400, "the body must be {\"username\": \"...\", \"password\": \"...\"}")
        username, password = sent["username"], sent.get("password", "")
        if not isinstance(password, str):
            raise RequestProblem(400, "password: must be a string")
        address = request.client.host if request.client else "unknown"
        throttle: login_throttle.LoginThrottle = request.app.state.login_throttle
        try:
            throttle.begin(username, address)
            master = master_of(request)
            user = await run_in_threadpool(_find_user, master, username)
            ok = await request.app.state.hash_pool.run(_check_password, password, user)
        except login_throttle.TooManyLogins as e:
            raise HTTPException(429, detail={"message": str(e), "problems": []},
                                headers={"Retry-After": str(e.retry_after)}) from None
        if not ok or user is None:
            throttle.failed(username, address)
            raise RequestProblem(401, _BAD_LOGIN)
        throttle.succeeded(username, address)
        if not user.active:
            raise RequestProblem(403, f"user {user.username!r} is deactivated; an admin can run "
                                      f"`det user activate {user.username}`")
        return await run_in_threadpool(_issue_token, master, user.username)


def _find_user(master: Master, username: str) -> Optional[User]:
    with master.read() as s:
        user = users.find(s, username) if len(username) <= users.MAX_USERNAME_CHARS else None
        if user is not None:
            s.expunge(user)
        return user


def _issue_token(master: Master, username: str) -> Dict[str, Any]:
    with master.write() as s:
        fresh = users.get(s, username)
        token, expires = auth.issue_token(s, fresh)
        return {"token": token, "user": users.to_json(fresh), "expires_at": serialize.timestamp(expires)}


def _check_password(password: str, user: Optional[User]) -> bool:
    # The hash is checked even for an unknown user, so timing tells nothing either.
    return users.check_password(password, user.password_hash if user is not None else _dummy_hash())


@functools.lru_cache(maxsize=1)
def _dummy_hash() -> str:
    return users.hash_password("not-a-password-of-anyone")


@router.post("/auth/logout", response_model=Empty)
def logout(request: Request) -> Dict[str, Any]:
    """Revoke the token of this request (a trial's token is left alone)."""
    with problems_as_http():
        principal = auth.principal_of(request)
        if not principal.is_trial:
            with master_of(request).write() as s:
                auth.revoke_token(s, principal.token)
    return {}


@router.get("/me", response_model=MeAnswer, response_model_exclude_unset=True)
def me(request: Request) -> Dict[str, Any]:
    with problems_as_http():
        principal = auth.principal_of(request)
        with master_of(request).read() as s:
            user = users.get(s, principal.username)
            answer = users.to_json(user)
        if principal.is_trial:
            answer["trial_id"] = principal.trial_id
        return {"user": answer}


@router.get("/users", response_model=UserList)
def list_users(request: Request) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).read() as s:
        return {"users": [users.to_json(u) for u in users.all_users(s)]}


@router.post("/users", response_model=UserAnswer)
def create_user(request: Request, body: Optional[CreateUserBody] = None) -> Dict[str, Any]:
    """Admins only: `{"username", "password"?, "admin"?}` -> `{"user"}`."""
    with problems_as_http():
        auth.check_admin(auth.principal_of(request), "create users")
        with master_of(request).write() as s:
            return {"user": users.to_json(users.create(s, _fields(body)))}


@router.patch("/users/{username}", response_model=UserAnswer)
def patch_user(request: Request, username: str, body: Optional[UpdateUserBody] = None) -> Dict[str, Any]:
    """`password` by the user or an admin; `active` and `admin` by an admin."""
    with problems_as_http():
        principal = auth.principal_of(request)
        if principal.is_trial:
            raise RequestProblem(403, "a trial's token cannot change users")
        with master_of(request).write() as s:
            user = users.get(s, username)
            by_self = principal.username == user.username
            user = users.update(s, user, _fields(body), by_admin=principal.admin, by_self=by_self)
            return {"user": users.to_json(user)}
