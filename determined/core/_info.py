"""What a trial process knows about itself: `det.get_cluster_info()` and `core_context.info`.

One object model for both: `ClusterInfo` holds the identity of the run (master, allocation, slots, the
containers of a multi-machine run) and of the trial (ids, seed, hyperparameters, config, the checkpoint to
resume from), with the attributes of Determined 0.38's `ClusterInfo` and its `trial` (a `TrialInfo`).

Inside a trial process the harness exports the run's identity as `DET_*` environment variables
(`trial_environment`), so that a script it starts, and any process that script starts, reads it with
`get_cluster_info()`; Determined read the same facts from files under /run/determined/info.
"""
import dataclasses
import json
import os
import pathlib
import shutil
import socket
import subprocess
from typing import Any, Dict, List, Mapping, Optional

TASK_TYPE_TRIAL = "TRIAL"
# Values longer than this go to a file named by `<NAME>_FILE` (one environment string is limited to 128 KiB).
MAX_ENV_VALUE = 64 * 1024
# JSON values that may be large: the experiment config and the hyperparameters.
_LARGE_JSON_VARIABLES = ("DET_EXPERIMENT_CONFIG", "DET_HPARAMS")


class TrialInfo:
    """The trial of the running process (`ClusterInfo.trial`): ids, seed and hyperparameters (nested).

    `_config` is the experiment config with every default filled (its shape is not a stable API: read the
    `data` section through `ClusterInfo.user_data` and the hyperparameters through `hparams`).
    """

    def __init__(self, trial_id: int, experiment_id: int, trial_seed: int, hparams: Dict[str, Any],
                 config: Dict[str, Any], steps_completed: int = 0, trial_run_id: int = 0, debug: bool = False,
                 inter_node_network_interface: Optional[str] = None) -> None:
        self.trial_id = trial_id
        self.experiment_id = experiment_id
        self.trial_seed = trial_seed
        self.hparams = hparams
        self._config = config
        self._steps_completed = steps_completed
        self._trial_run_id = trial_run_id
        self._debug = debug
        self._inter_node_network_interface = inter_node_network_interface

    @property
    def config(self) -> Dict[str, Any]:
        """The same as `_config`."""
        return self._config

    def __repr__(self) -> str:
        return (f"TrialInfo(trial_id={self.trial_id}, experiment_id={self.experiment_id}, "
                f"trial_seed={self.trial_seed}, hparams={self.hparams!r})")


@dataclasses.dataclass
class ClusterInfo:
    """The identity and inputs of the running trial.

    `latest_checkpoint` is the uuid of the checkpoint to resume from (None on a fresh start) and
    `steps_completed` the number of batches that checkpoint had trained. `slot_ids` are this container's
    slots; a run over several machines has one container per machine: `container_addrs` (rank order),
    `container_rank` (this one's) and `container_slot_counts`.
    """

    trial_id: int
    experiment_id: int
    allocation_id: str
    config: Dict[str, Any]
    hparams: Dict[str, Any]
    trial_seed: int
    latest_checkpoint: Optional[str] = None
    steps_completed: int = 0
    master_url: Optional[str] = None
    cluster_id: str = ""
    agent_id: str = ""
    slot_ids: List[int] = dataclasses.field(default_factory=list)
    task_id: str = ""
    session_token: str = ""
    task_type: str = TASK_TYPE_TRIAL
    trial_run_id: int = 0
    container_addrs: List[str] = dataclasses.field(default_factory=lambda: ["127.0.0.1"])
    container_rank: int = 0
    container_slot_counts: List[int] = dataclasses.field(default_factory=list)
    master_cert_name: Optional[str] = None
    master_cert_file: Optional[str] = None

    def __post_init__(self) -> None:
        if not self.task_id:
            self.task_id = f"{self.experiment_id}.{self.trial_id}"
        if not self.container_slot_counts:
            self.container_slot_counts = [len(self.slot_ids)] * len(self.container_addrs)

    @property
    def searcher_metric(self) -> Optional[str]:
        return (self.config.get("searcher") or {}).get("metric")

    @property
    def smaller_is_better(self) -> bool:
        return bool((self.config.get("searcher") or {}).get("smaller_is_better", True))

    @property
    def trial(self) -> TrialInfo:
        """The trial of this task (a RuntimeError for a task that is not a trial)."""
        if self.task_type != TASK_TYPE_TRIAL:
            raise RuntimeError(f"ClusterInfo.trial: this task is a {self.task_type}, not a TRIAL")
        return TrialInfo(self.trial_id, self.experiment_id, self.trial_seed, self.hparams, self.config,
                         self.steps_completed, self.trial_run_id, bool(self.config.get("debug", False)),
                         os.environ.get("DET_INTER_NODE_NETWORK_INTERFACE"))

    @property
    def _trial_info(self) -> Optional[TrialInfo]:
        """The trial of this task, or None for a task that is not a trial (Determined 0.38's attribute)."""
        return self.trial if self.task_type == TASK_TYPE_TRIAL else None

    @property
    def user_data(self) -> Dict[str, Any]:
        """The `data` section of the experiment config ({} for a task that is not a trial)."""
        if self.task_type != TASK_TYPE_TRIAL:
            return {}
        return dict(self.config.get("data") or {})

    @property
    def gpu_uuids(self) -> List[str]:
        """The UUIDs of this container's GPUs (from nvidia-smi; empty on CPU slots)."""
        return _gpu_uuids(os.environ.get("CUDA_VISIBLE_DEVICES"))

    @classmethod
    def _from_answer(cls, answer: Mapping[str, Any], master_url: Optional[str] = None,
                     environ: Optional[Mapping[str, str]] = None) -> "ClusterInfo":
        """The ClusterInfo of a `GET /trials/{id}/context` answer; the run's slots and containers come from the
        environment the resource manager gave this process."""
        env = os.environ if environ is None else environ
        latest = answer.get("latest_checkpoint") or None
        # A warm start or a PBT clone begins from someone else's checkpoint at step 0: the top-level count wins.
        steps = int(answer.get("steps_completed", latest.get("steps_completed", 0))) if latest else 0
        return cls(
            trial_id=int(answer["trial_id"]),
            experiment_id=int(answer["experiment_id"]),
            allocation_id=str(answer.get("allocation_id") or env.get("DET_ALLOCATION_ID") or ""),
            config=answer["config"],
            hparams=answer.get("hparams") or {},
            trial_seed=int(answer.get("trial_seed") or 0),
            latest_checkpoint=latest["uuid"] if latest else None,
            steps_completed=steps,
            master_url=master_url or env.get("DET_MASTER"),
            cluster_id=str(answer.get("cluster_id") or env.get("DET_CLUSTER_ID") or ""),
            trial_run_id=int(answer.get("trial_run_id") or env.get("DET_TRIAL_RUN_ID") or 0),
            **_run_fields(env),
        )

    @classmethod
    def _from_env(cls, environ: Optional[Mapping[str, str]] = None) -> "ClusterInfo":
        """The ClusterInfo of the `DET_*` variables the harness exports (`trial_environment`)."""
        env = os.environ if environ is None else environ
        missing = [name for name in ("DET_MASTER", "DET_TRIAL_ID", "DET_EXPERIMENT_ID", "DET_ALLOCATION_ID")
                   if not env.get(name)]
        if missing:
            raise RuntimeError(f"missing environment variables {', '.join(missing)}: this is not a trial process")
        return cls(
            trial_id=int(env["DET_TRIAL_ID"]),
            experiment_id=int(env["DET_EXPERIMENT_ID"]),
            allocation_id=env["DET_ALLOCATION_ID"],
            config=_json_variable(env, "DET_EXPERIMENT_CONFIG"),
            hparams=_json_variable(env, "DET_HPARAMS"),
            trial_seed=int(env.get("DET_TRIAL_SEED") or 0),
            latest_checkpoint=env.get("DET_LATEST_CHECKPOINT") or None,
            steps_completed=int(env.get("DET_STEPS_COMPLETED") or 0),
            master_url=env["DET_MASTER"],
            cluster_id=env.get("DET_CLUSTER_ID", ""),
            trial_run_id=int(env.get("DET_TRIAL_RUN_ID") or 0),
            **_run_fields(env),
        )


def _run_fields(env: Mapping[str, str]) -> Dict[str, Any]:
    """The fields of a ClusterInfo that describe this run of the trial rather than the trial."""
    slot_ids = _json_list(env, "DET_SLOT_IDS", [0])
    addrs = [str(a) for a in _json_list(env, "DET_CONTAINER_ADDRS", ["127.0.0.1"])]
    return {
        "agent_id": env.get("DET_AGENT_ID") or socket.gethostname(),
        "slot_ids": [int(s) for s in slot_ids],
        "task_id": env.get("DET_TASK_ID", ""),
        "session_token": env.get("DET_SESSION_TOKEN", ""),
        "task_type": env.get("DET_TASK_TYPE") or TASK_TYPE_TRIAL,
        "container_addrs": addrs,
        "container_rank": int(env.get("DET_CONTAINER_RANK") or 0),
        "container_slot_counts": [int(c) for c in _json_list(env, "DET_CONTAINER_SLOT_COUNTS", [])],
        "master_cert_name": env.get("DET_MASTER_CERT_NAME") or None,
        "master_cert_file": env.get("DET_MASTER_CERT_FILE") or None,
    }


def _json_list(env: Mapping[str, str], name: str, default: List[Any]) -> List[Any]:
    raw = env.get(name)
    if not raw:
        return list(default)
    try:
        value = json.loads(raw)
    except ValueError:
        value = [part.strip() for part in raw.split(",") if part.strip()]  # a comma-separated list
    if not isinstance(value, list):
        raise RuntimeError(f"environment variable {name}={raw!r} must be a JSON list")
    return value


def _json_variable(env: Mapping[str, str], name: str) -> Dict[str, Any]:
    raw = env.get(name)
    if raw is None and env.get(f"{name}_FILE"):
        raw = pathlib.Path(env[f"{name}_FILE"]).read_text()
    if raw is None:
        raise RuntimeError(f"environment variable {name} is not set: this process was not started by the harness")
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise RuntimeError(f"environment variable {name} must hold a JSON object")
    return value


def _gpu_uuids(visible: Optional[str]) -> List[str]:
    devices = [d.strip() for d in (visible or "").split(",") if d.strip() and d.strip() != "-1"]
    if not devices or shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    by_index: Dict[str, str] = {}
    for line in out.splitlines():
        index, _, uuid = line.partition(",")
        if uuid.strip():
            by_index[index.strip()] = uuid.strip()
    # CUDA_VISIBLE_DEVICES holds indices or UUIDs
    return [by_index.get(d, d) for d in devices if d in by_index or d.startswith("GPU-")]


def trial_environment(info: ClusterInfo, spill_dir: Optional[str] = None) -> Dict[str, str]:
    """The `DET_*` variables that describe the run of `info` to the processes of the trial (see `_from_env`).

    A JSON value longer than MAX_ENV_VALUE is written to a file in `spill_dir` (when given) and named by
    `<NAME>_FILE` instead: the kernel refuses to start a program with an environment string over 128 KiB.
    """
    env = {
        "DET_MASTER": info.master_url or "",
        "DET_CLUSTER_ID": info.cluster_id,
        "DET_AGENT_ID": info.agent_id,
        "DET_SLOT_IDS": json.dumps(info.slot_ids),
        "DET_TASK_ID": info.task_id,
        "DET_TASK_TYPE": info.task_type,
        "DET_ALLOCATION_ID": info.allocation_id,
        "DET_RESOURCES_ID": f"{info.allocation_id}.{info.container_rank}",
        "DET_EXPERIMENT_ID": str(info.experiment_id),
        "DET_TRIAL_ID": str(info.trial_id),
        "DET_TRIAL_RUN_ID": str(info.trial_run_id),
        "DET_TRIAL_SEED": str(info.trial_seed),
        "DET_STEPS_COMPLETED": str(info.steps_completed),
        "DET_CONTAINER_ADDRS": json.dumps(info.container_addrs),
        "DET_CONTAINER_RANK": str(info.container_rank),
        "DET_CONTAINER_SLOT_COUNTS": json.dumps(info.container_slot_counts),
    }
    if info.session_token:
        env["DET_SESSION_TOKEN"] = info.session_token
    if info.latest_checkpoint:
        env["DET_LATEST_CHECKPOINT"] = info.latest_checkpoint
    for name, value in (("DET_EXPERIMENT_CONFIG", info.config), ("DET_HPARAMS", info.hparams)):
        text = json.dumps(value)
        if len(text) > MAX_ENV_VALUE and spill_dir is not None:
            os.makedirs(spill_dir, exist_ok=True)
            path = pathlib.Path(spill_dir) / f"{name.lower()}.json"
            path.write_text(text)
            env[f"{name}_FILE"] = str(path)
        else:
            env[name] = text
    return env


_cached: Optional[ClusterInfo] = None
_cached_for: Optional[tuple] = None


def get_cluster_info() -> Optional[ClusterInfo]:
    """The ClusterInfo of the trial this process belongs to, or None outside a trial.

    Read from the environment the harness gives the trial's processes; a process of a trial that lacks it
    (DET_TRIAL_ID and DET_MASTER set, nothing more) asks the master for the trial's context once.
    """
    global _cached, _cached_for
    key = tuple(os.environ.get(n) for n in ("DET_MASTER", "DET_TRIAL_ID", "DET_ALLOCATION_ID"))
    if not key[0] or not key[1]:
        return None
    if _cached is not None and _cached_for == key:
        return _cached
    if all(os.environ.get(n) or os.environ.get(f"{n}_FILE") for n in _LARGE_JSON_VARIABLES) \
            and os.environ.get("DET_EXPERIMENT_ID") and os.environ.get("DET_ALLOCATION_ID"):
        info = ClusterInfo._from_env()
    else:
        info = _ask_master(str(key[0]), int(str(key[1])))
    _cached, _cached_for = info, key
    return info


def _ask_master(master: str, trial_id: int) -> ClusterInfo:
    from determined.common.api import Session

    session = Session(master, os.environ.get("DET_SESSION_TOKEN") or None)
    try:
        return ClusterInfo._from_answer(session.get(f"/trials/{trial_id}/context"), master)
    finally:
        session.close()
