"""How many connections a served master holds open: at most MAX_CONNECTIONS in all and MAX_PER_ADDRESS from one
client address (docs/server.md, "Input limits").

Each open connection costs the master memory whether or not it ever sends a request, so a flood of connections
must not grow it without bound. A connection past a cap is answered 503 (with Retry-After) to its first request
and closed; one that sends nothing at all is closed after the keep-alive timeout, as an idle one is after its
last answer. The caps are read at start from DET_MAX_CONNECTIONS and DET_MAX_CONNECTIONS_PER_ADDRESS (an
address behind a reverse proxy is the proxy's: raise the per-address cap there).

The uvicorn server of a master (determined/master/embedded.py) gets `server_options()`.
"""
import json
import os
from typing import Any, Callable, Dict, Iterable, Optional, Tuple

from uvicorn.protocols.http.h11_impl import H11Protocol

from determined import errors

MAX_CONNECTIONS = 1024
MAX_PER_ADDRESS = 256
MAX_CONNECTIONS_ENV = "DET_MAX_CONNECTIONS"
MAX_PER_ADDRESS_ENV = "DET_MAX_CONNECTIONS_PER_ADDRESS"
RETRY_AFTER_S = 1


def _cap(env: str, default: int) -> int:
    text = os.environ.get(env, "").strip()
    if not text:
        return default
    if not text.isdigit() or int(text) < 1:
        raise errors.DeterminedError(f"{env}={text!r}: expected a positive whole number of connections (default "
                                     f"{default}); set it in the master's environment, or unset it")
    return int(text)


def caps() -> Tuple[int, int]:
    """(MAX_CONNECTIONS, MAX_PER_ADDRESS), or their values in the environment."""
    return _cap(MAX_CONNECTIONS_ENV, MAX_CONNECTIONS), _cap(MAX_PER_ADDRESS_ENV, MAX_PER_ADDRESS)


def refusal(clients: Iterable[Optional[Tuple[str, int]]], client: Optional[Tuple[str, int]], total: int,
            per_address: int) -> Optional[str]:
    """Why a new connection from `client` must be refused, given the `clients` of every open connection (it
    included), or None when it may stay."""
    open_clients = list(clients)
    if len(open_clients) > total:
        return (f"the master holds its most connections ({total}) open; try again in a moment (its admin can raise "
                f"{MAX_CONNECTIONS_ENV})")
    address = client[0] if client else None
    if address is not None and sum(1 for c in open_clients if c and c[0] == address) > per_address:
        return (f"your address ({address}) holds the most connections one address may ({per_address}); close some "
                f"and try again (the master's admin can raise {MAX_PER_ADDRESS_ENV})")
    return None


def _refusing_app(message: str) -> Callable[..., Any]:
    body = json.dumps({"detail": {"message": message, "problems": []}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"retry-after", str(RETRY_AFTER_S).encode()), (b"connection", b"close")]

    async def app(scope: Any, receive: Any, send: Any) -> None:
        del scope, receive  # the body is never read
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


def capped_protocol(total: int, per_address: int) -> type:
    """uvicorn's h11 protocol with the caps of this module."""

    class CappedH11Protocol(H11Protocol):
        refused = False

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            why = refusal((c.client for c in self.connections), self.client, total, per_address)
            if why is not None:
                self.refused = True
                self.app = _refusing_app(why)
            # closed after the keep-alive timeout unless a request comes (a refused one: whatever it sends)
            self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive,
                                                                self.timeout_keep_alive_handler)

        def _unset_keepalive_if_required(self) -> None:
            if not self.refused:
                super()._unset_keepalive_if_required()

    return CappedH11Protocol


def server_options() -> Dict[str, Any]:
    """Options of `uvicorn.Config` that apply the caps (read from the environment now)."""
    total, per_address = caps()
    return {"http": capped_protocol(total, per_address)}


__all__ = ["MAX_CONNECTIONS", "MAX_PER_ADDRESS", "caps", "capped_protocol", "refusal", "server_options"]
