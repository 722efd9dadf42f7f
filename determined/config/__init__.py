"""Experiment config: schema, defaults, legacy (0.12) upgrades, hyperparameter helpers and clear validation errors.

Pure: no network, no database, no framework. Everything downstream reads the canonical dict returned by
``load_experiment_config`` (see docs/internals.md, "Canonical experiment config").
"""
from determined.common.lazy import lazy_attributes

# Each name is imported from its module on first use, so that reading one part (the hyperparameter helpers, for
# a read command of the CLI) does not import the others (the YAML parser, the schema).
_LAZY = {
    "no_effect_notes": "determined.config.effects",
    "environment_variables": "determined.config.environment",
    "ConfigFileError": "determined.config.errors",
    "InvalidExperimentConfig": "determined.config.errors",
    "config_from": "determined.config.files",
    "load_config_file": "determined.config.files",
    "load_config_text": "determined.config.files",
    "parse_yaml": "determined.config.files",
    "read_config_file": "determined.config.files",
    "Categorical": "determined.config.hparams",
    "Constant": "determined.config.hparams",
    "Double": "determined.config.hparams",
    "HParam": "determined.config.hparams",
    "Integer": "determined.config.hparams",
    "Log": "determined.config.hparams",
    "canonical_hparam": "determined.config.hparams",
    "canonical_hparams": "determined.config.hparams",
    "dotted": "determined.config.hparams",
    "flat_hparams": "determined.config.hparams",
    "grid_values": "determined.config.hparams",
    "hparam_leaves": "determined.config.hparams",
    "is_group": "determined.config.hparams",
    "nest_values": "determined.config.hparams",
    "sample_hparams": "determined.config.hparams",
    "active_log_policies": "determined.config.log_policies",
    "length_to_batches": "determined.config.lengths",
    "TOP_LEVEL_FIELDS": "determined.config.schema",
    "load_experiment_config": "determined.config.schema",
    "MAX_ALLOWED_TRIALS": "determined.config.searchers",
    "SEARCHER_NAMES": "determined.config.searchers",
    "searcher_drives_trials": "determined.config.searchers",
    "default_checkpoint_storage": "determined.config.storage",
    "make_test_config": "determined.config.testmode",
}

__getattr__ = lazy_attributes(__name__, _LAZY)

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
    "searcher_drives_trials",
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
