import time
from typing import Any, Dict, Optional

import httpx

from determined import errors

_RETRYABLE = (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError, httpx.ConnectTimeout)


def make_url(master: str) -> str:
    """Normalise a master address: `host:port` gets `http://`, trailing slashes go."""
    master = master.strip()
    if "://" not in master:
        master = "http://" + master
    return master.rstrip("/")


class Session:
    """A JSON session against the REST API under `/api/v1` of one master.

    `transport` lets the same session speak to a master app in-process (an ASGI or WSGI transport)
    instead of over a socket.
    """

    def __init__(
        self,
        master: str,
        token: Optional[str] = None,
        *,
        client: Optional[httpx.Client] = None,
        timeout: float = 60.0,
        retries: int = 5,
    ) -> None:
        self.master = make_url(master)
        self.token = token
        self.retries = retries
        self._client = client or httpx.Client(base_url=self.master, timeout=timeout)

    def _headers(self) -> Dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def request(self, method: str, path: str, *, json: Any = None, params: Optional[Dict[str, Any]] = None) -> Any:
        url = "/api/v1" + path if not path.startswith("/api/") else path
        attempt = 0
        while True:
            try:
                resp = self._client.request(method, url, json=json, params=params, headers=self._headers())
                break
            except _RETRYABLE as e:
                attempt += 1
                if attempt > self.retries:
                    raise errors.MasterNotFoundError(
                        f"cannot reach the master at {self.master} ({e.__class__.__name__}: {e}); "
                        "check that it is running and that DET_MASTER points at it"
                    ) from None
                time.sleep(min(0.2 * 2**attempt, 3.0))
        if resp.status_code >= 400:
            message, problems = _error_text(resp)
            cls = errors.NotFoundError if resp.status_code == 404 else errors.APIError
            raise cls(resp.status_code, message, problems)
        if not resp.content:
            return None
        return resp.json()

    def get(self, path: str, params: Optional[Dict[str, Any]] = None) -> Any:
        return self.request("GET", path, params=params)

    def post(self, path: str, json: Any = None) -> Any:
        return self.request("POST", path, json=json if json is not None else {})

    def patch(self, path: str, json: Any = None) -> Any:
        return self.request("PATCH", path, json=json if json is not None else {})

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

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
