"""The experiment config schema (Determined 0.13, struct order) and ``load_experiment_config``."""
import math
from typing import Any, Dict, List, Mapping

from determined.config.environment import BIND_MOUNTS, ENVIRONMENT
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
    Number,
    Section,
    Str,
)
from determined.config.hparams import Hyperparameters, check_global_batch_size, grid_values
from determined.config.legacy import upgrade_legacy_config
from determined.config.lengths import Length, length_unit
from determined.config.petname import petname
from determined.config.searchers import MAX_ALLOWED_TRIALS, SearcherSpec, searcher_lengths
from determined.config.storage import CHECKPOINT_STORAGE, DATA_LAYER, DATA_LAYER_DEFAULT, TENSORBOARD_STORAGE

ENTRYPOINT_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*"
ENTRYPOINT_HINT = "the Trial class as `module.path:ClassName`, e.g. `model_def:MNistTrial`"
SEARCHER_HINT = (
    "add a searcher, e.g. `searcher: {name: single, metric: validation_loss, max_length: {batches: 1000}}`"
)


def _defaults(section: Section) -> Dict[str, Any]:
    return section.check({}, "", Problems())


RESOURCES = Section(
    {
        "slots_per_trial": Field(Int(minimum=1), 1),
        "max_slots": Field(Int(minimum=1), None),
        "weight": Field(Number(minimum=0, exclusive_min=True, as_float=True), 1.0),
        "native_parallel": Field(Bool(), False),
        "shm_size": Field(Int(minimum=1), 4 * 1024**3),
        "agent_label": Field(Str(), ""),
        "resource_pool": Field(Str(), ""),
        "priority": Field(Int(minimum=1, maximum=99), None),
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

EXPERIMENT = Section(
    {
        "description": Field(Str(), lambda: f"Experiment ({petname()})", factory=True),
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
        "entrypoint": Field(Str(), None),
        "data_layer": Field(DATA_LAYER, DATA_LAYER_DEFAULT),
    }
)
TOP_LEVEL_FIELDS = tuple(EXPERIMENT.fields)


def load_experiment_config(raw: Mapping[str, Any]) -> Dict[str, Any]:
    """Validate a user config (0.13, or 0.12 with steps) and return its canonical form with every default filled.

    Raises InvalidExperimentConfig listing every problem, each ``"<field.path>: <what is wrong>; <allowed>"``.
    """
    if not isinstance(raw, Mapping):
        raise InvalidExperimentConfig([f"config: got {describe(raw)}; a mapping of experiment config fields"])
    problems = Problems()
    upgraded = upgrade_legacy_config(raw, problems)
    config = EXPERIMENT.check(upgraded, "", problems)
    _check_entrypoint(config, problems)
    _check_epochs(config, problems)
    if isinstance(config["hyperparameters"], dict):
        slots = config["resources"]["slots_per_trial"] if isinstance(config["resources"], dict) else 1
        check_global_batch_size(config["hyperparameters"], slots, problems)
    _check_grid(config, problems)
    _check_max_slots(config, problems)
    problems.raise_if_any()
    return config


def _check_entrypoint(config: Dict[str, Any], problems: Problems) -> None:
    internal = config["internal"]
    native = isinstance(internal, dict) and internal.get("native") is not None
    entrypoint = config["entrypoint"]
    if entrypoint is None and not native:
        problems.missing("entrypoint", ENTRYPOINT_HINT)
    elif isinstance(entrypoint, str):
        if Str(pattern=ENTRYPOINT_PATTERN, allowed=ENTRYPOINT_HINT).check(entrypoint, "entrypoint", problems) is INVALID:
            config["entrypoint"] = INVALID


def _check_epochs(config: Dict[str, Any], problems: Problems) -> None:
    if config["records_per_epoch"] != 0:
        return
    lengths = {name: config[name] for name in ("min_validation_period", "min_checkpoint_period")}
    if isinstance(config["searcher"], dict):
        lengths.update({f"searcher.{k}": v for k, v in searcher_lengths(config["searcher"]).items()})
    in_epochs = [name for name, length in lengths.items() if isinstance(length, dict) and length_unit(length) == "epochs"]
    if in_epochs:
        problems.add(
            "records_per_epoch",
            f"{', '.join(in_epochs)} {'is' if len(in_epochs) == 1 else 'are'} in epochs but records_per_epoch is not set",
            "set records_per_epoch to the number of records in one epoch of the training data (a positive int)",
        )


def _check_grid(config: Dict[str, Any], problems: Problems) -> None:
    searcher, hparams = config["searcher"], config["hyperparameters"]
    if not isinstance(searcher, dict) or searcher.get("name") != "grid" or not isinstance(hparams, dict):
        return
    counts: Dict[str, int] = {}
    complete = True
    for name, spec in hparams.items():
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
