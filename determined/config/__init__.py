"""Experiment config: schema, defaults, legacy (0.12) upgrades, hyperparameter helpers and clear validation errors.

Pure: no network, no database, no framework. Everything downstream reads the canonical dict returned by
``load_experiment_config`` (see docs/internals.md, "Canonical experiment config").
"""
from determined.config.effects import no_effect_notes
from determined.config.environment import environment_variables
from determined.config.errors import ConfigFileError, InvalidExperimentConfig
from determined.config.files import config_from, load_config_file, load_config_text, parse_yaml, read_config_file
from determined.config.hparams import (
    Categorical,
    Constant,
    Double,
    HParam,
    Integer,
    Log,
    canonical_hparam,
    canonical_hparams,
    dotted,
    flat_hparams,
    grid_values,
    hparam_leaves,
    is_group,
    nest_values,
    sample_hparams,
)
from determined.config.log_policies import active_log_policies
from determined.config.lengths import length_to_batches
from determined.config.schema import TOP_LEVEL_FIELDS, load_experiment_config
from determined.config.searchers import MAX_ALLOWED_TRIALS, SEARCHER_NAMES
from determined.config.storage import default_checkpoint_storage
from determined.config.testmode import make_test_config

__all__ = [
    "active_log_policies",
    "canonical_hparams",
    "config_from",
    "dotted",
    "environment_variables",
    "flat_hparams",
    "hparam_leaves",
    "is_group",
    "load_config_text",
    "nest_values",
    "no_effect_notes",
    "parse_yaml",
    "read_config_file",
    "Categorical",
    "ConfigFileError",
    "Constant",
    "Double",
    "HParam",
    "Integer",
    "InvalidExperimentConfig",
    "Log",
    "MAX_ALLOWED_TRIALS",
    "SEARCHER_NAMES",
    "TOP_LEVEL_FIELDS",
    "canonical_hparam",
    "default_checkpoint_storage",
    "grid_values",
    "length_to_batches",
    "load_config_file",
    "load_experiment_config",
    "make_test_config",
    "sample_hparams",
]
