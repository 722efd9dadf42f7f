"""The experiment config schema (every field of Determined 0.12 to 0.38) and ``load_experiment_config``."""
import math
import unicodedata
from typing import Any, Dict, List, Mapping

from determined.config.batch_lengths import check_lengths_reach_a_batch
from determined.config.entrypoint import ENTRYPOINT_HINT, Entrypoint, is_trial_class, runs_a_script
from determined.config.environment import BIND_MOUNTS, ENVIRONMENT, PBS, SLURM
from determined.config.errors import InvalidExperimentConfig, Problems, describe
from determined.config.fields import (
    INVALID,
    REQUIRED,
    Bool,
    Enum,
    Field,
    Int,
    JSONMapping,
    ListOf,
    MemorySize,
    Number,
    Section,
    Str,
)
from determined.config.hparams import Hyperparameters, check_global_batch_size, dotted, grid_values, hparam_leaves
from determined.config.log_policies import DEFAULT_LOG_POLICIES, LogPolicies
from determined.config.legacy import upgrade_legacy_config
from determined.config.lengths import Length, length_unit
from determined.config.petname import petname
from determined.config.searchers import MAX_ALLOWED_TRIALS, SearcherSpec, searcher_drives_trials, searcher_lengths
from determined.config.storage import CHECKPOINT_STORAGE, DATA_LAYER, DATA_LAYER_DEFAULT, TENSORBOARD_STORAGE

SEARCHER_HINT = (
    "add a searcher, e.g. `searcher: {name: single, metric: validation_loss, max_length: {batches: 1000}}`"
)


def _defaults(section: Section) -> Dict[str, Any]:
    return section.check({}, "", Problems())


_TEXT = Field(Str(), None)
DEVICE = Section(
    {
        "host_path": Field(Str(nonempty=True), REQUIRED),
        "container_path": Field(Str(nonempty=True), REQUIRED),
        "mode": Field(Str(), "mrw"),
    }
)
RESOURCES = Section(
    {
        "slots_per_trial": Field(Int(minimum=0), 1),  # 0: a trial with no slot (CPU only; docs/config.md)
        "max_slots": Field(Int(minimum=1), None),
        "weight": Field(Number(minimum=0, exclusive_min=True, as_float=True), 1.0),
        "native_parallel": Field(Bool(), False),
        "shm_size": Field(MemorySize(), 4 * 1024**3),
        "agent_label": Field(Str(), ""),
        "resource_pool": Field(Str(), ""),
        "priority": Field(Int(minimum=1, maximum=99), None),
        "devices": Field(ListOf(DEVICE), []),
        "is_single_node": Field(Bool(), None),
        "resource_manager": _TEXT,  # 0.29.0 only
        "slots": Field(Int(minimum=0), None),  # the slots of commands and notebooks: no effect on experiments
    }
)
OPTIMIZATIONS = Section(
    {
        "aggregation_frequency": Field(Int(minimum=1), 1),
        "average_aggregated_gradients": Field(Bool(), True),
        "average_training_metrics": Field(Bool(), False),
        "gradient_compression": Field(Bool(), False),
        "mixed_precision": Field(Enum("O0", "O1", "O2", "O3"), "O0"),
        "tensor_fusion_threshold": Field(Int(minimum=0), 64),
        "tensor_fusion_cycle_time": Field(Int(minimum=0), 5),
        "auto_tune_tensor_fusion": Field(Bool(), False),
        "grad_updates_size_file": Field(Str(), None),
    }
)
REPRODUCIBILITY = Section({"experiment_seed": Field(Int(minimum=0, maximum=2**31 - 1), None)})
SECURITY = Section({"kerberos": Field(Section({"config_file": Field(Str(), "")}), {"config_file": ""})})
INTERNAL = Section({"native": Field(Section({"command": Field(ListOf(Str()), [])}), None)})
PROFILING = Section(
    {
        "enabled": Field(Bool(), False),
        "begin_on_batch": Field(Int(minimum=0), 0),
        "end_after_batch": Field(Int(minimum=0), None),
        "end_on_batch": Field(Int(minimum=0), None),  # 0.15.2-0.15.3: the name of end_after_batch
        "sync_timings": Field(Bool(), True),
    }
)
RETENTION_POLICY = Section({"log_retention_days": Field(Int(minimum=-1, maximum=32767), None)})
_HOST_PORT = {"host": Field(Str(), REQUIRED), "port": Field(Int(minimum=1, maximum=65535), REQUIRED)}
PACHYDERM = Section(
    {
        "pachd": Field(Section(dict(_HOST_PORT)), REQUIRED),
        "proxy": Field(Section({**_HOST_PORT, "scheme": Field(Str(), REQUIRED)}), REQUIRED),
        "dataset": Field(
            Section({name: Field(Str(), REQUIRED) for name in ("project", "repo", "commit", "branch", "token")}),
            REQUIRED,
        ),
    }
)
WEBHOOKS = Section(
    {
        "webhook_id": Field(ListOf(Int()), None),
        "webhook_name": Field(ListOf(Str()), None),
        "exclude": Field(Bool(), False),
    }
)
INTEGRATIONS = Section({"pachyderm": Field(PACHYDERM, None), "webhooks": Field(WEBHOOKS, None)})

EXPERIMENT = Section(
    {
        "description": Field(Str(), None),
        "labels": Field(ListOf(Str()), []),
        "data": Field(JSONMapping(), {}),
        "checkpoint_storage": Field(CHECKPOINT_STORAGE, None),
        "tensorboard_storage": Field(TENSORBOARD_STORAGE, None),
        "perform_initial_validation": Field(Bool(), False),
        "min_checkpoint_period": Field(Length(), {"batches": 0}),
        "min_validation_period": Field(Length(), {"batches": 0}),
        "checkpoint_policy": Field(Enum("best", "all", "none"), "best"),
        "hyperparameters": Field(Hyperparameters(), {}),
        "searcher": Field(SearcherSpec(), REQUIRED, hint=SEARCHER_HINT),
        "resources": Field(RESOURCES, _defaults(RESOURCES)),
        "optimizations": Field(OPTIMIZATIONS, _defaults(OPTIMIZATIONS)),
        "records_per_epoch": Field(Int(minimum=0), 0),
        "scheduling_unit": Field(Int(minimum=1), 100),
        "bind_mounts": Field(BIND_MOUNTS, []),
        "environment": Field(ENVIRONMENT, _defaults(ENVIRONMENT)),
        "reproducibility": Field(REPRODUCIBILITY, {"experiment_seed": None}),
        "max_restarts": Field(Int(minimum=0), 5),
        "security": Field(SECURITY, _defaults(SECURITY)),
        "debug": Field(Bool(), False),
        "internal": Field(INTERNAL, None),
        "entrypoint": Field(Entrypoint(), None),
        "data_layer": Field(DATA_LAYER, DATA_LAYER_DEFAULT),
        # Fields of Determined 0.14 to 0.38.
        "name": Field(Str(), None),
        "workspace": Field(Str(), ""),
        "project": Field(Str(), ""),
        "log_policies": Field(LogPolicies(), DEFAULT_LOG_POLICIES),
        "profiling": Field(PROFILING, _defaults(PROFILING)),
        "retention_policy": Field(RETENTION_POLICY, None),
        "preemption_timeout": Field(Int(minimum=1), None),
        "slurm": Field(SLURM, _defaults(SLURM)),
        "pbs": Field(PBS, _defaults(PBS)),
        "integrations": Field(INTEGRATIONS, None),
    }
)
TOP_LEVEL_FIELDS = tuple(EXPERIMENT.fields)


def load_experiment_config(raw: Mapping[str, Any], *, unmanaged: bool = False) -> Dict[str, Any]:
    """Validate a user config (0.13, or 0.12 with steps) and return its canonical form with every default filled.
    `unmanaged`: the config of an unmanaged experiment (0.38's core_v2), whose script runs outside the platform and
    so needs no entrypoint.

    Raises InvalidExperimentConfig listing every problem, each ``"<field.path>: <what is wrong>; <allowed>"``.
    """
    if not isinstance(raw, Mapping):
        raise InvalidExperimentConfig([f"config: got {describe(raw)}; a mapping of experiment config fields"])
    problems = Problems()
    upgraded = upgrade_legacy_config(raw, problems)
    config = EXPERIMENT.check(upgraded, "", problems)
    _name_the_experiment(config)
    _check_workspace_and_project(config, problems)
    if not unmanaged:
        _check_entrypoint(config, problems)
    _check_trial_class_length(config, problems)
    in_records_or_epochs = _check_epochs(config, problems)
    if runs_a_script(config):
        in_records_or_epochs = []  # a script gets its searcher lengths in their own unit: nothing to convert
    else:
        check_lengths_reach_a_batch(config, problems)
    if isinstance(config["hyperparameters"], dict):
        slots = config["resources"]["slots_per_trial"] if isinstance(config["resources"], dict) else 1
        required_by = f"{', '.join(in_records_or_epochs)} (in records or epochs)" if in_records_or_epochs else ""
        check_global_batch_size(config["hyperparameters"], slots, problems, required_by)
    _check_grid(config, problems)
    _check_max_slots(config, problems)
    problems.raise_if_any()
    return config


def _usable_as_name(description: Any) -> bool:
    """Whether a description can stand as the title: a name's rules (registry/names.py), which a description need
    not follow (control characters, a line break, over 256 characters): such a one keeps a pet name instead."""
    if not isinstance(description, str) or not description.strip() or description != description.strip():
        return False
    if len(description) > 256 or description in (".", ".."):
        return False
    return not any(unicodedata.category(ch)[0] == "C" or unicodedata.category(ch) in ("Zl", "Zp")
                   for ch in description)


def _name_the_experiment(config: Dict[str, Any]) -> None:
    """``name`` (0.16+) is the experiment's title: given, else the description (the title before 0.16, which
    Determined's 0.16 migration copied into ``name``), else a pet name; ``description`` defaults to it."""
    name, description = config["name"], config["description"]
    if name is None:
        name = description if _usable_as_name(description) else f"Experiment ({petname()})"
        config["name"] = name
    if description is None and name is not INVALID:
        config["description"] = name


def _check_workspace_and_project(config: Dict[str, Any], problems: Problems) -> None:
    workspace, project = config["workspace"], config["project"]
    if isinstance(workspace, str) and isinstance(project, str) and bool(workspace) != bool(project):
        given, missing = ("workspace", "project") if workspace else ("project", "workspace")
        problems.add(missing, f"missing while {given} is given",
                     "workspace and project must both be given (the names of an existing workspace and project), "
                     "or neither")


def _check_entrypoint(config: Dict[str, Any], problems: Problems) -> None:
    internal = config["internal"]
    native = isinstance(internal, dict) and internal.get("native") is not None
    if config["entrypoint"] is None and not native:
        problems.missing("entrypoint", ENTRYPOINT_HINT)


def _check_trial_class_length(config: Dict[str, Any], problems: Problems) -> None:
    """A Trial class (entrypoint `module:Class`) trains to `searcher.max_length` (Determined 0.38 too); only a script,
    whose own loop decides its length, may leave it out."""
    searcher, entrypoint = config["searcher"], config["entrypoint"]
    if not isinstance(searcher, dict) or searcher.get("max_length") is not None:
        return
    if problems.is_handled("searcher.max_length"):
        return  # a legacy length field (max_steps...) was given but is wrong: reported under its own name
    if is_trial_class(entrypoint) and not searcher_drives_trials(searcher):
        problems.add("searcher.max_length", f"is missing, but the entrypoint {entrypoint!r} is a Trial class, which "
                     "trains to searcher.max_length", "give max_length (e.g. max_length: {batches: 1000}), or run a "
                     "script whose training loop decides its length")


def _check_epochs(config: Dict[str, Any], problems: Problems) -> List[str]:
    """Lengths in epochs need records_per_epoch; returns the lengths in records or epochs."""
    lengths = {name: config[name] for name in ("min_validation_period", "min_checkpoint_period")}
    if isinstance(config["searcher"], dict):
        lengths.update({f"searcher.{k}": v for k, v in searcher_lengths(config["searcher"]).items()})
    units = {name: length_unit(length) for name, length in lengths.items() if isinstance(length, dict)}
    in_epochs = [name for name, unit in units.items() if unit == "epochs"]
    if in_epochs and config["records_per_epoch"] == 0:
        problems.add(
            "records_per_epoch",
            f"{', '.join(in_epochs)} {'is' if len(in_epochs) == 1 else 'are'} in epochs but records_per_epoch is not set",
            "set records_per_epoch to the number of records in one epoch of the training data (a positive int)",
        )
    return [name for name, unit in units.items() if unit in ("records", "epochs")]


def _check_grid(config: Dict[str, Any], problems: Problems) -> None:
    searcher, hparams = config["searcher"], config["hyperparameters"]
    if not isinstance(searcher, dict) or searcher.get("name") != "grid" or not isinstance(hparams, dict):
        return
    counts: Dict[str, int] = {}
    complete = True
    for path, spec in hparam_leaves(hparams, sort=False):
        name = dotted(path)
        if spec is INVALID:
            complete = False
        elif spec["type"] in ("int", "double", "log") and spec["count"] is None:
            problems.missing(
                f"hyperparameters.{name}.count",
                f"the grid searcher needs `count` for every int/double/log hyperparameter; add e.g. `count: 5` to {name}",
            )
            complete = False
        else:
            counts[name] = len(grid_values(spec))
    if not complete:
        return
    total = math.prod(counts.values())
    if total > MAX_ALLOWED_TRIALS:
        factors: List[str] = [f"{name}: {n}" for name, n in counts.items() if n > 1]
        problems.add(
            "searcher",
            f"the grid has {total} points ({' x '.join(factors)}), more than the maximum of {MAX_ALLOWED_TRIALS} trials",
            "lower the count or the number of vals of some hyperparameters",
        )


def _check_max_slots(config: Dict[str, Any], problems: Problems) -> None:
    resources = config["resources"]
    if not isinstance(resources, dict):
        return
    slots, max_slots = resources["slots_per_trial"], resources["max_slots"]
    if isinstance(slots, int) and isinstance(max_slots, int) and max_slots < slots:
        problems.add(
            "resources.max_slots",
            f"{max_slots} is less than slots_per_trial ({slots})",
            "max_slots must be at least slots_per_trial, or left unset for no limit",
        )
