"""Who sends a request: bearer tokens of users and of trial processes, and what each may do.

Every route under /api/ needs `Authorization: Bearer <token>` except the ones in PUBLIC_ROUTES. A token is
either a user's (from `POST /api/v1/auth/login`; only its SHA-256 is stored) or the session token of a
trial's current run (DET_SESSION_TOKEN). A trial token may read everything and write only to its own
trial's routes (`/api/v1/trials/<its id>/...`, not `kill`).
"""
import dataclasses
import datetime
import hashlib
import json
import os
import re
import secrets
import threading
import time
from typing import Any, Awaitable, Callable, Dict, MutableMapping, Optional, Tuple

import anyio.to_thread
from fastapi import HTTPException, Request
from sqlalchemy import select
from sqlalchemy.orm import Session

from determined.master.db import AuthToken, Experiment, Model, Trial, User, utcnow
from determined.master.problems import RequestProblem
from determined.master.security.request_limits import bounded_detail

DEFAULT_TOKEN_LIFETIME = datetime.timedelta(days=7)
TOKEN_LIFETIME_ENV = "DET_TOKEN_LIFETIME"
PUBLIC_ROUTES = {("POST", "/api/v1/auth/login"), ("GET", "/api/v1/master/info")}
READ_METHODS = {"GET", "HEAD", "OPTIONS"}
_OWN_TRIAL_ROUTE = re.compile(r"^/api/v1/trials/(\d+)/(.+)$")
# A run acknowledges its preemption signal under its allocation; the route checks that it is the trial's own run.
_ALLOCATION_ACK_ROUTE = re.compile(r"^/api/v1/allocations/[^/]+/signals/ack_preemption$")
_LIFETIME_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


@dataclasses.dataclass(frozen=True)
class Principal:
    """The sender of a request: a user, or a trial process acting for its experiment's owner."""

    username: str
    user_id: Optional[int]
    admin: bool
    trial_id: Optional[int] = None
    token: str = ""

    @property
    def is_trial(self) -> bool:
        return self.trial_id is not None


def token_lifetime() -> datetime.timedelta:
    """$DET_TOKEN_LIFETIME (`3600`, `90m`, `12h`, `7d`), else 7 days."""
    text = os.environ.get(TOKEN_LIFETIME_ENV, "").strip()
    if not text:
        return DEFAULT_TOKEN_LIFETIME
    match = _LIFETIME_RE.match(text)
    if not match or float(match.group(1)) <= 0:
        raise ValueError(f"{TOKEN_LIFETIME_ENV}={text!r}: use a positive number of seconds or e.g. 90m, 12h, 7d")
    return datetime.timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def issue_token(s: Session, user: User, lifetime: Optional[datetime.timedelta] = None) -> Tuple[str, datetime.datetime]:
    """A new random token for `user` (32 bytes) and its expiry; only its hash is stored."""
    token = secrets.token_urlsafe(32)
    expires = utcnow() + (lifetime or token_lifetime())
    s.add(AuthToken(token_hash=hash_token(token), user_id=user.id, created_at=utcnow(), expires_at=expires, revoked=False))
    s.flush()
    return token, expires


def revoke_token(s: Session, token: str) -> None:
    row = s.scalars(select(AuthToken).where(AuthToken.token_hash == hash_token(token))).first()
    if row is not None:
        row.revoked = True


def resolve(s: Session, token: str) -> Optional[Principal]:
    """The principal of a token, or None when it is unknown, expired, revoked or its user is deactivated."""
    row = s.execute(select(AuthToken, User).join(User, AuthToken.user_id == User.id)
                    .where(AuthToken.token_hash == hash_token(token))).first()
    if row is not None:
        tok, user = row
        if tok.revoked or tok.expires_at <= utcnow() or not user.active:
            return None
        return Principal(user.username, user.id, bool(user.admin), token=token)
    trial = s.scalars(select(Trial).where(Trial.session_token == token)).first()
    if trial is None or not trial.session_token:
        return None
    exp = s.get(Experiment, trial.experiment_id)
    owner = exp.owner if exp is not None else ""
    return Principal(owner, exp.owner_id if exp is not None else None, False, trial_id=trial.id, token=token)


class TrialPrincipalCache:
    """Remembers the principals of trial tokens for `ttl` seconds: trials report often.

    Safe because the trial routes check again that the token is the trial's current run (409 otherwise)
    and a trial token never writes elsewhere. User tokens are always looked up, so revocation is immediate.
    """

    def __init__(self, resolver: Callable[[str], Optional[Principal]], ttl: float = 5.0) -> None:
        self.resolver = resolver
        self.ttl = ttl
        self._cache: Dict[str, Tuple[float, Principal]] = {}
        self._lock = threading.Lock()

    def cached(self, token: str) -> Optional[Principal]:
        """The remembered principal of a trial token, without a database lookup (None: not remembered)."""
        hit = self._cache.get(token)
        if hit is not None and hit[0] > time.monotonic():
            return hit[1]
        return None

    def __call__(self, token: str) -> Optional[Principal]:
        now = time.monotonic()
        hit = self.cached(token)
        if hit is not None:
            return hit
        principal = self.resolver(token)
        if principal is not None and principal.is_trial:
            with self._lock:
                if len(self._cache) > 10_000:
                    self._cache = {k: v for k, v in self._cache.items() if v[0] > now}
                self._cache[token] = (now + self.ttl, principal)
        return principal


def bearer(headers: Any) -> Optional[str]:
    header = headers.get("authorization", "")
    if header[:7].lower() == "bearer ":
        return header[7:].strip() or None
    return None


def principal_of(request: Request) -> Principal:
    """The authenticated sender (set by AuthMiddleware)."""
    principal = getattr(request.state, "principal", None)
    if principal is None:
        raise RequestProblem(401, "authentication required: log in with `det user login USER`")
    return principal  # type: ignore[no-any-return]


# ------------------------------------------------------------------ checks used by the routes


def check_admin(principal: Principal, what: str) -> None:
    if not principal.admin:
        raise RequestProblem(403, f"only an admin may {what}; {principal.username!r} is not an admin")


def check_owner(principal: Principal, owner: Optional[str], thing: str, what: str, kind: str) -> None:
    """Only the owner of `thing` or an admin may `what` it; a trial's token never may (it only reports)."""
    if principal.is_trial:
        raise RequestProblem(403, f"a trial's token cannot {what} {kind}")
    if principal.admin or (owner and principal.username == owner):
        return
    shown = repr(owner) if owner else "an admin"
    raise RequestProblem(403, f"{thing} is owned by {shown}; only {shown} or an admin may {what} it "
                              f"(you are {principal.username!r})")


def check_experiment_owner(principal: Principal, exp: Experiment, what: str = "change") -> None:
    """Only the experiment's owner or an admin may change it (a trial token never may)."""
    check_owner(principal, exp.owner, f"experiment {exp.id}", what, "experiments")


def check_model_owner(principal: Principal, model: Model, what: str = "change") -> None:
    """Only a model's owner or an admin may change it (its description, metadata, versions)."""
    check_owner(principal, model.owner, f"model {model.name!r}", what, "models")


def check_checkpoint_owner(principal: Principal, exp: Optional[Experiment], uuid: str, what: str) -> None:
    """A checkpoint follows its experiment: only the experiment's owner or an admin may change its metadata."""
    thing = f"checkpoint {uuid} (of experiment {exp.id})" if exp is not None else f"checkpoint {uuid}"
    check_owner(principal, exp.owner if exp is not None else None, thing, what, "checkpoints")


def check_trial_reporter(principal: Principal, s: Session, trial: Trial, *, write: bool) -> None:
    """Who may use a trial's protocol routes: its own current run; for writes also its owner or an admin.

    A trial token of an earlier run of this trial is refused with 409 (the process should exit).
    """
    if principal.is_trial:
        if principal.trial_id != trial.id:
            if write:
                raise RequestProblem(403, f"a token of trial {principal.trial_id} cannot report for trial {trial.id}")
            return
        if principal.token != trial.session_token:
            raise RequestProblem(409, f"trial {trial.id}: this process is not the trial's current run; it should exit")
        return
    if write:
        exp = s.get(Experiment, trial.experiment_id)
        if exp is not None:
            check_experiment_owner(principal, exp, "report for trials of")


def _problem_as_http(problem: RequestProblem) -> HTTPException:
    message, problems = bounded_detail(problem.message, problem.problems)
    return HTTPException(status_code=problem.status, detail={"message": message, "problems": problems})


def experiment_owner_only(request: Request, experiment_id: int) -> None:
    """Route dependency: the sender owns experiment `experiment_id` or is an admin (404 when it does not exist)."""
    try:
        principal = principal_of(request)
        with request.app.state.master.read() as s:
            exp = s.get(Experiment, experiment_id)
            if exp is None:
                raise RequestProblem(404, f"experiment {experiment_id} not found")
            check_experiment_owner(principal, exp)
    except RequestProblem as e:
        raise _problem_as_http(e) from None


def trial_owner_only(request: Request, trial_id: int) -> None:
    """Route dependency: the sender owns the experiment of trial `trial_id` or is an admin."""
    try:
        principal = principal_of(request)
        with request.app.state.master.read() as s:
            trial = s.get(Trial, trial_id)
            exp = s.get(Experiment, trial.experiment_id) if trial is not None else None
            if trial is None or exp is None:
                raise RequestProblem(404, f"trial {trial_id} not found")
            check_experiment_owner(principal, exp, "change trials of")
    except RequestProblem as e:
        raise _problem_as_http(e) from None


# ------------------------------------------------------------------ the middleware


def _error(status: int, message: str) -> Tuple[int, bytes, Dict[str, str]]:
    body = json.dumps({"detail": {"message": message, "problems": []}}).encode()
    headers = {"content-type": "application/json"}
    if status == 401:
        headers["www-authenticate"] = "Bearer"
    return status, body, headers


def _trial_write_allowed(principal: Principal, path: str) -> bool:
    if _ALLOCATION_ACK_ROUTE.match(path):
        return True
    match = _OWN_TRIAL_ROUTE.match(path)
    return bool(match) and int(match.group(1)) == principal.trial_id and match.group(2) != "kill"


class AuthMiddleware:
    """Authenticates every /api/ request (but PUBLIC_ROUTES) and puts the Principal in `request.state`."""

    def __init__(self, app: Any, resolver: Callable[[str], Optional[Principal]]) -> None:
        self.app = app
        self.resolver = resolver

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/api/"):
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"].rstrip("/") or "/"
        if (method, path) in PUBLIC_ROUTES:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        token = bearer(headers)
        failure: Optional[Tuple[int, bytes, Dict[str, str]]] = None
        principal: Optional[Principal] = None
        if token is None:
            failure = _error(401, "authentication required: send `Authorization: Bearer <token>`; get a token with "
                                  "`det user login USER` or POST /api/v1/auth/login")
        else:
            cached = getattr(self.resolver, "cached", None)
            principal = cached(token) if cached is not None else None
            if principal is None:  # a database lookup: off the event loop
                principal = await anyio.to_thread.run_sync(self.resolver, token)
            if principal is None:
                failure = _error(401, "invalid or expired token: log in again with `det user login USER`")
            elif principal.is_trial and method not in READ_METHODS and not _trial_write_allowed(principal, path):
                failure = _error(403, f"a trial's token (trial {principal.trial_id}) may only read, and report for "
                                      f"its own trial under /api/v1/trials/{principal.trial_id}/")
        if failure is not None:
            status, body, hdrs = failure
            await send({"type": "http.response.start", "status": status,
                        "headers": [(k.encode(), v.encode()) for k, v in hdrs.items()]})
            await send({"type": "http.response.body", "body": body})
            return
        scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)
