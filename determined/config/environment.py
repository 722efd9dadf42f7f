"""``environment`` (image, environment variables, registry auth, ports) and ``bind_mounts``."""
from typing import Any, Mapping

from determined.config.errors import Problems
from determined.config.fields import INVALID, REQUIRED, Bool, Field, Int, JSONMapping, ListOf, MapOf, Section, Spec, Str
from determined.config.storage import PROPAGATION

DEFAULT_IMAGES = {
    "cpu": "determinedai/environments:py-3.6.9-pytorch-1.4-tf-1.15-cpu-0f2001a",
    "gpu": "determinedai/environments:cuda-10.0-pytorch-1.4-tf-1.15-gpu-0f2001a",
}


class PerDevice(Spec):
    """A value for both CPU and GPU slots, or a mapping ``{cpu: ..., gpu: ...}``; canonical form is the mapping."""

    def __init__(self, item: Spec, defaults: Mapping[str, Any]) -> None:
        self.item = item
        self.defaults = dict(defaults)
        self.section = Section({kind: Field(item, default) for kind, default in self.defaults.items()})
        self.allowed = f"{item.allowed}, or a mapping {{cpu: ..., gpu: ...}} of them"

    def check(self, value: Any, path: str, problems: Problems) -> Any:
        if isinstance(value, Mapping):
            return self.section.check(value, path, problems)
        checked = self.item.check(value, path, problems)
        if checked is INVALID:
            return INVALID
        return {"cpu": checked, "gpu": checked}


_ENV_VAR = Str(pattern=r"[A-Za-z_][A-Za-z0-9_]*=.*", allowed="a string NAME=VALUE")
_IMAGE = Str(nonempty=True, allowed="an image name")

ENVIRONMENT = Section(
    {
        "image": Field(PerDevice(_IMAGE, DEFAULT_IMAGES), DEFAULT_IMAGES),
        "force_pull_image": Field(Bool(), False),
        "registry_auth": Field(
            Section({name: Field(Str(), None) for name in ("username", "password", "server", "email")}), None
        ),
        "environment_variables": Field(
            PerDevice(ListOf(_ENV_VAR), {"cpu": [], "gpu": []}), {"cpu": [], "gpu": []}
        ),
        "ports": Field(MapOf(Int(minimum=1, maximum=65535)), {}),
        "pod_spec": Field(JSONMapping(), None),
    }
)


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
