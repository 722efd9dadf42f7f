"""The config of an interactive task (Determined 0.38's `CommandConfig`): checked, merged over a template, with the
master's defaults, and the notes on the fields that need a container.

Merge order (as Determined's master): built-in defaults <- template <- the submitted config; then the master fills
`resources.slots` (1), `resources.resource_pool` and the description. Unknown fields are refused by name.
Tasks run as processes on the master's machine, without containers: `environment.image`,
`environment.pod_spec` and the other container fields are accepted (a config written for Determined still
launches) and each one gets a note, in the launch's `warnings` and in the task's logs, that says what it does here.
`bind_mounts` are checked as an experiment's are and honoured where the task runs in a sandbox (rm/sandbox.py);
elsewhere they get the note. `check_on_host` checks what depends on the machine at submit: the bind mounts against
the sandbox, and that `work_dir` exists, that the task's OS account can enter it, and that the sandbox does not hide it.
"""
import copy
import dataclasses
import os
import re
import stat
from typing import Any, Dict, List, Mapping, Optional, Tuple

from determined.config.environment import BIND_MOUNT
from determined.config.errors import Problems
from determined.config.fields import INVALID, ListOf
from determined.master.problems import RequestProblem
from determined.master.tasks import states

NOTEBOOK_IDLE_TYPES = ("kernels_or_terminals", "kernel_connections", "activity")
MAX_ENTRYPOINT_CHARS = 64 * 1024
MAX_DESCRIPTION_CHARS = 1024
MAX_BIND_MOUNTS = 64
_BIND_MOUNTS = ListOf(BIND_MOUNT, max_items=MAX_BIND_MOUNTS)  # the experiment config's own rules
# Paths a sandboxed task gets a private copy of (empty at its start, deleted at its end): not a work_dir.
SANDBOX_PRIVATE = ("/tmp", "/var/tmp", "/dev/shm")

_TOP = ("description", "entrypoint", "resources", "environment", "bind_mounts", "work_dir", "idle_timeout",
        "notebook_idle_type", "tensorboard_args", "debug", "slurm", "pbs")
_RESOURCES = ("slots", "resource_pool", "priority", "weight", "shm_size", "devices", "max_slots")
_ENVIRONMENT = ("environment_variables", "image", "force_pull_image", "registry_auth", "pod_spec", "add_capabilities",
                "drop_capabilities", "proxy_ports", "ports")

# What each container field means here: the note shown when a config sets it.
CONTAINER_NOTES = {
    "environment.image": "tasks run as processes on the master's machine in the master's Python environment, "
                         "without containers: the image is not pulled or used; install what the task needs into "
                         "that environment (or in its startup-hook.sh)",
    "environment.force_pull_image": "no image is pulled (tasks run without containers)",
    "environment.registry_auth": "no image registry is used (tasks run without containers)",
    "environment.pod_spec": "there is no Kubernetes here: the pod spec is not used",
    "environment.add_capabilities": "tasks run without containers: Linux capabilities are not changed",
    "environment.drop_capabilities": "tasks run without containers: Linux capabilities are not changed",
    "environment.proxy_ports": "only the task's own server (JupyterLab, TensorBoard) is proxied, at /proxy/<task id>/",
    "environment.ports": "tasks use the ports of the master's machine; named ports are not assigned",
    "bind_mounts": "this master does not run tasks in a sandbox (it needs run-as accounts and bubblewrap: "
                   "docs/auth.md), so nothing is mounted: each host_path is visible as-is to the task's OS account, "
                   "and a container_path other than its host_path does not exist in the task; use the host paths",
    "resources.shm_size": "tasks share the machine's /dev/shm: the size is not set",
    "resources.devices": "tasks run without containers: devices are not mapped",
    "resources.weight": "used by the fair-share scheduler only",
    "slurm": "there is no Slurm launcher here: ignored",
    "pbs": "there is no PBS launcher here: ignored",
}

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: Any, field: str) -> float:
    """A Go duration (`30s`, `1m30s`, `1h`) or a number of seconds, in seconds (> 0)."""
    if isinstance(value, bool):
        raise _bad(field, value, "a duration such as 30s, 20m or 1h30m")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str) and value.strip():
        text = value.strip()
        parts = _DURATION.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise _bad(field, value, "a duration such as 30s, 20m or 1h30m")
        seconds = sum(float(n) * _UNIT_S[u] for n, u in parts)
    else:
        raise _bad(field, value, "a duration such as 30s, 20m or 1h30m")
    if seconds <= 0 or seconds > 366 * 86400:
        raise _bad(field, value, "a duration above 0 and at most a year")
    return seconds


def _bad(field: str, value: Any, expected: str) -> RequestProblem:
    shown = repr(value)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return RequestProblem(400, "invalid task config", [f"{field}: expected {expected}, got {shown}"])


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> Dict[str, Any]:
    """`over` merged into `base`, mappings recursively (a template under the user's config)."""
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _unknown(section: Mapping[str, Any], allowed: Tuple[str, ...], where: str) -> List[str]:
    return [f"{where}{k}: unknown field; the task config's fields here are {', '.join(allowed)}"
            for k in section if k not in allowed]


def _env_vars(value: Any) -> Tuple[Dict[str, str], List[str]]:
    """`environment.environment_variables` as a dict: a list of NAME=VALUE, or a map per device type (cpu, cuda,
    rocm; the cpu list is the one used here)."""
    if value is None:
        return {}, []
    if isinstance(value, Mapping):
        unknown = [k for k in value if k not in ("cpu", "cuda", "gpu", "rocm")]
        if unknown:
            return {}, [f"environment.environment_variables: unknown device type(s) {', '.join(map(str, unknown))}; "
                        "use a list of NAME=VALUE or a map of cpu, cuda, rocm to such lists"]
        value = value.get("cpu") or []
    if not isinstance(value, list):
        return {}, ["environment.environment_variables: expected a list of NAME=VALUE strings"]
    out: Dict[str, str] = {}
    problems = []
    for item in value:
        if not isinstance(item, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", item, re.S):
            problems.append(f"environment.environment_variables: {str(item)[:80]!r} is not NAME=VALUE")
            continue
        name, val = item.split("=", 1)
        if name.startswith("DET_"):
            problems.append(f"environment.environment_variables: {name} is set by the master (DET_* variables "
                            "belong to the platform); choose another name")
            continue
        out[name] = val
    return out, problems


class TaskConfig:
    """A checked task config: `raw` (what is stored and shown by `det cmd config`) and the values the master uses."""

    def __init__(self, raw: Dict[str, Any], notes: List[str], env: Dict[str, str], idle_timeout: Optional[float]):
        self.raw = raw
        self.notes = notes
        self.env = env
        self.idle_timeout = idle_timeout

    @property
    def slots(self) -> int:
        return int(self.raw["resources"]["slots"])

    @property
    def resource_pool(self) -> str:
        return str(self.raw["resources"]["resource_pool"])

    @property
    def priority(self) -> Optional[int]:
        value = self.raw["resources"].get("priority")
        return int(value) if value is not None else None

    @property
    def entrypoint(self) -> List[str]:
        return list(self.raw.get("entrypoint") or [])

    @property
    def idle_type(self) -> str:
        return str(self.raw.get("notebook_idle_type") or "kernels_or_terminals")


def check(raw: Any, task_type: str, *, total_slots: int, default_pool: str, known_pools: Optional[List[str]] = None,
          has_context: bool = False, pet_name: str = "") -> TaskConfig:
    """The task config `raw` (the template already merged under it) checked and completed, or a RequestProblem
    naming every bad field and its fix."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise RequestProblem(400, "invalid task config", ["config: expected a mapping of task config fields"])
    cfg: Dict[str, Any] = copy.deepcopy(dict(raw))
    problems = _unknown(cfg, _TOP, "")
    resources = cfg.get("resources") or {}
    environment = cfg.get("environment") or {}
    if not isinstance(resources, Mapping):
        problems.append("resources: expected a mapping (slots, resource_pool, priority)")
        resources = {}
    if not isinstance(environment, Mapping):
        problems.append("environment: expected a mapping (environment_variables, ...)")
        environment = {}
    resources, environment = dict(resources), dict(environment)
    if "is_single_node" in resources:
        problems.append("resources.is_single_node: cannot be set for interactive tasks (a task runs on one machine)")
        resources.pop("is_single_node")
    problems += _unknown(resources, _RESOURCES, "resources.") + _unknown(environment, _ENVIRONMENT, "environment.")
    slots = resources.get("slots", 1)
    if task_type == states.TENSORBOARD:
        slots = 0
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 0:
        problems.append(f"resources.slots: expected a whole number of slots, 0 or more (0: a CPU-only task), "
                        f"got {slots!r}")
        slots = 1
    elif slots > total_slots:
        problems.append(f"resources.slots: {slots} slots requested exceeds cluster capacity ({total_slots} slot(s)); "
                        f"ask for at most {total_slots}")
    resources["slots"] = slots
    pool = resources.get("resource_pool") or default_pool
    if not isinstance(pool, str):
        problems.append("resources.resource_pool: expected a pool's name")
        pool = default_pool
    elif known_pools is not None and pool not in known_pools:
        problems.append(f"resources.resource_pool: no resource pool named {pool[:80]!r}; the pools of this master are "
                        f"{', '.join(sorted(known_pools))}")
    resources["resource_pool"] = pool
    priority = resources.get("priority")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)
                                 or not 1 <= priority <= 99):
        problems.append(f"resources.priority: expected a whole number from 1 (first) to 99, got {priority!r}")
    cfg["resources"] = resources
    env, env_problems = _env_vars(environment.get("environment_variables"))
    problems += env_problems
    cfg["environment"] = environment
    entrypoint = cfg.get("entrypoint")
    if entrypoint is not None:
        if isinstance(entrypoint, str):
            entrypoint = [entrypoint]
        if not isinstance(entrypoint, list) or not all(isinstance(a, str) for a in entrypoint):
            problems.append("entrypoint: expected a command line (a string or a list of strings)")
            entrypoint = []
        elif sum(len(a) for a in entrypoint) > MAX_ENTRYPOINT_CHARS:
            problems.append(f"entrypoint: longer than {MAX_ENTRYPOINT_CHARS} characters; put the commands in a script "
                            "of the context directory")
        cfg["entrypoint"] = entrypoint
    if task_type == states.COMMAND and not cfg.get("entrypoint"):
        problems.append("entrypoint: a command needs one: det cmd run 'python prep.py' (or entrypoint: in the config)")
    if task_type != states.COMMAND and "entrypoint" in cfg:
        cfg.pop("entrypoint")  # the master starts the notebook or TensorBoard itself, as Determined does
    description = cfg.get("description")
    if description is None or description == "":
        description = f"{states.NAMES[task_type]} ({pet_name})" if pet_name else states.NAMES[task_type]
    if task_type == states.TENSORBOARD:
        description = f"TensorBoard ({pet_name})" if pet_name else "TensorBoard"
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION_CHARS:
        problems.append(f"description: expected text of at most {MAX_DESCRIPTION_CHARS} characters")
    cfg["description"] = description
    if cfg.get("bind_mounts") is not None:
        checker = Problems()
        mounts = _BIND_MOUNTS.check(cfg["bind_mounts"], "bind_mounts", checker)
        problems += checker.items
        if mounts is not INVALID:
            cfg["bind_mounts"] = mounts
    work_dir = cfg.get("work_dir")
    if work_dir is not None:
        if not isinstance(work_dir, str) or not work_dir.startswith("/") or "\0" in work_dir or len(work_dir) > 4096:
            problems.append("work_dir: expected an absolute directory path of the master's machine")
        elif has_context:
            problems.append("work_dir: cannot set work_dir and context directory at the same time; the context is "
                            "copied into the task's own working directory")
    idle_timeout: Optional[float] = None
    if cfg.get("idle_timeout") is not None:
        try:
            idle_timeout = parse_duration(cfg["idle_timeout"], "idle_timeout")
        except RequestProblem as e:
            problems += e.problems
    idle_type = cfg.get("notebook_idle_type")
    if idle_type is not None and idle_type not in NOTEBOOK_IDLE_TYPES:
        problems.append(f"notebook_idle_type: expected one of {', '.join(NOTEBOOK_IDLE_TYPES)}, got {idle_type!r}")
    if cfg.get("debug") is not None and not isinstance(cfg.get("debug"), bool):
        problems.append("debug: expected true or false")
    args = cfg.get("tensorboard_args")
    if args is not None and (not isinstance(args, list) or not all(isinstance(a, str) for a in args)):
        problems.append("tensorboard_args: expected a list of strings")
    if problems:
        raise RequestProblem(400, "invalid task config", problems)
    notes = []
    for dotted, note in CONTAINER_NOTES.items():
        section, _, name = dotted.partition(".")
        present = (name in (cfg.get(section) or {})) if name else section in cfg
        if present:
            notes.append(f"{dotted}: {note}")
    return TaskConfig(cfg, notes, env, idle_timeout)


@dataclasses.dataclass(frozen=True)
class Host:
    """Where this master's tasks run, for the checks at submit that need the machine: `default_account`, the
    resource manager's `trial_user` (None: tasks run as the master's own account), and `sandbox`, its
    rm/sandbox.Sandbox (None: tasks are not sandboxed). As tasks/runner.py's `_account`."""

    default_account: Any = None
    sandbox: Any = None

    @classmethod
    def of(cls, rm: Any) -> "Host":
        default = getattr(rm, "trial_user", None)
        return cls(default, getattr(rm, "sandbox", None) if default is not None else None)


def check_on_host(checked: TaskConfig, host: Host, link: Optional[Mapping[str, Any]]) -> None:
    """What depends on the machine, checked at submit (`link`: the owner's linked OS account, None: not linked):
    on a sandboxed server the bind mounts as the sandbox will mount them (the note that they do nothing is dropped
    there); `work_dir` exists, is not hidden by the sandbox, and the task's account can enter it. A RequestProblem
    names each problem and its fix."""
    from determined.master.rm.sandbox import SandboxRefused, account_of

    cfg = checked.raw
    mounts = list(cfg.get("bind_mounts") or [])
    sandbox = host.sandbox
    problems: List[str] = []
    if sandbox is not None:
        checked.notes = [n for n in checked.notes if not n.startswith("bind_mounts:")]
        try:  # the run directory of a task: <data dir>/work/tasks/<id>
            sandbox.check_bind_mounts(mounts, os.path.join(sandbox.data_dir, "work", "tasks", "_"))
        except SandboxRefused as e:
            problems.append(str(e))
    work_dir = cfg.get("work_dir")
    if work_dir and not problems:
        account = account_of(link, host.default_account) if host.default_account is not None else None
        problems += _work_dir_problems(str(work_dir), mounts, sandbox, account)
    if problems:
        raise RequestProblem(400, "invalid task config", problems)


def _work_dir_problems(work_dir: str, mounts: List[Mapping[str, Any]], sandbox: Any, account: Any) -> List[str]:
    path, shown = os.path.normpath(work_dir), work_dir[:200]
    where = ""  # the work_dir's host path when it is in a bind mount
    if sandbox is not None:
        for mount in reversed(mounts):  # the last mount over a path is the one the task sees
            target = os.path.normpath(str(mount["container_path"]))
            if _inside(path, target):
                path = os.path.join(os.path.realpath(str(mount["host_path"])), os.path.relpath(path, target))
                where = f" (its bind mount's host path {path[:200]})"
                break
        else:
            real = os.path.realpath(path)
            for hidden in [sandbox.data_dir, *sandbox.storage_roots, *sandbox.hidden]:
                if _inside(real, hidden):
                    return [f"work_dir: {shown} is in the master's data dir or a checkpoint storage root "
                            f"({hidden}), which the sandbox hides from tasks; choose another directory (a task reads "
                            "checkpoints through the master: det checkpoint download, the SDK)"]
            private = next((p for p in SANDBOX_PRIVATE if _inside(path, p) or _inside(real, p)), None)
            if private is not None:
                return [f"work_dir: {shown} is under {private}, which the sandbox makes private to each task (empty "
                        "when it starts, deleted when it ends); bind the directory in with bind_mounts (host_path: "
                        f"{shown}, container_path: /mnt/work) and set work_dir: /mnt/work, or choose a directory "
                        f"outside {private}"]
    real = os.path.realpath(path)
    if not os.path.isdir(real):
        what = "is not a directory" if os.path.exists(real) else "does not exist"
        if sandbox is None and any(_inside(path, os.path.normpath(str(m["container_path"]))) for m in mounts):
            what += " (it is in a bind mount's container_path, but this master does not sandbox tasks: nothing is " \
                    "mounted, use the host path)"
        return [f"work_dir: {shown}{where} {what} on the master's machine, where the task runs; create it first "
                "or choose another directory"]
    if account is None:
        if not os.access(real, os.X_OK):
            return [f"work_dir: {shown}{where} cannot be entered by the master's OS account, which the task runs as; "
                    "give it access (chmod) or choose another directory"]
        return []
    try:
        blocked = _blocking_dir(real, account)
    except OSError as e:  # changed while it was read
        return [f"work_dir: {shown}{where} cannot be read on the master's machine ({e.strerror}); choose another "
                "directory"]
    if blocked is not None:
        directory, st = blocked
        return [f"work_dir: {shown}{where} cannot be entered by {account.name} (uid {account.uid}, gid {account.gid}), "
                f"the OS account the task runs as: {directory} is mode {stat.S_IMODE(st.st_mode):04o}, owned by uid "
                f"{st.st_uid} gid {st.st_gid}; give that account search permission there (chmod o+x, or its group), "
                "or choose another directory"]
    return []


def _inside(path: str, root: str) -> bool:
    return os.path.commonpath([path, root]) == root


def _blocking_dir(path: str, account: Any) -> Optional[Tuple[str, os.stat_result]]:
    """The first directory from / down to `path` that `account` may not enter (search permission), else None."""
    if account.uid == 0:
        return None
    groups = {account.gid, *account.groups}
    current = "/"
    for part in ["", *path.strip("/").split("/")]:
        current = os.path.join(current, part) if part else current
        st = os.stat(current)
        if st.st_uid == account.uid:
            bit = stat.S_IXUSR
        elif st.st_gid in groups:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            return current, st
    return None
