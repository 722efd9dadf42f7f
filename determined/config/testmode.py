"""The config of a cluster test-mode experiment (``det experiment create --test-mode``): one batch, then stop."""
import copy
import random
from typing import Any, Dict, Mapping, Optional

from determined.common import data_dir
from determined.config.hparams import sample_hparams
from determined.config.schema import load_experiment_config
from determined.config.storage import complete_storage, default_checkpoint_storage

TEST_MODE_PREFIX = "[test-mode] "


def make_test_config(config: Mapping[str, Any], hparams: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The test-mode version of an experiment config (raw or canonical); returns a canonical config.

    Name and description prefixed "[test-mode] ", scheduling_unit 1, min_validation_period {batches: 1}, searcher single
    with max_length {batches: 1} (metric, smaller_is_better and warm-start source kept), every hyperparameter a
    const of the value in ``hparams`` (hyperparameters missing from ``hparams`` are sampled at random),
    save_experiment_best / save_trial_best / save_trial_latest 0, max_restarts 0. Without checkpoint_storage,
    the default shared_fs storage of the data dir is used so that the GC settings can be set.
    """
    out = copy.deepcopy(load_experiment_config(config))
    values = dict(hparams or {})
    missing = {name: spec for name, spec in out["hyperparameters"].items() if name not in values}
    values.update(sample_hparams(missing, random.Random()))
    searcher = out["searcher"]
    out["description"] = TEST_MODE_PREFIX + out["description"]
    out["name"] = TEST_MODE_PREFIX + out["name"]
    out["scheduling_unit"] = 1
    out["min_validation_period"] = {"batches": 1}
    out["searcher"] = {
        "name": "single",
        "metric": searcher["metric"],
        "smaller_is_better": searcher["smaller_is_better"],
        "source_trial_id": searcher["source_trial_id"],
        "source_checkpoint_uuid": searcher["source_checkpoint_uuid"],
        "max_length": {"batches": 1},
    }
    out["hyperparameters"] = {name: {"type": "const", "val": value} for name, value in values.items()}
    storage = complete_storage(out["checkpoint_storage"], default_checkpoint_storage(str(data_dir())))
    out["checkpoint_storage"] = {**storage, "save_experiment_best": 0, "save_trial_best": 0, "save_trial_latest": 0}
    out["max_restarts"] = 0
    return load_experiment_config(out)
