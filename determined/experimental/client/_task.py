"""Interactive tasks (`det cmd`, `det notebook`, `det tensorboard`, `det task`): launch, list, describe, kill, read
the config and logs, and open a task's server through the master (docs/tasks.md). `Tasks` works on one
connection; the CLI uses it, and so may a script: `Tasks(Connection()).launch("command", {...})`."""
from __future__ import annotations

import time
from typing import Any, Dict, Iterator, List, Optional

from determined.experimental.client._common import Connection, UsageError

KINDS = {"command": "commands", "notebook": "notebooks", "tensorboard": "tensorboards", "shell": "shells"}
TERMINATED = "STATE_TERMINATED"


class Tasks:
    """The task functions on a connection (`Connection(master)`); every answer is the master's JSON."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection if isinstance(connection, Connection) else Connection(session=connection)
        self._work: Any = None

    @property
    def _session(self) -> Any:
        return self._work if self._work is not None else self._connection.session

    @property
    def runs_master(self) -> bool:
        """Whether this process runs the master its tasks run on (no master was configured or running)."""
        return getattr(self._connection, "_embedded", None) is not None

    def workspace_id(self, name: Optional[str]) -> Optional[int]:
        if not name:
            return None
        for ws in self._session.get("/workspaces")["workspaces"]:
            if ws.get("name") == name:
                return int(ws["id"])
        raise UsageError(f"no workspace named {name!r}; see `det workspace list`")

    def launch(self, kind: str, config: Dict[str, Any], *, context_dir: Optional[str] = None,
               template: Optional[str] = None, workspace: Optional[str] = None,
               experiment_ids: Optional[List[int]] = None) -> Dict[str, Any]:
        """Launch a task of `kind` (command, notebook, tensorboard); the master's answer: task, config, warnings.
        With no master configured or running, this process becomes the data dir's master (`Connection.for_work`)."""
        if kind not in KINDS:
            raise UsageError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
        body: Dict[str, Any] = {"config": config}
        if context_dir:
            from determined.common.context import pack_model_dir_b64

            body["context"] = pack_model_dir_b64(context_dir)
        if template:
            body["template_name"] = template
        if experiment_ids is not None:
            body["experiment_ids"] = list(experiment_ids)
        self._work = self._connection.for_work()
        ws = self.workspace_id(workspace)
        if ws is not None:
            body["workspace_id"] = ws
        return dict(self._session.post(f"/{KINDS[kind]}", body))

    def list(self, kind: Optional[str] = None, *, users: Optional[List[str]] = None,
             active: bool = False) -> List[Dict[str, Any]]:
        path = f"/{KINDS[kind]}" if kind else "/tasks"
        params: Dict[str, Any] = {"active": "true" if active else "false"}
        if users:
            params["users"] = users
        return list(self._session.get(path, params=params)["tasks"])

    def get(self, task_id: str) -> Dict[str, Any]:
        return dict(self._session.get(f"/tasks/{task_id}")["task"])

    def resolve(self, prefix: str, kind: Optional[str] = None) -> str:
        """The id of the task whose id starts with `prefix` (a unique prefix, as Determined's CLI accepts)."""
        matches = [t["id"] for t in self.list(kind) if t["id"].startswith(prefix)]
        if len(matches) == 1:
            return str(matches[0])
        if not matches:
            raise UsageError(f"partial ID {prefix!r} not found; see `det task list`")
        raise UsageError(f"partial ID {prefix!r} is not unique: it matches {', '.join(matches[:5])}")

    def kill(self, task_id: str) -> Dict[str, Any]:
        return dict(self._session.post(f"/tasks/{task_id}/kill")["task"])

    def config(self, task_id: str) -> Dict[str, Any]:
        return dict(self._session.get(f"/tasks/{task_id}/config")["config"])

    def open_url(self, task_id: str) -> str:
        """A one-time address of the task's server (valid for a minute) for a browser, as this user."""
        path = str(self._session.post(f"/tasks/{task_id}/open")["url"])
        return self._session.master.rstrip("/") + path

    def logs(self, task_id: str, *, follow: bool = False, tail: Optional[int] = None,
             poll_s: float = 0.5) -> Iterator[Dict[str, Any]]:
        """The task's log lines, oldest first; `follow`: until the task ends."""
        after = 0
        params: Dict[str, Any] = {"after_id": after}
        if tail is not None:
            params["tail"] = tail
        while True:
            answer = self._session.get(f"/tasks/{task_id}/logs", params=params)
            for line in answer["logs"]:
                after = max(after, int(line["id"]))
                yield line
            if not follow or (answer["ended"] and not answer["logs"]):
                return
            params = {"after_id": after}
            if not answer["logs"]:
                time.sleep(poll_s)

    def wait(self, task_id: str, *, until: str = TERMINATED, timeout: Optional[float] = None,
             poll_s: float = 0.5) -> Dict[str, Any]:
        """Wait until the task is in state `until` (or has ended); the task."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            task = self.get(task_id)
            if task["state"] in (until, TERMINATED):
                return task
            if deadline is not None and time.monotonic() > deadline:
                return task
            time.sleep(poll_s)
