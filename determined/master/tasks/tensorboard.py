"""TensorBoard as a task: the event files of the experiments it shows, and its command line.

The event files are written at the task's start from the metrics the master stored (with the writer of
determined/master/insights/tensorboard.py, one directory per trial); TensorBoard serves them on 127.0.0.1 under
`/proxy/<task id>`, reached through the master's proxy by every user who may read the experiments.
"""
import os
from typing import Any, Dict, List

from sqlalchemy import select

from determined.master.db import TrainingMetrics, Trial, ValidationMetrics
from determined.master.db.models import Task


def _rows(s: Any, model: Any, trial_id: int) -> List[Dict[str, Any]]:
    return [{"steps_completed": r.steps_completed, "metrics": r.metrics or {},
             "end_time": r.end_time.isoformat() if r.end_time else None}
            for r in s.scalars(select(model).where(model.trial_id == trial_id).order_by(model.id))]


def prepare_logdir(s: Any, master: Any, task: Task, run_dir: str) -> str:
    """Write the experiments' event files into the task's run directory; TensorBoard's `--logdir_spec`."""
    from determined.common import tfevents as events
    from determined.master.insights.tensorboard import write_trial_events

    del master
    root = os.path.join(run_dir, "logs")
    specs = []
    for exp_id in task.experiment_ids or []:
        for trial_id in s.scalars(select(Trial.id).where(Trial.experiment_id == int(exp_id))):
            directory = events.trial_dir(root, int(exp_id), trial_id)
            directory.mkdir(parents=True, exist_ok=True)
            write_trial_events(directory, {"training_metrics": _rows(s, TrainingMetrics, trial_id),
                                           "validation_metrics": _rows(s, ValidationMetrics, trial_id)})
        logdir = events.experiment_dir(root, int(exp_id))
        logdir.mkdir(parents=True, exist_ok=True)
        specs.append(f"experiment_{exp_id}:{logdir}")
    return ",".join(specs)


def tensorboard_command(python: str, *, port: int, path_prefix: str, logdir: str, extra: List[str]) -> List[str]:
    return [python, "-m", "tensorboard.main", "--host", "127.0.0.1", "--port", str(port), "--path_prefix",
            path_prefix, "--logdir_spec", logdir, *extra]
