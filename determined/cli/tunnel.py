"""ssh's ProxyCommand for `det shell`: `python -m determined.cli.tunnel MASTER_URL SHELL_ID [--user USER]` carries
stdin and stdout over a WebSocket to `<master>/proxy/<shell id>/`, the master's proxy, which relays it to the
shell's SSH server. It authenticates as USER with the token `det user login` cached (the shell's owner or an
admin; anyone else is refused before a byte reaches the shell)."""
import argparse
import os
import sys
import threading
from typing import Any, List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m determined.cli.tunnel")
    parser.add_argument("master")
    parser.add_argument("shell_id")
    parser.add_argument("--user", default=None)
    args = parser.parse_args(argv)

    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    from determined.common.api import Session

    session = Session(args.master, user=args.user)
    session.get(f"/tasks/{args.shell_id}")  # logs in (a cached token) and checks the shell exists
    url = args.master.rstrip("/").replace("https://", "wss://", 1).replace("http://", "ws://", 1)
    try:
        with connect(f"{url}/proxy/{args.shell_id}/", additional_headers={"Authorization": f"Bearer {session.token}"},
                     max_size=None, compression=None, open_timeout=30, ping_interval=None) as ws:
            return _relay(ws)
    except InvalidStatus as e:
        print(f"det tunnel: the master refused the connection to shell {args.shell_id} "
              f"(HTTP {e.response.status_code}): {e.response.body.decode(errors='replace')[:300]}", file=sys.stderr)
        return 1


def _relay(ws: Any) -> int:
    """stdin to the WebSocket, the WebSocket to stdout, until either side ends."""
    from websockets.exceptions import ConnectionClosed

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer

    def upstream() -> None:
        try:
            while True:
                data = os.read(stdin.fileno(), 1 << 18)
                if not data:
                    break
                ws.send(data)
        except (OSError, ConnectionClosed):
            pass
        finally:
            ws.close()

    threading.Thread(target=upstream, daemon=True).start()
    try:
        while True:
            data = ws.recv()
            stdout.write(data if isinstance(data, bytes) else data.encode())
            stdout.flush()
    except (ConnectionClosed, BrokenPipeError):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
