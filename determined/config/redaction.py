"""Secrets in experiment configs, hidden in every answer of the master but the one the trial that uses them gets.

Hidden (replaced by HIDDEN, as Determined does): in `checkpoint_storage` and `tensorboard_storage`, the S3
`access_key` and `secret_key` and any field named like a password, token or key; every value under
`data.secrets` (Determined 0.35); `environment.registry_auth.password`; and the value of every
`environment.environment_variables` entry whose name looks secret (`..._TOKEN=`, `..._SECRET...=`,
`..._PASSWORD=`, `..._API_KEY=`, ...). Only the trial's own process reads its unredacted config
(`GET /trials/{id}/context` with that trial's token); the master itself (GC, the trial launcher) reads the
stored config.
"""
import re
from typing import Any, Dict, List, Mapping, Optional

HIDDEN = "********"
_SECRET_FIELD = re.compile(r"(secret|password|passwd|token|credential|private_key|api_key|access_key|auth)", re.I)
_SECRET_VARIABLE = re.compile(r"(SECRET|PASSWORD|PASSWD|TOKEN|CREDENTIAL|PRIVATE_KEY|API_KEY|ACCESS_KEY|_KEY$|^KEY$)",
                              re.I)
_STORAGE_SECTIONS = ("checkpoint_storage", "tensorboard_storage")


def storage(config: Optional[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    """A copy of a storage config with its secrets hidden (None stays None)."""
    if not isinstance(config, Mapping):
        return config  # type: ignore[return-value]
    return {k: (HIDDEN if v is not None and _SECRET_FIELD.search(str(k)) else v) for k, v in config.items()}


def experiment_config(config: Mapping[str, Any]) -> Dict[str, Any]:
    """A copy of an experiment config with every secret hidden (see the module's doc)."""
    out = dict(config)
    for section in _STORAGE_SECTIONS:
        if isinstance(out.get(section), Mapping):
            out[section] = storage(out[section])
    data = out.get("data")
    if isinstance(data, Mapping) and isinstance(data.get("secrets"), Mapping):
        out["data"] = {**data, "secrets": {k: HIDDEN for k in data["secrets"]}}
    environment = out.get("environment")
    if isinstance(environment, Mapping):
        out["environment"] = _environment(environment)
    return out


def _environment(environment: Mapping[str, Any]) -> Dict[str, Any]:
    env = dict(environment)
    auth = env.get("registry_auth")
    if isinstance(auth, Mapping) and auth.get("password") is not None:
        env["registry_auth"] = {**auth, "password": HIDDEN}
    variables = env.get("environment_variables")
    if isinstance(variables, Mapping):
        env["environment_variables"] = {kind: _variables(v) for kind, v in variables.items()}
    elif isinstance(variables, list):
        env["environment_variables"] = _variables(variables)
    return env


def _variables(items: Any) -> Any:
    if not isinstance(items, list):
        return items
    out: List[Any] = []
    for item in items:
        if isinstance(item, str) and "=" in item:
            name, _ = item.split("=", 1)
            if _SECRET_VARIABLE.search(name):
                item = f"{name}={HIDDEN}"
        out.append(item)
    return out


def hidden_values(config: Optional[Mapping[str, Any]]) -> bool:
    """Whether a storage config (as a client got it) has hidden values: its files must come through the master."""
    return isinstance(config, Mapping) and any(v == HIDDEN for v in config.values())
