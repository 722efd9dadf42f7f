"""Config fields that Determined honoured and that have no effect here, each with the reason, for one clear line.

Trials here are processes on the master's machine (or Ray workers), not containers on a Kubernetes, Slurm or
agent cluster: what configured the containers, the cluster or services this platform does not have is accepted
(so that every 0.12-0.38 config runs unchanged) and named by ``no_effect_notes``, which the CLI prints when an
experiment is created and the harness logs when a trial starts.

``bind_mounts`` are the exception that depends on the master: a server that runs trials in a sandbox (run as root
with `trial_user` and bubblewrap; rm/sandbox.py) honours them, as Determined's containers did; any other master
does not. The CLI asks the master it submits to (`GET /master/info`, `trials_sandboxed`); a trial knows it runs
in a sandbox from DET_SANDBOXED, which the sandbox sets.
"""
import os
from typing import Any, Callable, List, Mapping, Optional, Sequence, Tuple

from determined.config.environment import DEFAULT_IMAGES
from determined.config.storage import UNREACHABLE_TYPES

_CONTAINERS = "trials run as processes on this machine, not in containers"
_HPC = "trials run on this platform's own resource manager, not through Slurm or PBS"
_HOROVOD = "a Horovod setting; multi-slot training here uses torch.distributed or tf.distribute"
_DEFAULT_SHM = 4 * 1024**3
SANDBOXED_ENV = "DET_SANDBOXED"  # "1" in a trial's sandbox (rm/sandbox.py)


def _get(config: Mapping[str, Any], path: Sequence[str]) -> Any:
    value: Any = config
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _set(value: Any) -> bool:
    """Given, and not empty: a value that asks for something (a mapping: one of its values does)."""
    if isinstance(value, Mapping):
        return any(_set(v) for v in value.values())
    return value not in (None, "", [], False)


def _image_given(value: Any) -> bool:
    if not isinstance(value, Mapping):
        return _set(value)
    return any(value.get(kind) not in (None, default) for kind, default in DEFAULT_IMAGES.items())


def _not(default: Any) -> Callable[[Any], bool]:
    return lambda value: value is not None and value != default


# (path, asks-for-something test, reason)
_RULES: List[Tuple[Tuple[str, ...], Callable[[Any], bool], str]] = [
    (("environment", "image"), _image_given, f"{_CONTAINERS}: they use this machine's Python environment"),
    (("environment", "force_pull_image"), _set, _CONTAINERS),
    (("environment", "registry_auth"), _set, _CONTAINERS),
    (("environment", "pod_spec"), _set, f"{_CONTAINERS} (no Kubernetes)"),
    (("environment", "add_capabilities"), _set, _CONTAINERS),
    (("environment", "drop_capabilities"), _set, _CONTAINERS),
    (("environment", "ports"), _set, "a trial's ports are this machine's own; the master does not proxy them"),
    (("environment", "proxy_ports"), _set, "a trial's ports are this machine's own; the master does not proxy them"),
    (("environment", "slurm"), _set, _HPC),
    (("environment", "pbs"), _set, _HPC),
    (("slurm",), _set, _HPC),
    (("pbs",), _set, _HPC),
    (("resources", "devices"), _set, f"{_CONTAINERS}: they see this machine's devices"),
    (("resources", "shm_size"), _not(_DEFAULT_SHM), f"{_CONTAINERS}: shared memory is this machine's"),
    (("resources", "agent_label"), _set, "agents have no labels here: choose slots with resources.resource_pool"),
    (("resources", "resource_manager"), _set, "this master has one resource manager (det master up chooses it)"),
    (("resources", "is_single_node"), _set,
     "the local resource manager runs every trial on this machine; the Ray one packs a trial's slots on few nodes"),
    (("resources", "native_parallel"), _set, "deprecated in Determined too"),
    (("resources", "slots"), lambda v: v is not None, "an experiment's trials take resources.slots_per_trial slots each"),
    (("optimizations", "gradient_compression"), _set, _HOROVOD),
    (("optimizations", "tensor_fusion_threshold"), _not(64), _HOROVOD),
    (("optimizations", "tensor_fusion_cycle_time"), _not(5), _HOROVOD),
    (("optimizations", "auto_tune_tensor_fusion"), _set, _HOROVOD),
    (("optimizations", "grad_updates_size_file"), _set, _HOROVOD),
    (("retention_policy",), _set, "trial logs are kept as long as their experiment"),
    (("integrations",), _set, "no Pachyderm or webhook integration here"),
    (("security", "kerberos", "config_file"), _set, "no Kerberos here"),
    (("data_layer", "type"), lambda v: _set(v) and v != "shared_fs", "the data layer was removed in Determined 0.19"),
    (("tensorboard_storage",), _set, "TensorBoard files stay with the trial's metrics; det tensorboard serves them"),
]


def no_effect_notes(config: Mapping[str, Any], *, sandboxed: Optional[bool] = None) -> List[str]:
    """One line per field of a (raw or canonical) config that asks for something that has no effect here.

    `sandboxed`: whether the master the config goes to runs its trials in a sandbox, which honours `bind_mounts`
    (None: unknown; in a trial's own process, DET_SANDBOXED says)."""
    notes = []
    for path, asks, reason in _RULES:
        value = _get(config, path)
        if asks(value):
            notes.append(f"{'.'.join(path)}: has no effect here ({reason})")
    if sandboxed is None and os.environ.get(SANDBOXED_ENV) == "1":
        sandboxed = True
    if _set(config.get("bind_mounts")) and not sandboxed:
        notes.append(
            "bind_mounts: has no effect on this master (its trials are processes not in a sandbox: it runs without "
            "trial_user or bubblewrap; see docs/auth.md): read host_path where it is" if sandboxed is False else
            "bind_mounts: honoured only by a master that runs trials in a sandbox (run as root with trial_user and "
            "bubblewrap; see docs/auth.md); elsewhere they have no effect: read host_path where it is")
    searcher = config.get("searcher") if isinstance(config.get("searcher"), Mapping) else {}
    if searcher.get("time_metric") and searcher.get("max_time") and searcher.get("stop_once"):
        notes.append("searcher.stop_once: has no effect here (with time_metric and max_time the search always stops "
                     "trials, as Determined 0.38)")
    kind = _get(config, ("checkpoint_storage", "type"))
    if kind in UNREACHABLE_TYPES:
        notes.append(
            f"checkpoint_storage: type {kind} cannot be reached from here; checkpoints go to the master's default "
            "storage (shared_fs in its data dir) with this config's save_* settings: use shared_fs, directory or s3"
        )
    return notes
