"""What a task's process is on a Ray node: the command line, files and environment that `RankWorker.start_task`
(rm/_ray_worker.py) runs there, and the launch through the Ray resource manager (rm/ray.py `launch_task`).

The same task as on the master's machine (tasks/runner.py): the entry script (its context's `startup-hook.sh`
first), the context extracted into its run directory, the config's variables and the platform's `DET_*` ones, the
owner's account and sandbox on a master with run-as accounts. What differs: paths are the node's (`{RUN_DIR}`),
the interpreter is the node's (`{PYTHON}`), and a server (JupyterLab, a shell's SSH server) listens on the node's
own IP (`{HOST}`, `{PORT}`), where the master's proxy reaches it, with its secret (Jupyter's token, the shell's
key) still required. TensorBoards stay on the master's machine: their event files are written there.
"""
from typing import Any, Dict, List, Optional

from determined.master.db.models import Task
from determined.master.tasks import notebook, states

ENTRY_NAME = ".det-task-entry.sh"
HOST_KEY_NAME = ".ssh-host-key"
AUTHORIZED_KEY_NAME = ".ssh-authorized-key"
# The platform's variables the node gets from the master (the rest of a task's environment is the node's own,
# through the same allow-list as a trial's there).
REMOTE_ACCESS = "--ServerApp.allow_remote_access={REMOTE}"  # True on a node IP that is not loopback
PLATFORM_VARIABLES = ("DET_TASK_ID", "DET_TASK_TYPE", "DET_USER", "DET_USER_TOKEN", "DET_SESSION_TOKEN",
                      "DET_SLOT_IDS")


def runs_on_ray(rm: Any, task_type: str) -> bool:
    """Whether the resource manager places this task on a node of its own (the Ray one; TensorBoards excepted)."""
    return hasattr(rm, "launch_task") and task_type != states.TENSORBOARD


def node_program(task: Task, work_dir: str, allow_root: bool) -> List[str]:
    """The task's own command line on the node (after the entry script)."""
    config = task.config or {}
    if task.task_type == states.COMMAND:
        return [str(a) for a in (config.get("entrypoint") or [])]
    if task.task_type == states.SHELL:
        return ["{PYTHON}", "-m", "determined.master.tasks.shell_server", "--host", "{HOST}", "--port", "{PORT}",
                "--host-key", f"{{RUN_DIR}}/{HOST_KEY_NAME}", "--authorized-key", f"{{RUN_DIR}}/{AUTHORIZED_KEY_NAME}"]
    if task.task_type == states.NOTEBOOK:
        command = notebook.jupyter_command("{PYTHON}", port="{PORT}", base_url=f"/proxy/{task.id}/",
                                           token=str(task.service_secret), root_dir=work_dir or "{RUN_DIR}",
                                           allow_root=allow_root, host="{HOST}")
        # On a node's own IP the master's requests come from another machine (its token still required).
        return [REMOTE_ACCESS if a == "--ServerApp.allow_remote_access=False" else a for a in command]
    raise ValueError(f"a {task.task_type} task does not run on a Ray node")


def node_spec(task: Task, env: Dict[str, str], *, entry_script: str, master_url: str, host_key: str = "",
              allow_root: bool = True) -> Dict[str, Any]:
    """`RankWorker.start_task`'s spec of the task: `env` is the environment the runner built for it on the master
    (the config's variables and the platform's are taken from it)."""
    import base64

    from determined.master.tasks.config import _env_vars

    config = task.config or {}
    own, _ = _env_vars((config.get("environment") or {}).get("environment_variables"))
    work_dir = str(config.get("work_dir") or "")
    node_env = {**own, **{k: env[k] for k in PLATFORM_VARIABLES if k in env},
                "DET_MASTER": master_url, "DET_WORKDIR": work_dir or "{RUN_DIR}"}
    files = {ENTRY_NAME: entry_script}
    if task.task_type == states.NOTEBOOK:
        node_env.update({"NOTEBOOK_PORT": "{PORT}", "JUPYTER_RUNTIME_DIR": "{RUN_DIR}/.jupyter-runtime",
                         "JUPYTER_CONFIG_DIR": "{RUN_DIR}/.jupyter",
                         "NOTEBOOK_IDLE_TYPE": str(config.get("notebook_idle_type") or "kernels_or_terminals")})
    if task.task_type == states.SHELL:
        files[HOST_KEY_NAME] = host_key
        files[AUTHORIZED_KEY_NAME] = str(task.ssh_public_key) + "\n"
    return {
        "task_id": task.id,
        "argv": ["/bin/sh", f"{{RUN_DIR}}/{ENTRY_NAME}", *node_program(task, work_dir, allow_root)],
        "env": node_env,
        "files": files,
        "context": base64.b64encode(task.context).decode("ascii") if task.context else None,
        "server": task.task_type in (states.NOTEBOOK, states.SHELL),
        "work_dir": work_dir,
    }


def launch(rm: Any, task: Task, env: Dict[str, str], *, entry_script: str, master_url: str,
           account_link: Optional[Dict[str, Any]], keeper_dir: str, line_bytes: int, budget: int) -> Any:
    """Place the task on a Ray node and start it there; the handle (rm/ray_tasks.py `RayTask`, with the face of a
    local task's keeper: its log and exit files in `keeper_dir`)."""
    from determined.master.rm.sandbox import RunRequest
    from determined.master.tasks import records

    host_key = records.ssh_key_pair()[0] if task.task_type == states.SHELL else ""
    spec = node_spec(task, env, entry_script=entry_script, master_url=rm.task_master_url(master_url),
                     host_key=host_key, allow_root=getattr(rm, "trial_user", None) is None)
    run = RunRequest(account=account_link, bind_mounts=tuple((task.config or {}).get("bind_mounts") or ()))
    return rm.launch_task(task.id, slots=int(task.slots), resource_pool=str(task.resource_pool or ""), spec=spec,
                          keeper_dir=keeper_dir, line_bytes=line_bytes, budget=budget, run=run)
