"""``environment`` (image, environment variables, registry auth, ports...) and ``bind_mounts``.

Only ``environment_variables`` has an effect here (trials run as processes on this machine, not in containers):
the harness sets them in the trial's process (see determined/exec/_environment.py). The other fields are accepted
as Determined 0.12-0.38 accepted them, and named by ``determined.config.no_effect_notes``.
"""
import copy
from typing import Any, Dict, Mapping

from determined.config.errors import Problems
from determined.config.fields import INVALID, REQUIRED, Bool, Field, Int, JSONMapping, ListOf, MapOf, Section, Spec, Str
from determined.config.storage import PROPAGATION

DEFAULT_IMAGES = {
    "cpu": "determinedai/environments:py-3.6.9-pytorch-1.4-tf-1.15-cpu-0f2001a",
    "cuda": "determinedai/environments:cuda-10.0-pytorch-1.4-tf-1.15-gpu-0f2001a",
    "rocm": "determinedai/environments:rocm-5.6-pytorch-1.3-tf-2.10-rocm-mpich-0736b6d",
}


DEVICE_KINDS = ("cpu", "cuda", "rocm")


class PerDevice(Spec):
    """A value for every kind of slot, or a mapping ``{cpu, cuda, rocm, gpu}`` of values per kind.

    ``gpu`` is the name of ``cuda`` before 0.17.6: given alone, it sets ``cuda``. The canonical form has the keys
    ``cpu``, ``cuda``, ``rocm`` and ``gpu`` (the same value as ``cuda``, for readers of 0.13-era configs).
    """

    def __init__(self, item: Spec, defaults: Mapping[str, Any]) -> None:
        self.item = item
        self.defaults = dict(defaults)
        self.section = Section({kind: Field(item, None) for kind in (*DEVICE_KINDS, "gpu")})
        self.allowed = f"{item.allowed}, or a mapping {{cpu: ..., cuda: ..., rocm: ...}} of them"

    def check(self, value: Any, path: str, problems: Problems) -> Any:
        if isinstance(value, Mapping):
            given = self.section.check(value, path, problems)
            if given is INVALID:
                return INVALID
            cuda = given["cuda"] if given["cuda"] is not None else given["gpu"]
            out = {"cpu": given["cpu"], "cuda": cuda, "rocm": given["rocm"]}
            out = {kind: copy.deepcopy(self.defaults[kind]) if v is None else v for kind, v in out.items()}
            out["gpu"] = out["cuda"]
            return out
        checked = self.item.check(value, path, problems)
        if checked is INVALID:
            return INVALID
        return {kind: copy.deepcopy(checked) for kind in (*DEVICE_KINDS, "gpu")}


_ENV_VAR = Str(pattern=r"[A-Za-z_][A-Za-z0-9_]*=.*", allowed="a string NAME=VALUE")
_IMAGE = Str(nonempty=True, allowed="an image name")
_NO_VARIABLES: Dict[str, Any] = {kind: [] for kind in (*DEVICE_KINDS, "gpu")}

_TEXT = Field(Str(), None)
_PROXY_PORT = Section(
    {
        "proxy_port": Field(Int(minimum=1, maximum=65535), REQUIRED, hint="the port the trial serves on (an int)"),
        "proxy_tcp": Field(Bool(), False),
        "unauthenticated": Field(Bool(), False),
        "default_service_id": Field(Bool(), False),
    }
)
SLURM = Section(
    {
        "slots_per_node": Field(Int(minimum=1), None),
        "gpu_type": _TEXT,
        "sbatch_args": Field(ListOf(Str()), None),
    }
)
PBS = Section({"slots_per_node": Field(Int(minimum=1), None), "pbsbatch_args": Field(ListOf(Str()), None)})

ENVIRONMENT = Section(
    {
        "image": Field(PerDevice(_IMAGE, DEFAULT_IMAGES), PerDevice(_IMAGE, DEFAULT_IMAGES).check({}, "", Problems())),
        "force_pull_image": Field(Bool(), False),
        "registry_auth": Field(
            Section(
                {
                    name: _TEXT
                    for name in ("username", "password", "auth", "email", "serveraddress", "identitytoken",
                                 "registrytoken", "server")
                }
            ),
            None,
        ),
        "environment_variables": Field(PerDevice(ListOf(_ENV_VAR), _NO_VARIABLES), _NO_VARIABLES),
        "ports": Field(MapOf(Int(minimum=1, maximum=65535)), {}),
        "proxy_ports": Field(ListOf(_PROXY_PORT), []),
        "pod_spec": Field(JSONMapping(), None),
        "add_capabilities": Field(ListOf(Str()), []),
        "drop_capabilities": Field(ListOf(Str()), []),
        # 0.18.0 to 0.19.5: the HPC launchers' extra arguments (0.19.6 moved them to the top-level sections).
        "slurm": Field(ListOf(Str()), []),
        "pbs": Field(ListOf(Str()), []),
    }
)


def environment_variables(config: Mapping[str, Any], device: str) -> Dict[str, str]:
    """The ``environment.environment_variables`` of a canonical config for a trial on ``device`` slots
    (``cpu``, ``cuda`` or ``rocm``), as a mapping (later entries of the list win, as in a shell)."""
    per_device = (config.get("environment") or {}).get("environment_variables") or {}
    if isinstance(per_device, list):  # a config stored before this form was canonical
        entries = per_device
    else:
        entries = per_device.get(device)
        if entries is None and device == "cuda":
            entries = per_device.get("gpu")
    out: Dict[str, str] = {}
    for entry in entries or []:
        name, _, value = str(entry).partition("=")
        out[name] = value
    return out


class _ContainerPath(Spec):
    allowed = "a path in the trial's file system other than '.'"

    def check(self, value: Any, path: str, problems: Problems) -> Any:
        if not isinstance(value, str) or value.strip() in ("", ".", "./"):
            problems.wrong_value(path, value, self.allowed)
            return INVALID
        return value


BIND_MOUNT = Section(
    {
        "host_path": Field(Str(pattern=r"/.*", allowed="an absolute path (starting with /)"), REQUIRED),
        "container_path": Field(_ContainerPath(), REQUIRED),
        "read_only": Field(Bool(), False),
        "propagation": Field(PROPAGATION, "rprivate"),
    }
)
BIND_MOUNTS = ListOf(BIND_MOUNT)
