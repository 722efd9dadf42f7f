"""One rank of the tf.estimator distributed test: runs the scenarios of a JSON file with local core contexts.

    python -m determined.exec.launch --nproc-per-node 2 _tf_keras_worker.py scenarios.json out_dir

As _ddp_worker.py, for EstimatorTrials: the chief writes `<out_dir>/<name>.json` with the reported metrics,
the checkpoints and the weights of the last checkpoint.
"""
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from determined import _execution, core  # noqa: E402
from determined import config as det_config  # noqa: E402


def checkpoint_weights(path: pathlib.Path) -> dict:
    """The model's variables in an EstimatorTrial checkpoint, by name."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(path))
    return {name: reader.get_tensor(name).tolist() for name in ("w", "b")}


def main() -> None:
    scenarios = json.loads(pathlib.Path(sys.argv[1]).read_text())
    out_dir = pathlib.Path(sys.argv[2])
    distributed = core.DistributedContext.from_env()
    import _tf_estimator_trials  # noqa: E402 -- imports TensorFlow: after the cluster ranks are known

    results = {}
    for scenario in scenarios:
        name = scenario["name"]
        config = det_config.load_experiment_config(scenario["config"])
        hparams = {k: v["val"] for k, v in config["hyperparameters"].items()}
        ckpt_dir = out_dir / "checkpoints"
        latest, steps = None, 0
        if scenario.get("resume_from"):
            previous = results[scenario["resume_from"]]
            latest, steps = previous["checkpoints"][-1]["uuid"], previous["checkpoints"][-1]["steps_completed"]
        context = core._make_local_context(
            str(ckpt_dir), scenario["lengths"], config, hparams, 5, distributed=distributed,
            latest_checkpoint=latest, steps_completed=steps,
        )
        _execution.run_trial(getattr(_tf_estimator_trials, scenario["trial"]), context)
        if distributed.rank == 0:
            checkpoints = [{"uuid": c["uuid"], "steps_completed": c["steps_completed"]}
                           for c in context.checkpoint.reported]
            results[name] = {
                "training": context.train.training_history,
                "validation": context.train.validation_history,
                "checkpoints": checkpoints,
                "weights": checkpoint_weights(ckpt_dir / checkpoints[-1]["uuid"]),
                "checkpoint_dirs": sorted(p.name for p in ckpt_dir.iterdir()),
                "exports": [(ckpt_dir / c["uuid"] / "raw" / "saved_model.pb").is_file() for c in checkpoints],
            }
            (out_dir / f"{name}.json").write_text(json.dumps(results[name]))
        results[name] = distributed.broadcast(results.get(name))
    distributed.close()


if __name__ == "__main__":
    main()
