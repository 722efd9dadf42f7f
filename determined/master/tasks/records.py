"""Tasks in the database: launch, read, kill, their logs, and who may do what.

Who may do what (two users and an admin): every logged-in user may list tasks and see their summaries (as every
user may read every experiment here); a task's config, logs and its server through the proxy are its owner's and
the admins' (a TensorBoard's: every user, as they may read its experiments); only the owner or an admin may kill
it. A trial's token may do none of it.
"""
import datetime
import json
import random
import secrets
import uuid
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from determined.master.db import Experiment, User, Workspace, utcnow
from determined.master.db.models import Task, TaskLog
from determined.master.problems import RequestProblem
from determined.master.scheduling import bindings, pools
from determined.master.security import auth
from determined.master.tasks import config as task_config
from determined.master.tasks import states

MASTER_STREAM = "master"  # the stream of the master's own lines in a task's logs
MAX_LOG_LINES = 10_000  # the most lines one logs request returns
MAX_TENSORBOARD_EXPERIMENTS = 100
MAX_CONFIG_BYTES = 256 * 1024  # a task config's JSON

_ADJECTIVES = ("amber", "brisk", "calm", "deft", "eager", "fair", "glad", "hale", "keen", "lucid", "merry", "noble",
               "proud", "quick", "rapid", "sunny", "tidy", "vivid", "warm", "witty")
_ANIMALS = ("badger", "crane", "dingo", "egret", "ferret", "gecko", "heron", "ibis", "jackal", "koala", "lemur",
            "marten", "newt", "otter", "puffin", "quail", "raven", "stoat", "tapir", "vole")


def pet_name() -> str:
    return f"{random.choice(_ADJECTIVES)}-{random.choice(_ANIMALS)}"


def _not_trial(principal: auth.Principal, what: str) -> None:
    if principal.is_trial:
        raise RequestProblem(403, f"a trial's token cannot {what} interactive tasks; use a user's token")


def get_task(s: Session, task_id: str, task_type: Optional[str] = None) -> Task:
    """The task `task_id` (of `task_type` when given), or 404."""
    task = s.get(Task, task_id) if isinstance(task_id, str) and len(task_id) <= 64 else None
    if task is None or (task_type is not None and task.task_type != task_type):
        kind = states.NAMES.get(task_type or "", "task").lower() if task_type else "task"
        raise RequestProblem(404, f"{kind} {task_id[:64]!r} not found; list them with `det task list`")
    return task


def may_open(principal: auth.Principal, task: Task) -> bool:
    """Whether `principal` may see the task's config and logs and reach its server (the proxy)."""
    if principal.is_trial:
        return False
    if principal.admin or task.task_type == states.TENSORBOARD:
        return True
    return principal.user_id is not None and principal.user_id == task.owner_id


def check_open(principal: auth.Principal, task: Task, what: str) -> None:
    _not_trial(principal, what)
    if not may_open(principal, task):
        raise RequestProblem(403, f"task {task.id} is {task.owner!r}'s; only {task.owner!r} or an admin may {what} it "
                                  f"(you are {principal.username!r})")


def check_kill(principal: auth.Principal, task: Task) -> None:
    _not_trial(principal, "kill")
    if principal.admin or (principal.user_id is not None and principal.user_id == task.owner_id):
        return
    raise RequestProblem(403, f"task {task.id} is {task.owner!r}'s; only {task.owner!r} or an admin may kill it "
                              f"(you are {principal.username!r})")


def _context_bytes(files: Any) -> Optional[bytes]:
    """The packed `--context` directory (base64 of a .tar.gz) checked with the rules of a model directory (size,
    safe members), or None."""
    if files is None or files == "":
        return None
    from determined.master.lifecycle.model_def import decode_model_def

    try:
        return decode_model_def(files, None, resolve_entrypoint=False)
    except RequestProblem as e:
        raise RequestProblem(e.status, "invalid task context: " + e.message.replace("model_definition: ", ""),
                             e.problems) from None


def _workspace(s: Session, workspace_id: Any) -> Workspace:
    if workspace_id is None:
        workspace_id = 1
    if isinstance(workspace_id, bool) or not isinstance(workspace_id, int):
        raise RequestProblem(400, "invalid task", ["workspace_id: expected a workspace's id"])
    ws = s.get(Workspace, workspace_id)
    if ws is None or ws.archived:
        raise RequestProblem(404, f"workspace {workspace_id} not found (or archived); see `det workspace list`")
    return ws


def _template_config(s: Session, name: Any) -> Dict[str, Any]:
    if name is None:
        return {}
    from determined.master.db import ConfigTemplate

    tpl = s.scalars(select(ConfigTemplate).where(ConfigTemplate.name == name)).first() if isinstance(name, str) else None
    if tpl is None:
        raise RequestProblem(404, f"template {str(name)[:80]!r} not found; see `det template list`")
    return dict(tpl.config or {})


def launch(s: Session, principal: auth.Principal, task_type: str, body: Dict[str, Any], *, total_slots: int,
           default_pool: str, known_pools: Optional[List[str]],
           host: Optional[task_config.Host] = None) -> Tuple[Task, List[str]]:
    """Store a new QUEUED task from a launch body (`config`, `template_name`, `context`, `workspace_id`; a
    TensorBoard's `experiment_ids`); its warnings (the notes on container fields). `host`: where tasks run, for
    the checks of bind_mounts and work_dir on the machine (config.check_on_host)."""
    _not_trial(principal, "launch")
    if principal.user_id is None:
        raise RequestProblem(403, "only a logged-in user may launch interactive tasks")
    ws = _workspace(s, body.get("workspace_id"))
    context = _context_bytes(body.get("context"))
    raw = body.get("config")
    if raw is not None and not isinstance(raw, dict):
        raise RequestProblem(400, "invalid task config", ["config: expected a mapping of task config fields"])
    if raw is not None and len(json.dumps(raw)) > MAX_CONFIG_BYTES:
        raise RequestProblem(400, "invalid task config", [f"config: larger than {MAX_CONFIG_BYTES // 1024} KiB of "
                                                          "JSON; put large values in files of the context directory"])
    merged = task_config.merge(_template_config(s, body.get("template_name")), raw or {})
    experiment_ids: Optional[List[int]] = None
    if task_type == states.TENSORBOARD:
        experiment_ids = _tensorboard_experiments(s, body.get("experiment_ids"))
    checked = task_config.check(merged, task_type, total_slots=total_slots, default_pool=default_pool,
                                known_pools=known_pools, has_context=context is not None, pet_name=pet_name())
    if host is not None:
        from determined.master.security.users import agent_user_group

        owner = s.get(User, principal.user_id)
        task_config.check_on_host(checked, host, agent_user_group(owner) if owner is not None else None)
    _place(s, principal, ws.id, merged, checked.raw)
    task = Task(id=str(uuid.uuid4()), task_type=task_type, state=states.QUEUED, description=checked.raw["description"],
                owner_id=principal.user_id, owner=principal.username, workspace_id=ws.id, config=checked.raw,
                context=context, slots=checked.slots, resource_pool=checked.resource_pool, priority=checked.priority,
                experiment_ids=experiment_ids, kill_requested=False, registered_time=utcnow(),
                service_secret=secrets.token_urlsafe(32) if task_type != states.COMMAND else None)
    if task_type == states.SHELL:
        task.ssh_private_key, task.ssh_public_key = ssh_key_pair()
    s.add(task)
    s.flush()
    for note in checked.notes:
        add_log(s, task.id, MASTER_STREAM, f"note: {note}")
    return task, checked.notes


def _place(s: Session, principal: auth.Principal, workspace_id: int, given: Dict[str, Any],
           checked: Dict[str, Any]) -> None:
    """The task's pool and priority on this master's pools, as an experiment's (docs/scheduling.md): a pool bound to
    other workspaces is refused, naming the binding; a config that names none gets its workspace's default pool
    (the aux pool for zero slots); a non-admin's priority above the master's `priority_limit` is refused."""
    cluster = pools.of_session(s)
    resources = checked["resources"]
    requested = given.get("resources", {}).get("resource_pool") if isinstance(given.get("resources"), dict) else None
    resources["resource_pool"] = bindings.resolve_pool(s, cluster, workspace_id, str(requested or ""),
                                                       int(resources.get("slots") or 0))
    priority = resources.get("priority")
    if isinstance(priority, int) and not isinstance(priority, bool):
        problem = cluster.priority_problem(priority, admin=principal.admin)
        if problem:
            raise RequestProblem(400, "invalid task config", [problem])


def ssh_key_pair() -> Tuple[str, str]:
    """A new ED25519 key pair (Determined 0.38's default `security.ssh.key_type`) in OpenSSH format."""
    try:
        import asyncssh
    except ImportError:
        raise RequestProblem(409, "this master cannot run shells: install its SSH server with "
                                  "pip install 'determined-revived[shell]'") from None
    key = asyncssh.generate_private_key("ssh-ed25519", comment="det-shell")
    return key.export_private_key("openssh").decode(), key.export_public_key("openssh").decode()


def _tensorboard_experiments(s: Session, value: Any) -> List[int]:
    if (not isinstance(value, list) or not value or len(value) > MAX_TENSORBOARD_EXPERIMENTS
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
        raise RequestProblem(400, "invalid TensorBoard", [
            f"experiment_ids: expected 1 to {MAX_TENSORBOARD_EXPERIMENTS} experiment ids: det tensorboard start 3 7"])
    ids = sorted(set(value))
    found = set(s.scalars(select(Experiment.id).where(Experiment.id.in_(ids))))
    missing = [i for i in ids if i not in found]
    if missing:
        raise RequestProblem(404, f"experiment(s) {', '.join(map(str, missing))} not found; see `det experiment list`")
    return ids


def kill(s: Session, principal: auth.Principal, task: Task) -> Task:
    """Ask for the task's end: a QUEUED task ends at once, a running one when the runner has stopped it."""
    check_kill(principal, task)
    if task.state == states.TERMINATED:
        return task
    if task.state == states.QUEUED:
        end(s, task, None, f"killed by {principal.username} before it started")
        return task
    task.kill_requested = True
    task.state = states.TERMINATING
    if not task.end_reason:
        task.end_reason = f"killed by {principal.username}"
    add_log(s, task.id, MASTER_STREAM, f"kill requested by {principal.username}")
    return task


def end(s: Session, task: Task, exit_code: Optional[int], reason: str) -> None:
    """Record the task's end (its slots are given back by the runner)."""
    task.state = states.TERMINATED
    task.exit_code = exit_code
    task.end_reason = task.end_reason if (task.kill_requested and task.end_reason) else reason
    task.end_time = utcnow()
    task.pid = None
    task.port = None
    task.context = None  # copied into the work dir at start; not kept
    task.ssh_private_key = None  # a shell's key opens nothing once it ended
    add_log(s, task.id, MASTER_STREAM, f"task ended: {task.end_reason}"
                                      + (f" (exit code {exit_code})" if exit_code is not None else ""))


def add_log(s: Session, task_id: str, stream: str, message: str, at: Optional[datetime.datetime] = None) -> None:
    s.add(TaskLog(task_id=task_id, timestamp=at or utcnow(), stream=stream, message=message))


def add_logs(s: Session, lines: Iterable[Tuple[str, datetime.datetime, str, str]]) -> None:
    s.add_all([TaskLog(task_id=tid, timestamp=at, stream=stream, message=text) for tid, at, stream, text in lines])


def read_logs(s: Session, task: Task, *, after_id: int = 0, limit: int = MAX_LOG_LINES,
              tail: Optional[int] = None) -> List[TaskLog]:
    """The task's log lines after line id `after_id`, oldest first (with `tail`: the last `tail` lines)."""
    query = select(TaskLog).where(TaskLog.task_id == task.id, TaskLog.id > after_id)
    if tail is not None:
        rows = list(s.scalars(query.order_by(TaskLog.id.desc()).limit(min(tail, limit))))
        return rows[::-1]
    return list(s.scalars(query.order_by(TaskLog.id).limit(limit)))


def list_tasks(s: Session, task_types: Sequence[str], *, users: Optional[Sequence[str]] = None,
               workspace_id: Optional[int] = None, include_ended: bool = True) -> List[Task]:
    query = select(Task).where(Task.task_type.in_(list(task_types)))
    if users:
        query = query.where(Task.owner.in_(list(users)))
    if workspace_id is not None:
        query = query.where(Task.workspace_id == workspace_id)
    if not include_ended:
        query = query.where(Task.state != states.TERMINATED)
    return list(s.scalars(query.order_by(Task.registered_time, Task.id)))


def count_active(s: Session) -> int:
    return int(s.scalar(select(func.count()).select_from(Task).where(Task.state.in_(states.ACTIVE))) or 0)


def _iso(at: Optional[datetime.datetime]) -> Optional[str]:
    return at.replace(tzinfo=datetime.timezone.utc).isoformat().replace("+00:00", "Z") if at else None


def service_address(task: Task) -> Optional[str]:
    """Where a browser opens the task's server through the master (None: a command has none)."""
    return f"/proxy/{task.id}/" if task.task_type in (states.NOTEBOOK, states.TENSORBOARD) else None


def idle_seconds(task: Task, now: Optional[datetime.datetime] = None) -> Optional[float]:
    if task.state != states.RUNNING or task.last_activity is None:
        return None
    return max(0.0, ((now or utcnow()) - task.last_activity).total_seconds())


def to_json(task: Task) -> Dict[str, Any]:
    """The task as the API shows it to every user (no config, no secret)."""
    return {
        "id": task.id,
        "type": task.task_type,
        "description": task.description,
        "state": task.state,
        "username": task.owner,
        "userId": task.owner_id,
        "workspaceId": task.workspace_id,
        "resourcePool": task.resource_pool,
        "slots": task.slots,
        "priority": task.priority,
        "exitCode": task.exit_code,
        "exitStatus": task.end_reason,
        "serviceAddress": service_address(task),
        "experimentIds": list(task.experiment_ids or []),
        "registeredTime": _iso(task.registered_time),
        "startTime": _iso(task.start_time),
        "endTime": _iso(task.end_time),
        "idleSeconds": idle_seconds(task),
    }


def log_json(row: TaskLog) -> Dict[str, Any]:
    return {"id": row.id, "taskId": row.task_id, "timestamp": _iso(row.timestamp), "stream": row.stream,
            "message": row.message}


def owner_of(s: Session, task: Task) -> Optional[User]:
    return s.get(User, task.owner_id) if task.owner_id is not None else None
