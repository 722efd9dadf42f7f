"""The settings of an unmanaged run (`core_v2.Config`, and 0.38's deprecated `DefaultConfig`/`UnmanagedConfig`)."""
import dataclasses
import warnings
from typing import Any, Dict, List, Mapping, Optional, Union

from determined import errors


@dataclasses.dataclass
class Config:
    """What an unmanaged run (a script run outside the platform) records its experiment with. Inside a trial on the
    platform (a managed run) it is ignored: the experiment config rules.

    `external_experiment_id` names the experiment on the master: a later run with the same id reuses it (to group
    trials, or to continue one). `external_trial_id` (needs `external_experiment_id`) names the trial within it: a
    later run with both ids continues that trial from its latest checkpoint (`core_v2.info.latest_checkpoint`).
    """

    name: Optional[str] = None
    hparams: Optional[Dict[str, Any]] = None
    data: Optional[Dict[str, Any]] = None
    description: Optional[str] = None
    labels: Optional[List[str]] = None
    workspace: Optional[str] = None
    project: Optional[str] = None
    checkpoint_storage: Optional[Union[str, Dict[str, Any]]] = None
    searcher: Optional[Dict[str, Any]] = None
    external_experiment_id: Optional[str] = None
    external_trial_id: Optional[str] = None


class DefaultConfig(Config):
    """Deprecated in Determined 0.38 for `Config` (same fields)."""

    def __init__(self, **kwargs: Any) -> None:
        warnings.warn("core_v2.DefaultConfig is deprecated: use core_v2.Config (same fields)", FutureWarning,
                      stacklevel=2)
        super().__init__(**kwargs)


class UnmanagedConfig(Config):
    """Deprecated in Determined 0.38 for `Config` (same fields)."""

    def __init__(self, **kwargs: Any) -> None:
        warnings.warn("core_v2.UnmanagedConfig is deprecated: use core_v2.Config (same fields)", FutureWarning,
                      stacklevel=2)
        super().__init__(**kwargs)


def merge(config: Optional[Config], defaults: Optional[Config], unmanaged: Optional[Config],
          managed: bool) -> Optional[Config]:
    """The one Config of `init(config=, defaults=, unmanaged=)`: `config` when given; else `defaults` completed by
    `unmanaged`'s workspace, project and external ids (0.38). None only for a managed run given none."""
    for name, value in (("config", config), ("defaults", defaults), ("unmanaged", unmanaged)):
        if value is not None and not isinstance(value, Config):
            raise errors.DeterminedError(
                f"core_v2.init({name}=...): expected a core_v2.Config, got {type(value).__name__}")
    if defaults is not None or unmanaged is not None:
        warnings.warn("core_v2.init(defaults=, unmanaged=) is deprecated: pass config=core_v2.Config(...)",
                      FutureWarning, stacklevel=3)
    if config is not None:
        return config
    if defaults is None:
        if managed:
            return None
        if unmanaged is None:
            raise errors.DeterminedError(
                "core_v2.init(): outside a trial of the platform, give config=core_v2.Config(name=...) (the unmanaged "
                "experiment's settings), or run the script as an experiment's entrypoint")
        return unmanaged
    merged = Config(**{f.name: getattr(defaults, f.name) for f in dataclasses.fields(Config)})
    if unmanaged is not None:
        for field in ("workspace", "project", "external_experiment_id", "external_trial_id"):
            if getattr(merged, field) is None:
                setattr(merged, field, getattr(unmanaged, field))
    return merged


def check(config: Config) -> None:
    """Refuse a Config whose fields have the wrong types, naming the field and what it takes."""
    problems: List[str] = []
    for field in ("name", "description", "workspace", "project", "external_experiment_id", "external_trial_id"):
        value = getattr(config, field)
        if value is not None and (not isinstance(value, str) or not value):
            problems.append(f"{field}: expected a non-empty string, got {value!r}"[:160])
    for field in ("hparams", "data", "searcher"):
        value = getattr(config, field)
        if value is not None and not isinstance(value, Mapping):
            problems.append(f"{field}: expected a dict, got {type(value).__name__}")
    if config.labels is not None and (not isinstance(config.labels, (list, tuple))
                                      or not all(isinstance(x, str) for x in config.labels)):
        problems.append(f"labels: expected a list of strings, got {config.labels!r}"[:160])
    storage = config.checkpoint_storage
    if storage is not None and not isinstance(storage, (str, Mapping)):
        problems.append(f"checkpoint_storage: expected a path, s3://bucket/prefix or a dict, got {type(storage).__name__}")
    if config.external_trial_id is not None and config.external_experiment_id is None:
        problems.append("external_trial_id: needs external_experiment_id too (a trial is named within its experiment)")
    if (config.workspace is None) != (config.project is None):
        problems.append("workspace and project: give both (an existing workspace and project) or neither")
    if problems:
        raise errors.DeterminedError("core_v2.Config is invalid:\n  " + "\n  ".join(problems))
