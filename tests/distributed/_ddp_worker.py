"""One rank of a distributed test: runs the scenarios of a JSON file with local core contexts.

    python -m determined.exec.launch --nproc-per-node 2 _ddp_worker.py scenarios.json out_dir

Every scenario trains `trial` for `lengths` with its `config`/`hparams` (resuming from the checkpoint
of an earlier scenario with `resume_from`); the chief writes `<out_dir>/<name>.json` with the reported
metrics and checkpoints, and the final weights.
"""
import json
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from determined import _execution, core  # noqa: E402
from determined import config as det_config  # noqa: E402
import _ddp_trials  # noqa: E402


def main() -> None:
    scenarios = json.loads(pathlib.Path(sys.argv[1]).read_text())
    out_dir = pathlib.Path(sys.argv[2])
    distributed = core.DistributedContext.from_env()
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
        _execution.run_trial(getattr(_ddp_trials, scenario["trial"]), context)
        if distributed.rank == 0:
            last = context.checkpoint.reported[-1]["uuid"]
            state = torch.load(ckpt_dir / last / "state_dict.pth", weights_only=False)
            results[name] = {
                "training": context.train.training_history,
                "validation": context.train.validation_history,
                "checkpoints": [{"uuid": c["uuid"], "steps_completed": c["steps_completed"]}
                                for c in context.checkpoint.reported],
                "weights": {k: v.tolist() for k, v in state["models_state_dict"][0].items()},
            }
            (out_dir / f"{name}.json").write_text(json.dumps(results[name]))
        # The other ranks learn where the chief's checkpoints are for a later resume_from.
        results[name] = distributed.broadcast(results.get(name))
    distributed.close()


if __name__ == "__main__":
    main()
