"""Helpers of the PyTorch tests: a config and a local run of a trial (a module of its own, so that test modules and
_resume_child.py import it by a name no other test directory uses)."""
import pathlib
import sys
from typing import Any, Dict, List, Optional, Type

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))

from determined import _execution, core  # noqa: E402
from determined import config as det_config  # noqa: E402


def make_config(metric: str = "val_loss", **overrides: Any) -> Dict[str, Any]:
    raw: Dict[str, Any] = {
        "entrypoint": "_trials:DropoutTrial",
        "hyperparameters": {"global_batch_size": 4},
        "searcher": {"name": "single", "metric": metric, "max_length": {"batches": 10}},
    }
    raw.update(overrides)
    return det_config.load_experiment_config(raw)


def run_trial(
    trial_class: Type[Any],
    ckpt_dir: pathlib.Path,
    lengths: List[int],
    config: Optional[Dict[str, Any]] = None,
    hparams: Optional[Dict[str, Any]] = None,
    seed: int = 3,
    latest_checkpoint: Optional[str] = None,
    steps_completed: int = 0,
) -> core.Context:
    """Run the trial with a local core context; returns the (closed) context with its histories."""
    config = config or make_config()
    hparams = hparams or {k: v["val"] for k, v in config["hyperparameters"].items()}
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    with core._make_local_context(
        str(ckpt_dir), lengths, config, hparams, seed,
        latest_checkpoint=latest_checkpoint, steps_completed=steps_completed,
    ) as context:
        _execution.run_trial(trial_class, context)
    return context
