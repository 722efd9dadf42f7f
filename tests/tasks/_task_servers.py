"""Small servers of a test's own on 127.0.0.1 that play a task's server (JupyterLab, an SSH server) in the proxy's
tests: each connection runs `handler`, and `seen` counts them (a test adds what else it records)."""
import asyncio
from typing import Any, Awaitable, Callable, Dict, Optional, Tuple

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def serve(handler: Handler, seen: Optional[Dict[str, Any]] = None
                ) -> Tuple[asyncio.AbstractServer, int, Dict[str, Any]]:
    """(the server, its port, `seen`: {"connections": N, ...})."""
    seen = seen if seen is not None else {"connections": 0, "requests": []}

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen["connections"] += 1
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # a client gone; the test's loop ending
        finally:
            writer.close()

    server = await asyncio.start_server(on_connection, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], seen
