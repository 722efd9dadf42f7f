"""One rank of the tf.keras distributed test: runs the scenarios of a JSON file with local core contexts.

    python -m determined.exec.launch --nproc-per-node 2 _tf_keras_worker.py scenarios.json out_dir

As _ddp_worker.py, for TFKerasTrials: the chief writes `<out_dir>/<name>.json` with the reported metrics,
the checkpoints and the weights of the last checkpoint.
"""
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from determined import _execution, core  # noqa: E402
from determined import config as det_config  # noqa: E402


def checkpoint_weights(path: pathlib.Path) -> dict:
    """The model's variables in a TFKerasTrial checkpoint, by name (no model needed)."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(path / "determined-keras-model-weights"))
    return {
        name: reader.get_tensor(name).tolist()
        for name in reader.get_variable_to_shape_map()
        if name.startswith("layer_with_weights") and name.endswith("VARIABLE_VALUE")
    }


def main() -> None:
    scenarios = json.loads(pathlib.Path(sys.argv[1]).read_text())
    out_dir = pathlib.Path(sys.argv[2])
    distributed = core.DistributedContext.from_env()
    import _tf_keras_trials  # noqa: E402 -- imports TensorFlow: after the cluster ranks are known

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
        if scenario["trial"] == "native_script":
            from determined.experimental.keras import _init

            native = _init.native_trial_context(context, _init._run_controller)
            _tf_keras_trials.native_script(native)
        else:
            _execution.run_trial(getattr(_tf_keras_trials, scenario["trial"]), context)
        if distributed.rank == 0:
            checkpoints = [{"uuid": c["uuid"], "steps_completed": c["steps_completed"]}
                           for c in context.checkpoint.reported]
            results[name] = {
                "training": context.train.training_history,
                "validation": context.train.validation_history,
                "checkpoints": checkpoints,
                "weights": checkpoint_weights(ckpt_dir / checkpoints[-1]["uuid"]),
                "checkpoint_dirs": sorted(p.name for p in ckpt_dir.iterdir()),
            }
            (out_dir / f"{name}.json").write_text(json.dumps(results[name]))
        results[name] = distributed.broadcast(results.get(name))
    distributed.close()


if __name__ == "__main__":
    main()
