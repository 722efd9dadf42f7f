"""The tiny MLP of model_def.py as a Core API script, written as Determined 0.26's DeepSpeed Autotune example is:
the engine's calls inside `dsat.dsat_reporting_context` (on the engine's device instead of `local_rank`, a GPU)."""
import logging

import deepspeed
import torch
from torch import nn

import determined as det
from determined.pytorch import dsat
from model_def import Blobs


def main(core_context: det.core.Context, hparams: dict) -> None:
    ds_config = dsat.get_ds_config_from_hparams(hparams)
    # Not in Determined's example: the test machine may be fresh, and DeepSpeed's CPU backend would first compile its
    # shared-memory op (minutes on 2 cores), which training never uses; a DeepSpeedTrial skips it the same way.
    from determined.pytorch.deepspeed._shims import skip_shm_comm_op

    skip_shm_comm_op()
    deepspeed.init_distributed()
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    engine, _, loader, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                                training_data=Blobs(), config=ds_config)
    steps_completed = 0
    for op in core_context.searcher.operations():
        while steps_completed < op.length:
            for x, y in loader:
                with dsat.dsat_reporting_context(core_context, op):
                    loss = nn.functional.cross_entropy(engine(x.to(engine.device)), y.to(engine.device))
                    engine.backward(loss)
                    engine.step()
                if engine.is_gradient_accumulation_boundary():
                    steps_completed += 1
                    if steps_completed == op.length:
                        op.report_completed(float(loss))
                        return


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    info = det.get_cluster_info()
    with det.core.init(distributed=det.core.DistributedContext.from_deepspeed()) as core_context:
        main(core_context, info.trial.hparams)
