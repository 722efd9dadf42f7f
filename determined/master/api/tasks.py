"""Interactive task routes (determined/master/tasks/ has the rules): launch, list, describe, kill, config, logs and
the one-time browser address of commands, notebooks and TensorBoards; /tasks for every type (`det task`)."""
from typing import Any, Dict, List, Optional

from fastapi import APIRouter, Query, Request

from determined.master.api._deps import master_of, problems_as_http
from determined.master.api.schemas._base import fields_of
from determined.master.api.schemas.tasks import (LaunchAnswer, LaunchBody, OpenAnswer, ShellAnswer, TaskAnswer,
                                                 TaskConfigAnswer, TaskList, TaskLogs, TensorBoardBody)
from determined.master.problems import RequestProblem
from determined.master.security import auth
from determined.master.tasks import access, records, states
from determined.master.tasks.config import Host as TaskHost
from determined.master.tasks import jobs as task_jobs

router = APIRouter()
task_jobs.register()  # tasks are jobs of the queue (scheduling/jobs.py)

_KINDS = {"commands": states.COMMAND, "notebooks": states.NOTEBOOK, "tensorboards": states.TENSORBOARD,
          "shells": states.SHELL}


def _launch(request: Request, task_type: str, body: Optional[Any]) -> Dict[str, Any]:
    master = master_of(request)
    pools = getattr(master, "pools", None)
    known = sorted(pools.pools) if pools is not None else None
    default_pool = ((pools.default_compute if task_type != states.TENSORBOARD else pools.default_aux)
                    if pools is not None else "default")
    total = int(master.total_slots() or 0) if master.rm is not None else 0
    with problems_as_http():
        if master.rm is None:
            raise RequestProblem(409, "this master does not run tasks (it was opened to read and record only); "
                                      "start one with `det master up`, or run the command without DET_MASTER")
        with master.write() as s:
            task, warnings = records.launch(s, auth.principal_of(request), task_type,
                                            fields_of(body) if body is not None else {}, total_slots=total,
                                            default_pool=default_pool, known_pools=known,
                                            host=TaskHost.of(master.rm))
            return {"task": records.to_json(task), "config": task.config, "warnings": warnings}


@router.post("/commands", response_model=LaunchAnswer)
def launch_command(request: Request, body: Optional[LaunchBody] = None) -> Dict[str, Any]:
    """Launch a command (`det cmd run`): `config.entrypoint` runs in the context directory."""
    return _launch(request, states.COMMAND, body)


@router.post("/notebooks", response_model=LaunchAnswer)
def launch_notebook(request: Request, body: Optional[LaunchBody] = None) -> Dict[str, Any]:
    """Launch JupyterLab (`det notebook start`), reached through the master at /proxy/<id>/."""
    return _launch(request, states.NOTEBOOK, body)


@router.post("/shells", response_model=LaunchAnswer)
def launch_shell(request: Request, body: Optional[LaunchBody] = None) -> Dict[str, Any]:
    """Launch a shell (`det shell start`): an SSH server reached through the master's proxy with its own key pair."""
    return _launch(request, states.SHELL, body)


@router.get("/shells/{task_id}", response_model=ShellAnswer)
def get_shell(request: Request, task_id: str) -> Dict[str, Any]:
    """The shell, and its key pair for its owner or an admin (`det shell open`)."""
    with problems_as_http(), master_of(request).read() as s:
        principal = auth.principal_of(request)
        if principal.is_trial:
            raise RequestProblem(403, "a trial's token cannot read interactive tasks")
        task = records.get_task(s, task_id, states.SHELL)
        mine = records.may_open(principal, task)
        return {"task": records.to_json(task), "privateKey": task.ssh_private_key if mine else None,
                "publicKey": task.ssh_public_key}


@router.post("/tensorboards", response_model=LaunchAnswer)
def launch_tensorboard(request: Request, body: TensorBoardBody) -> Dict[str, Any]:
    """Launch TensorBoard on experiments' metrics (`det tensorboard start`), at /proxy/<id>/."""
    return _launch(request, states.TENSORBOARD, body)


def _list(request: Request, task_types: List[str], users: Optional[List[str]], workspace_id: Optional[int],
          active: bool) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).read() as s:
        principal = auth.principal_of(request)
        if principal.is_trial:
            raise RequestProblem(403, "a trial's token cannot list interactive tasks")
        tasks = records.list_tasks(s, task_types, users=users, workspace_id=workspace_id, include_ended=not active)
        return {"tasks": [records.to_json(t) for t in tasks]}


@router.get("/commands", response_model=TaskList)
def list_commands(request: Request, users: Optional[List[str]] = Query(None, max_length=100),
                  workspace_id: Optional[int] = None, active: bool = False) -> Dict[str, Any]:
    return _list(request, [states.COMMAND], users, workspace_id, active)


@router.get("/notebooks", response_model=TaskList)
def list_notebooks(request: Request, users: Optional[List[str]] = Query(None, max_length=100),
                   workspace_id: Optional[int] = None, active: bool = False) -> Dict[str, Any]:
    return _list(request, [states.NOTEBOOK], users, workspace_id, active)


@router.get("/shells", response_model=TaskList)
def list_shells(request: Request, users: Optional[List[str]] = Query(None, max_length=100),
                workspace_id: Optional[int] = None, active: bool = False) -> Dict[str, Any]:
    return _list(request, [states.SHELL], users, workspace_id, active)


@router.get("/tensorboards", response_model=TaskList)
def list_tensorboards(request: Request, users: Optional[List[str]] = Query(None, max_length=100),
                      workspace_id: Optional[int] = None, active: bool = False) -> Dict[str, Any]:
    return _list(request, [states.TENSORBOARD], users, workspace_id, active)


@router.get("/tasks", response_model=TaskList)
def list_all_tasks(request: Request, users: Optional[List[str]] = Query(None, max_length=100),
                   workspace_id: Optional[int] = None, active: bool = False) -> Dict[str, Any]:
    """Every interactive task (`det task list`; `active=true`: those not ended)."""
    return _list(request, list(states.TYPES), users, workspace_id, active)


def _get(request: Request, task_id: str, task_type: Optional[str]) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).read() as s:
        if auth.principal_of(request).is_trial:
            raise RequestProblem(403, "a trial's token cannot read interactive tasks")
        return {"task": records.to_json(records.get_task(s, task_id, task_type))}


def _kill(request: Request, task_id: str, task_type: Optional[str]) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).write() as s:
        task = records.kill(s, auth.principal_of(request), records.get_task(s, task_id, task_type))
        return {"task": records.to_json(task)}


def _getter(task_type: str) -> Any:
    def route(request: Request, task_id: str) -> Dict[str, Any]:
        return _get(request, task_id, task_type)
    return route


def _killer(task_type: str) -> Any:
    def route(request: Request, task_id: str) -> Dict[str, Any]:
        return _kill(request, task_id, task_type)
    return route


for _path, _type in _KINDS.items():
    if _type != states.SHELL:  # a shell's answer has its keys (get_shell)
        router.add_api_route(f"/{_path}/{{task_id}}", _getter(_type), methods=["GET"], response_model=TaskAnswer,
                             name=f"get_{_path[:-1]}")
    router.add_api_route(f"/{_path}/{{task_id}}/kill", _killer(_type), methods=["POST"], response_model=TaskAnswer,
                         name=f"kill_{_path[:-1]}")


@router.get("/tasks/{task_id}", response_model=TaskAnswer)
def get_task(request: Request, task_id: str) -> Dict[str, Any]:
    return _get(request, task_id, None)


@router.post("/tasks/{task_id}/kill", response_model=TaskAnswer)
def kill_task(request: Request, task_id: str) -> Dict[str, Any]:
    """Kill the task (its owner or an admin)."""
    return _kill(request, task_id, None)


@router.get("/tasks/{task_id}/config", response_model=TaskConfigAnswer)
def task_config(request: Request, task_id: str) -> Dict[str, Any]:
    """The task's resolved config (its owner or an admin; a TensorBoard's: every user)."""
    with problems_as_http(), master_of(request).read() as s:
        task = records.get_task(s, task_id)
        records.check_open(auth.principal_of(request), task, "read the config of")
        return {"config": task.config}


@router.get("/tasks/{task_id}/logs", response_model=TaskLogs)
def task_logs(request: Request, task_id: str, after_id: int = Query(0, ge=0, le=2**62),
              tail: Optional[int] = Query(None, ge=0, le=records.MAX_LOG_LINES),
              limit: int = Query(records.MAX_LOG_LINES, ge=1, le=records.MAX_LOG_LINES)) -> Dict[str, Any]:
    """The task's log lines after line `after_id` (`tail`: the last N), oldest first (its owner or an admin)."""
    with problems_as_http(), master_of(request).read() as s:
        task = records.get_task(s, task_id)
        records.check_open(auth.principal_of(request), task, "read the logs of")
        ended = task.state == states.TERMINATED
        rows = records.read_logs(s, task, after_id=after_id, limit=limit, tail=tail)
        return {"logs": [records.log_json(r) for r in rows], "ended": ended}


@router.post("/tasks/{task_id}/open", response_model=OpenAnswer)
def open_task(request: Request, task_id: str) -> Dict[str, Any]:
    """A one-time address (valid for a minute) that opens the task's server in a browser, as the caller."""
    with problems_as_http(), master_of(request).read() as s:
        principal = auth.principal_of(request)
        task = records.get_task(s, task_id)
        records.check_open(principal, task, "open")
        address = records.service_address(task)
        if address is None or task.task_type == states.SHELL:
            raise RequestProblem(409, f"task {task.id} has no web page to open (a command or a shell); see "
                                      f"`det task logs {task.id}`, or connect to a shell with `det shell open`")
        if task.state == states.TERMINATED:
            raise RequestProblem(409, f"task {task.id} has ended ({task.end_reason}); start a new one")
        assert principal.user_id is not None
        code = access.access_of(request.app).open_code(task.id, principal.user_id)
        return {"url": f"{address}?det_open={code}"}
