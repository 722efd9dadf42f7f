"""`--config KEY=VALUE` overrides and config templates (Determined 0.38's merge rules); pure.

`apply_overrides(config, ["searcher.max_length.batches=4"])` deep-merges each override into the config;
`merge_template(config, template)` puts a template under a config (the config's values win).
"""
import copy
from typing import Any, Dict, Iterable, List, Mapping

from determined.config.errors import InvalidExperimentConfig

# Lists that are concatenated (the template's entries first) instead of replaced, as Determined does.
_CONCATENATED = ("bind_mounts", "devices")


def parse_override(text: str) -> "tuple[List[str], Any]":
    """`a.b.c=VALUE` -> (["a", "b", "c"], value); VALUE is YAML 1.2 typed: `[..]`/`{..}` flow collections,
    `x,y` a list of typed items, else one typed scalar."""
    from determined.config.files import parse_yaml

    if not isinstance(text, str) or "=" not in text:
        raise InvalidExperimentConfig(
            [f"--config {text!r}: expected KEY=VALUE with a dotted KEY, e.g. --config searcher.max_length.batches=4"],
            header="invalid --config override")
    key, raw = text.split("=", 1)
    path = key.strip().split(".")
    if not key.strip() or any(not part for part in path):
        raise InvalidExperimentConfig(
            [f"--config {text!r}: {key!r} is not a dotted path of field names (e.g. resources.slots_per_trial)"],
            header="invalid --config override")
    source = f"--config {key}"
    stripped = raw.strip()
    if stripped.startswith(("[", "{")):
        value = parse_yaml(stripped, source, "invalid --config override")
    elif "," in stripped:
        value = [parse_yaml(part.strip(), source, "invalid --config override") for part in stripped.split(",")]
    else:
        value = parse_yaml(stripped, source, "invalid --config override") if stripped else ""
    if path == ["bind_mounts"] and isinstance(value, dict):
        value = [value]
    return path, value


def apply_overrides(config: Mapping[str, Any], overrides: Iterable[str]) -> Dict[str, Any]:
    """A copy of `config` with each `KEY=VALUE` override merged in, in order (an override wins; a mapping value
    is merged into the mapping it replaces; a null or missing parent becomes a mapping)."""
    out: Dict[str, Any] = copy.deepcopy(dict(config))
    for text in overrides:
        path, value = parse_override(text)
        node = out
        for depth, part in enumerate(path[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                where = ".".join(path[: depth + 1])
                raise InvalidExperimentConfig(
                    [f"--config {text!r}: {where} is {child!r}, not a mapping, so it has no field {path[depth + 1]!r}; "
                     f"set {where} itself (--config {where}=...)"], header="invalid --config override")
            node = child
        last = path[-1]
        if isinstance(value, dict) and isinstance(node.get(last), dict):
            node[last] = merge_template(value, node[last], _hparams=path[0] == "hyperparameters")
        else:
            node[last] = value
    return out


def merge_template(config: Mapping[str, Any], template: Mapping[str, Any], _hparams: bool = False) -> Dict[str, Any]:
    """`config` merged over `template`: mappings are merged recursively, the config's values win, lists come from
    the config when it sets them, except `bind_mounts`/`devices`, which are the template's (less those whose
    `container_path` the config uses) followed by the config's. A hyperparameter both define is the config's,
    unless both are groups (then merged the same way)."""
    from determined.config.hparams import is_group

    out: Dict[str, Any] = copy.deepcopy(dict(template))
    for key, value in config.items():
        base = out.get(key)
        if _hparams and not (is_group(value) and is_group(base)):
            out[key] = copy.deepcopy(value)
        elif isinstance(value, Mapping) and isinstance(base, Mapping):
            out[key] = merge_template(value, base, _hparams=_hparams or key == "hyperparameters")
        elif key in _CONCATENATED and isinstance(value, list) and isinstance(base, list):
            taken = {m.get("container_path") for m in value if isinstance(m, Mapping)}
            kept = [m for m in base if not (isinstance(m, Mapping) and m.get("container_path") in taken)]
            out[key] = kept + copy.deepcopy(value)
        else:
            out[key] = copy.deepcopy(value)
    return out
