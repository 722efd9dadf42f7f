"""What protects the master's users in a browser: the security headers of every response (one Content-Security-
Policy for the whole UI), and the Host allow-list that stops DNS rebinding (docs/auth.md, "Input limits and browser
security").

The UI's pages load only their own scripts (no inline script, no inline event handler); the page configuration
travels in a JSON data block (`<script type="application/json" id="det-ui-config">`), which the policy does not run.
"""
import ipaddress
import json
import socket
from typing import Any, FrozenSet, Iterable, List, Optional, Sequence, Tuple

from starlette.types import Message, Receive, Scope, Send

CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    # Only the master's own script files run: no inline script, no inline event handler. plotly.js's WebGL charts
    # (parallel coordinates) compile their shader programs with `new Function`, hence 'unsafe-eval'; the UI's own
    # code never evaluates text.
    "script-src 'self' 'unsafe-eval'",
    # plotly.js sets the style of the elements it draws and adds a stylesheet of its own
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])
# FastAPI's API explorer pages (/docs, /redoc) load their scripts from a CDN and start them with an inline script
# that holds no user data; the rest of the policy is the same.
API_DOCS_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net",
    "style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net",
    "img-src 'self' data: https://fastapi.tiangolo.com",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
])
API_DOCS_PATHS = ("/docs", "/docs/oauth2-redirect", "/redoc")

SECURITY_HEADERS: Tuple[Tuple[bytes, bytes], ...] = (
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
)


LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
ANY_HOST = "*"


def policy_for(path: str) -> str:
    return API_DOCS_POLICY if path in API_DOCS_PATHS else CONTENT_SECURITY_POLICY


class SecurityHeadersMiddleware:
    """Adds the security headers and the Content-Security-Policy to every HTTP response."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = policy_for(scope["path"]).encode()

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers") or []}
                extra = [(k, v) for k, v in SECURITY_HEADERS + ((b"content-security-policy", policy),)
                         if k not in present]
                message["headers"] = list(message.get("headers") or []) + extra
            await send(message)

        await self.app(scope, receive, send_with_headers)


# ---------------------------------------------------------------- the Host allow-list


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def normalise_host(value: str) -> Optional[str]:
    """The host name of a Host header value (lower case, without port or IPv6 brackets), or None when malformed."""
    value = value.strip().lower()
    if not value or any(ch in value for ch in "/\\@ \t"):
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or (value[end + 1:] and not (value[end + 1] == ":" and value[end + 2:].isdigit())):
            return None
        return value[1:end]
    if value.count(":") == 1:
        value, port = value.split(":")
        if not port.isdigit():
            return None
    elif ":" in value:  # a bare IPv6 address
        return value if _is_ip(value) else None
    return value.rstrip(".") or None


def allowed_hosts(bind_host: str, configured: Iterable[str] = ()) -> FrozenSet[str]:
    """The host names a master listening on `bind_host` answers to.

    Its own address; localhost, 127.0.0.1 and ::1 when it listens on loopback or on every address; this machine's
    names when it listens beyond loopback; plus `configured` (`allowed_hosts` of the master config; "*": any).
    A request to an IP address is always answered: DNS rebinding needs a name.
    """
    host = bind_host.strip().strip("[]").lower()
    names = {host} if host not in ("", "0.0.0.0", "::") else set()
    if host in ("", "0.0.0.0", "::") or _is_loopback(host):
        names |= LOOPBACK_NAMES
    if not _is_loopback(host) and socket.gethostname():  # no DNS lookup: a fully qualified name is configured
        names.add(socket.gethostname().lower())
    for name in configured:
        normal = ANY_HOST if name.strip() == ANY_HOST else normalise_host(name)
        if normal:
            names.add(normal)
    return frozenset(names)


def check_allowed_hosts_setting(value: Any) -> List[str]:
    """The `allowed_hosts` master setting as a list of names; ValueError naming the problem."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"allowed_hosts: expected a list of host names (e.g. [det.example.com]), not {value!r}")
    bad = [v for v in value if v.strip() != ANY_HOST and normalise_host(v) is None]
    if bad:
        raise ValueError(f"allowed_hosts: {', '.join(map(repr, bad))} is not a host name (e.g. det.example.com)")
    return [v.strip() for v in value]


class HostAllowListMiddleware:
    """Answers 421 to a request whose Host header names a host this master does not serve (DNS rebinding)."""

    def __init__(self, app: Any, hosts: Sequence[str]) -> None:
        self.app = app
        self.hosts = frozenset(hosts)
        self.any = ANY_HOST in self.hosts

    def allows(self, header: Optional[bytes]) -> bool:
        if self.any:
            return True
        host = normalise_host(header.decode("latin-1")) if header else None
        return host is not None and (host in self.hosts or _is_ip(host))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self.any:
            await self.app(scope, receive, send)
            return
        header = next((v for k, v in scope.get("headers") or [] if k == b"host"), None)
        if self.allows(header):
            await self.app(scope, receive, send)
            return
        shown = header.decode("latin-1")[:100] if header else "(none)"
        names = ", ".join(sorted(h for h in self.hosts if h != ANY_HOST))
        body = json.dumps({"detail": {"message": (
            f"this master does not serve the host {shown!r} (Host header); it answers to {names} and IP addresses. "
            "If you reach it under another name, add that name to allowed_hosts in the master config"),
            "problems": []}}).encode()
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 421, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
