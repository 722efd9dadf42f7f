"""A shell's terminal in the browser: the WebSocket /api/v1/shells/{id}/terminal, which the master joins to a login
shell on the task's SSH server (tasks/shell_server.py), on a pseudo-terminal of the browser's size, as the shell's
owner with the shell's own key (asyncssh's client; the `shell` extra). The Tasks page opens it (static/
shell_terminal.js, the emulator in static/terminal.js); `ssh` through `det shell open` stays the way for files and
port forwards.

The messages (their models in schemas/tasks.py):
  - the browser's first, a text message within OPEN_TIMEOUT_S: TerminalOpen {"token", "cols", "rows"}, the token
    of the shell's owner or an admin. A browser cannot put an Authorization header on a WebSocket, and a cookie
    would let any other site's page open one in the user's name; the token is the UI's own, which no other origin
    can read;
  - then the browser's binary messages are keystrokes (at most MAX_INPUT bytes each) for the shell, its text
    messages TerminalResize {"cols", "rows"};
  - the master's binary messages are the terminal's output; its last, a text message, is TerminalEnd
    {"exitStatus", "message"} (why it ended, in words), before it closes with 1000. A refusal is a TerminalEnd too,
    then a close with 4400 (a bad message), 4401 (no valid token), 4403 (not the owner or an admin), 4404 (no such
    shell), 4409 (the shell is not running) or 1011 (the task's SSH server did not answer).
"""
import asyncio
import logging
from typing import Any, Optional, Tuple

import anyio
from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from pydantic import ValidationError

from determined.master.api import proxy
from determined.master.api._deps import master_of
from determined.master.api.schemas.tasks import TerminalEnd, TerminalOpen, TerminalResize
from determined.master.problems import RequestProblem
from determined.master.security import auth
from determined.master.tasks import records, states

logger = logging.getLogger("determined.master")
router = APIRouter()

OPEN_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 10.0
MAX_INPUT = 64 * 1024  # one keystroke message (a paste included)
MAX_CONTROL = 4096  # one text message
TERM_TYPE = "xterm-256color"


class Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


async def _end(websocket: WebSocket, code: int, message: str, exit_status: Optional[int] = None) -> None:
    try:
        await websocket.send_text(TerminalEnd(exitStatus=exit_status, message=message).model_dump_json())
        await websocket.close(code, message[:120])
    except (RuntimeError, WebSocketDisconnect, OSError):
        pass  # the browser left first


def _shell_of(websocket: WebSocket, task_id: str, token: str) -> Tuple[str, str, str, int]:
    """(the shell owner's name, its private key, the SSH server's host, its port), for a token that may open it."""
    master = master_of(websocket)  # type: ignore[arg-type]
    with master.read() as s:
        principal = auth.resolve(s, token)
        if principal is None:
            raise Refused(4401, "invalid or expired token: log in again")
        try:
            task = records.get_task(s, task_id, states.SHELL)
        except RequestProblem as e:
            raise Refused(4404, e.message) from None
        if not records.may_open(principal, task):
            raise Refused(4403, f"shell {task_id} is {task.owner}'s: only its owner and admins open its terminal")
        if task.state != states.RUNNING or not task.ssh_private_key:
            raise Refused(4409, f"shell {task_id} is {task.state.replace('STATE_', '').lower()}, not running: "
                                "start one with `det shell start`")
        username, key = task.owner, task.ssh_private_key
    endpoint = master.tasks.endpoint(task_id) if getattr(master, "tasks", None) is not None else None
    if endpoint is None:
        raise Refused(4409, f"shell {task_id} is not serving yet (or any more); try again in a moment")
    port, _, _, host = proxy.endpoint_parts(endpoint)
    return username, key, host, int(port)


async def _opening(websocket: WebSocket) -> TerminalOpen:
    try:
        text = await asyncio.wait_for(websocket.receive_text(), OPEN_TIMEOUT_S)
    except asyncio.TimeoutError:
        raise Refused(4400, f"no opening message within {OPEN_TIMEOUT_S:.0f} s") from None
    except KeyError:  # a binary message first
        raise Refused(4400, 'the first message must be text: {"token", "cols", "rows"}') from None
    if len(text) > MAX_CONTROL:
        raise Refused(4400, f"the opening message is over {MAX_CONTROL} bytes")
    try:
        return TerminalOpen.model_validate_json(text)
    except ValidationError as e:
        raise Refused(4400, "the opening message must be {\"token\", \"cols\", \"rows\"}: "
                            + "; ".join(f"{'.'.join(map(str, err['loc'])) or 'message'}: {err['msg']}"
                                        for err in e.errors()[:5])) from None


async def _pump_out(process: Any, websocket: WebSocket) -> None:
    while True:
        data = await process.stdout.read(1 << 16)
        if not data:
            return
        await websocket.send_bytes(data)


async def _pump_in(process: Any, websocket: WebSocket) -> None:
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return
        data, text = message.get("bytes"), message.get("text")
        if data is not None:
            if len(data) > MAX_INPUT:
                raise Refused(1009, f"a keystroke message is over {MAX_INPUT} bytes")
            process.stdin.write(data)
            await process.stdin.drain()  # a shell that does not read holds the browser back, not the master's memory
        elif text is not None:
            if len(text) > MAX_CONTROL:
                raise Refused(1009, f"a text message is over {MAX_CONTROL} bytes")
            try:
                size = TerminalResize.model_validate_json(text)
            except ValidationError:
                raise Refused(4400, 'a text message must be {"cols", "rows"}') from None
            process.change_terminal_size(size.cols, size.rows)


@router.websocket("/shells/{task_id}/terminal")
async def shell_terminal(websocket: WebSocket, task_id: str) -> None:
    """A login shell on the shell task's machine, for xterm-like terminals (see the module's docstring)."""
    await websocket.accept()
    try:
        opening = await _opening(websocket)
        username, key, host, port = await anyio.to_thread.run_sync(_shell_of, websocket, task_id,
                                                                   opening.token)
        try:
            import asyncssh
        except ImportError:
            raise Refused(1011, "the master has no SSH client: pip install 'determined-revived[shell]'") from None
        try:
            conn = await asyncio.wait_for(asyncssh.connect(
                host, port, username=username, client_keys=[asyncssh.import_private_key(key)], known_hosts=None,
                agent_path=None, config=None, preferred_auth="publickey"), CONNECT_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError, asyncssh.Error) as e:
            raise Refused(1011, f"shell {task_id}'s SSH server did not answer ({e.__class__.__name__}); "
                                "see `det task logs`") from None
    except Refused as r:
        await _end(websocket, r.code, r.message)
        return
    except WebSocketDisconnect:
        return
    async with conn:
        try:
            process = await conn.create_process(term_type=TERM_TYPE, term_size=(opening.cols, opening.rows),
                                                encoding=None)
        except (OSError, asyncssh.Error) as e:
            await _end(websocket, 1011, f"shell {task_id}'s SSH server refused a terminal: {e}"[:500])
            return
        pumps = [asyncio.ensure_future(_pump_out(process, websocket)),
                 asyncio.ensure_future(_pump_in(process, websocket))]
        try:
            done, _ = await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            for finished in done:
                finished.result()
            if pumps[0] in done:  # the shell ended: its exit status goes to the browser
                await process.wait_closed()
                status = process.exit_status
                if status is None:
                    raise ConnectionError("no exit status")
                await _end(websocket, 1000, f"the shell ended with exit status {status}", status)
        except Refused as r:
            await _end(websocket, r.code, r.message)
        except WebSocketDisconnect:
            pass
        except (OSError, asyncssh.Error):
            await _end(websocket, 1000, "the connection to the shell ended: the task was killed, or its SSH server "
                                        "stopped (see `det task logs`)")
        except Exception:  # a bug of the master's: the browser is told, the master goes on
            logger.exception("the terminal of shell %s failed", task_id)
            await _end(websocket, 1011, "the master could not relay this terminal; see the master's log")
        finally:
            for pump in pumps:
                pump.cancel()
            process.close()


__all__ = ["router"]
