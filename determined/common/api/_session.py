import logging
import os
import ssl
import threading
import time
import urllib.parse
from typing import Any, Dict, Iterator, Optional, Tuple

import httpx

from determined import errors
from determined.common.api import _token_cache

# httpx logs every request at INFO: in a training script that calls logging.basicConfig(level=INFO), the
# platform's reports would flood the trial's logs. Its warnings still show; a level set by the user is kept.
for _name in ("httpx", "httpcore"):
    if logging.getLogger(_name).level == logging.NOTSET:
        logging.getLogger(_name).setLevel(logging.WARNING)

_RETRYABLE = (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError, httpx.ConnectTimeout)


_ssl_contexts: Dict[Tuple[Optional[str], Optional[str]], ssl.SSLContext] = {}
_ssl_lock = threading.Lock()


def http_client(*, verify: "bool | str" = True, **kwargs: Any) -> httpx.Client:
    """An httpx client sharing this process's TLS context (building one costs 20-100 ms; a trial makes several).

    The context is the one httpx would build (certifi, or SSL_CERT_FILE / SSL_CERT_DIR when set), once per
    value of those variables. `verify`: False checks no certificate; a path, the CA bundle to trust instead.
    """
    if verify is False:
        return httpx.Client(verify=False, **kwargs)
    if isinstance(verify, str):
        return httpx.Client(verify=ssl.create_default_context(cafile=verify), **kwargs)
    key = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    with _ssl_lock:
        context = _ssl_contexts.get(key)
        if context is None:
            context = _ssl_contexts[key] = httpx.create_ssl_context(trust_env=True)
    return httpx.Client(verify=context, **kwargs)


def make_url(master: str) -> str:
    """Normalise a master address: `host:port` gets `http://`, trailing slashes go."""
    master = master.strip()
    if "://" not in master:
        master = "http://" + master
    return master.rstrip("/")


class AuthenticationError(errors.APIError):
    """The master refused this client's credentials; the message says how to log in."""


PUBLIC_PATHS = ("/auth/login", "/master/info")
DEFAULT_USER = "determined"
_LOOPBACK_HOSTS = ("in-process", "127.0.0.1", "localhost", "::1", "[::1]")


class Session:
    """A JSON session against the REST API under `/api/v1` of one master.

    `client` lets the same session speak to a master app in-process instead of over a socket (an
    `InProcessClient`, determined/common/api/_asgi.py). Without a `token` the session authenticates by itself on its first request:
    $DET_SESSION_TOKEN (trial processes), else the cached token of the user on this master (`user`, else
    $DET_USER, else the user of the last `det user login` there, else `determined`), else it logs that user
    in with the blank password, else raises AuthenticationError telling to run `det user login USER`.
    """

    def __init__(
        self,
        master: str,
        token: Optional[str] = None,
        *,
        client: Optional[httpx.Client] = None,
        timeout: float = 60.0,
        retries: int = 5,
        user: Optional[str] = None,
    ) -> None:
        self.master = make_url(master)
        self.token = token
        self.retries = retries
        self.user = user
        self._client = client or http_client(base_url=self.master, timeout=timeout)
        self._token_source = "given" if token else ""
        self._master_key: Optional[str] = None
        self._auth_lock = threading.Lock()

    def _headers(self) -> Dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def _use_token(self, token: Optional[str], source: str) -> None:
        self.token, self._token_source = token, source
        # Also on the client itself, so raw requests through it (`session._client`) are authenticated too.
        if token:
            self._client.headers["Authorization"] = f"Bearer {token}"
        else:
            self._client.headers.pop("Authorization", None)

    def request(self, method: str, path: str, *, json: Any = None, params: Optional[Dict[str, Any]] = None) -> Any:
        url = "/api/v1" + path if not path.startswith("/api/") else path
        public = url[len("/api/v1"):] in PUBLIC_PATHS
        if not public and not self._token_source:
            self._authenticate()
        resp = self._send(method, url, json, params)
        if resp.status_code == 401 and not public and self._token_source == "cache":
            # A cached token the master no longer knows (expired, revoked, another database): log in afresh.
            _token_cache.drop_token(self.master_key(), self.username())
            self._authenticate(use_cache=False)
            resp = self._send(method, url, json, params)
        if resp.status_code >= 400:
            message, problems = _error_text(resp)
            cls = errors.NotFoundError if resp.status_code == 404 else errors.APIError
            raise cls(resp.status_code, message, problems)
        if not resp.content:
            return None
        return resp.json()

    def _send(self, method: str, url: str, json: Any, params: Optional[Dict[str, Any]]) -> httpx.Response:
        attempt = 0
        while True:
            try:
                return self._client.request(method, url, json=json, params=params, headers=self._headers())
            except _RETRYABLE as e:
                attempt += 1
                if attempt > self.retries:
                    raise errors.MasterNotFoundError(
                        f"cannot reach the master at {self.master} ({e.__class__.__name__}: {e}); "
                        "check that it is running and that DET_MASTER points at it"
                    ) from None
                time.sleep(min(0.2 * 2**attempt, 3.0))

    # ------------------------------------------------------------ authentication

    def master_key(self) -> str:
        """The key of this master in the token cache: its URL, or `local:<data dir>` for one on this machine."""
        if self._master_key is None:
            key = self.master
            if urllib.parse.urlsplit(self.master).hostname in _LOOPBACK_HOSTS:
                info = self.get("/master/info")
                if isinstance(info, dict) and info.get("data_dir"):
                    key = f"local:{info['data_dir']}"
            self._master_key = key
        return self._master_key

    def username(self) -> str:
        """The user this session acts as (when it is not a trial's session)."""
        if self.user is None:
            self.user = (os.environ.get("DET_USER") or _token_cache.last_user(self.master_key()) or DEFAULT_USER)
        return self.user

    def _authenticate(self, use_cache: bool = True) -> None:
        with self._auth_lock:
            if self._token_source and use_cache:
                return
            env_token = os.environ.get("DET_SESSION_TOKEN")
            if env_token and self.user is None:
                self._use_token(env_token, "env")
                return
            user = self.username()
            cached = _token_cache.get_token(self.master_key(), user) if use_cache else None
            if cached:
                self._use_token(cached, "cache")
                return
            try:
                self.login(user, "", make_default=False)
            except errors.APIError as e:
                if e.status_code not in (401, 403):
                    raise
                hint = e.message if e.status_code == 403 else f"{user!r} has a password"
                raise AuthenticationError(
                    401, f"not logged in to {self.master} as {user!r} ({hint}): run `det user login {user}` "
                         "(or pick another user with `det -u USER` / DET_USER)") from None

    def login(self, username: str, password: str, *, make_default: bool = True) -> Dict[str, Any]:
        """Log in, cache the token (mode 0600) and use it from now on; returns `{"token", "user", "expires_at"}`."""
        answer = self.post("/auth/login", {"username": username, "password": password})
        self.user = username
        self._use_token(answer["token"], "cache")
        _token_cache.store_token(self.master_key(), username, answer["token"], answer.get("expires_at"),
                                 make_default=make_default)
        return answer  # type: ignore[no-any-return]

    def logout(self) -> None:
        """Revoke this session's token on the master and forget it in the cache."""
        if not self._token_source:
            self._authenticate()
        if self._token_source == "env":
            raise AuthenticationError(400, "this session uses a trial's token (DET_SESSION_TOKEN); nothing to log out")
        try:
            self.post("/auth/logout")
        finally:
            _token_cache.drop_token(self.master_key(), self.username())
            self._use_token(None, "")

    def get(self, path: str, params: Optional[Dict[str, Any]] = None) -> Any:
        return self.request("GET", path, params=params)

    def post(self, path: str, json: Any = None) -> Any:
        return self.request("POST", path, json=json if json is not None else {})

    def patch(self, path: str, json: Any = None) -> Any:
        return self.request("PATCH", path, json=json if json is not None else {})

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    def stream(self, path: str) -> Iterator[bytes]:
        """The body of a GET, in chunks as they arrive (for large downloads); errors as `request` raises them."""
        url = "/api/v1" + path if not path.startswith("/api/") else path
        if not self._token_source:
            self._authenticate()
        with self._client.stream("GET", url, headers=self._headers()) as resp:
            if resp.status_code >= 400:
                resp.read()
                message, problems = _error_text(resp)
                cls = errors.NotFoundError if resp.status_code == 404 else errors.APIError
                raise cls(resp.status_code, message, problems)
            yield from resp.iter_bytes()

    def close(self) -> None:
        self._client.close()


def _error_text(resp: httpx.Response) -> "tuple[str, list[str]]":
    try:
        body = resp.json()
    except ValueError:
        return f"HTTP {resp.status_code}: {resp.text.strip()[:500]}", []
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if isinstance(detail, dict):
        return str(detail.get("message", detail)), [str(p) for p in detail.get("problems", [])]
    if isinstance(detail, list):  # FastAPI request validation errors
        problems = [".".join(str(x) for x in d.get("loc", [])) + ": " + str(d.get("msg")) for d in detail if isinstance(d, dict)]
        return f"HTTP {resp.status_code}: invalid request", problems
    return str(detail), []
