"""The uninterrupted run a paused trial of the DeepSpeed Trainer script must equal: the script's `train()` with a
context built as `det_ds.init()` builds it inside a trial of seed SEED (random, numpy and torch seeded, the trial
seed for the data order), but with a local core context. argv: MODEL_DIR SEED BATCHES DATA_DIR. Prints
`train: final weights <digest>`."""
import pathlib
import sys

from determined import _execution, core
from determined.pytorch.deepspeed._controller import DeepSpeedTrialController
from determined.pytorch.deepspeed._trainer import _DeepSpeedTrainerContext

if __name__ == "__main__":
    model_dir, seed, batches, data_dir = pathlib.Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    sys.path.insert(0, str(model_dir))
    import train  # noqa: E402  (the script of the model directory)

    import torch.distributed as dist  # noqa: E402

    with core._make_local_context(data_dir, [], {}, {}, trial_seed=seed) as core_context:
        _execution._seed_python_and_numpy(seed)
        DeepSpeedTrialController.pre_execute_hook(seed, core_context.distributed)
        context = _DeepSpeedTrainerContext(core_context, {}, {}, seed)
        print(f"train: final weights {train.train(context, batches, None)}", flush=True)
    if dist.is_initialized():
        dist.destroy_process_group()
