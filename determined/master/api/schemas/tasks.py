"""Interactive tasks (`det cmd`, `det notebook`, `det tensorboard`, `det task`): /commands, /notebooks,
/tensorboards, /tasks (determined/master/tasks/records.py writes them)."""
from typing import Any, Dict, List, Optional

from pydantic import Field

from determined.master.api.schemas._base import StrictWire, Wire


class TaskInfo(Wire):
    """An interactive task as every user sees it (no config, no secret)."""

    id: str
    type: str = Field(description="COMMAND, NOTEBOOK, TENSORBOARD or SHELL")
    description: str
    state: str = Field(description="STATE_QUEUED, STATE_STARTING, STATE_RUNNING, STATE_TERMINATING, STATE_TERMINATED")
    username: str
    userId: Optional[int] = None
    workspaceId: Optional[int] = None
    resourcePool: str
    slots: int
    priority: Optional[int] = None
    exitCode: Optional[int] = Field(None, description="the exit code of its process, once it ended")
    exitStatus: Optional[str] = Field(None, description="why it ended (or is ending)")
    serviceAddress: Optional[str] = Field(None, description="the master's path of its server: /proxy/<id>/")
    experimentIds: List[int] = []
    registeredTime: Optional[str] = None
    startTime: Optional[str] = None
    endTime: Optional[str] = None
    idleSeconds: Optional[float] = Field(None, description="seconds since it was last in use (running servers)")


class TaskAnswer(Wire):
    task: TaskInfo


class TaskList(Wire):
    tasks: List[TaskInfo]


class LaunchAnswer(Wire):
    """A launched task, its resolved config and the notes on config fields that need a container."""

    task: TaskInfo
    config: Dict[str, Any]
    warnings: List[str]


class LaunchBody(StrictWire):
    """POST /commands, /notebooks: a task to launch."""

    config: Optional[Dict[str, Any]] = Field(None, description="the task config (docs/tasks.md)")
    template_name: Optional[str] = Field(None, max_length=256, description="a config template merged under config")
    context: Optional[str] = Field(None, description="base64 of a .tar.gz of the --context directory")
    workspace_id: Optional[int] = Field(None, description="default: 1 (Uncategorized)")


class TensorBoardBody(LaunchBody):
    """POST /tensorboards: a TensorBoard of experiments."""

    experiment_ids: List[int] = Field(description="the experiments whose metrics it shows (1 to 100)")


class TaskConfigAnswer(Wire):
    config: Dict[str, Any]


class TaskLogLine(Wire):
    id: int
    taskId: str
    timestamp: Optional[str] = None
    stream: str = Field(description="stdout, stderr, or master (the master's lines about the task)")
    message: str


class TaskLogs(Wire):
    """Log lines after `after_id`, oldest first; `ended`: the task has ended (no more lines will come)."""

    logs: List[TaskLogLine]
    ended: bool


class OpenAnswer(Wire):
    """A one-time address that opens the task's server in a browser (valid for a minute, once)."""

    url: str


class ShellAnswer(Wire):
    """A shell with its SSH key pair: the private key only for its owner and admins (null for others, and once it
    ended)."""

    task: TaskInfo
    privateKey: Optional[str] = None
    publicKey: Optional[str] = None


class TerminalOpen(StrictWire):
    """A shell terminal's first message (/shells/{id}/terminal, a WebSocket): who opens it, and its size."""

    token: str = Field(min_length=1, max_length=2048, description="the API token of the shell's owner or an admin")
    cols: int = Field(ge=2, le=1000, description="the terminal's width in characters")
    rows: int = Field(ge=1, le=1000, description="the terminal's height in lines")


class TerminalResize(StrictWire):
    """The browser's terminal changed size."""

    cols: int = Field(ge=2, le=1000)
    rows: int = Field(ge=1, le=1000)


class TerminalEnd(Wire):
    """The master's last message on a shell terminal: why it ended."""

    exitStatus: Optional[int] = Field(None, description="the login shell's exit status, when it ended by itself")
    message: str
