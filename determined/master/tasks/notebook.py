"""JupyterLab as a task: its command line, its readiness, and its idleness read from Jupyter's own REST API.

JupyterLab listens on 127.0.0.1 only, under the base URL `/proxy/<task id>/`, with a random token that only the
master knows (`tasks.service_secret`): the master's proxy adds it to every request it forwards, so a browser never
sees it and nothing reaches JupyterLab but through the master's checks.

Idleness (`notebook_idle_type`, as Determined's check_idle.py):
  - `kernels_or_terminals` (default): idle when no kernel, terminal or session exists;
  - `kernel_connections`: idle when no kernel has a client connected;
  - `activity`: idle when no kernel is busy and the newest `last_activity` of the kernels and terminals has not
    moved since the previous look.
"""
import json
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional, Tuple

from determined.master.tasks import states

TIMEOUT_S = 2.0


def jupyter_command(python: str, *, port: "int | str", base_url: str, token: str, root_dir: str,
                    allow_root: bool = False, host: str = "127.0.0.1") -> List[str]:
    """JupyterLab's command line (`allow_root`: the task runs as root, a master without run-as accounts; `host`:
    the address it listens on, a Ray node's own IP for a task there)."""
    return [python, "-m", "jupyterlab", "--no-browser", f"--ip={host}", f"--port={port}",
            "--port-retries=0", f"--ServerApp.base_url={base_url}", f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root_dir}", "--ServerApp.open_browser=False",
            "--ServerApp.terminado_settings={\"shell_command\": [\"/bin/bash\"]}",
            "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--ServerApp.allow_remote_access=False"] + (["--allow-root"] if allow_root else [])


def _get(port: int, path: str, token: Optional[str], host: str = "127.0.0.1") -> Optional[Any]:
    request = urllib.request.Request(f"http://{host}:{port}{path}")
    # Jupyter (allow_remote_access=False) answers only a loopback Host, also on a Ray node's IP (rm/ray_tasks.py)
    request.add_header("Host", f"127.0.0.1:{port}")
    if token:
        request.add_header("Authorization", f"token {token}")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:  # noqa: S310 (loopback only)
            body = answer.read()
            return json.loads(body) if body[:1] in (b"{", b"[") else {}
    except (urllib.error.URLError, OSError, ValueError):
        return None


def answers(port: int, base_url: str, token: Optional[str], task_type: str, host: str = "127.0.0.1") -> bool:
    """Whether the task's server (at `host`:`port`) answers yet."""
    if not port:
        return False
    if task_type == states.SHELL:  # the SSH server accepts connections
        import socket

        try:
            with socket.create_connection((host, port), timeout=TIMEOUT_S):
                return True
        except OSError:
            return False
    if task_type == states.NOTEBOOK:
        return _get(port, f"{base_url}api/status", token, host) is not None
    return _get(port, f"{base_url.rstrip('/')}/data/environment", None, host) is not None


def read_activity(port: int, base_url: str, token: str, host: str = "127.0.0.1") -> Optional[Dict[str, Any]]:
    """The kernels, terminals and sessions of the notebook (None: it did not answer)."""
    kernels = _get(port, f"{base_url}api/kernels", token, host)
    terminals = _get(port, f"{base_url}api/terminals", token, host)
    sessions = _get(port, f"{base_url}api/sessions", token, host)
    if not isinstance(kernels, list) or not isinstance(sessions, list):
        return None
    return {"kernels": kernels, "terminals": terminals if isinstance(terminals, list) else [], "sessions": sessions}


def in_use(state: Dict[str, Any], idle_type: str, previous: Any) -> Tuple[bool, Any]:
    """Whether the notebook is in use by `idle_type`'s rule, and the marker the next call compares with."""
    kernels, terminals, sessions = state["kernels"], state["terminals"], state["sessions"]
    if idle_type == "kernel_connections":
        return any(int(k.get("connections") or 0) > 0 for k in kernels), None
    if idle_type == "activity":
        busy = any(k.get("execution_state") == "busy" for k in kernels)
        stamps = [str(x.get("last_activity") or "") for x in kernels + terminals]
        newest = max(stamps) if stamps else ""
        moved = previous is not None and newest != previous
        return busy or moved, newest
    return bool(kernels or terminals or sessions), None
