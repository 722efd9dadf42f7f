"""A script trial of the tests run by `python3 -m determined.launch.torch_distributed`: each rank shows what
torchrun would have given it, gathers every rank's number with torch.distributed and with det.core, and trains a
linear model data-parallel (its gradients averaged over the ranks with all_reduce), reporting the loss.
"""
import os

import torch
import torch.distributed as dist

import determined as det
from determined import core

info = det.get_cluster_info()
assert info is not None
dist.init_process_group("gloo")
rank, size = dist.get_rank(), dist.get_world_size()
gathered = [torch.zeros(1, dtype=torch.long) for _ in range(size)]
dist.all_gather(gathered, torch.tensor([rank]))
print(f"ddp: rank {rank} of {size} local_rank {os.environ['LOCAL_RANK']} gathered {[int(g) for g in gathered]}",
      flush=True)
torch.manual_seed(0)
model = torch.nn.Linear(1, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.2)
x = torch.linspace(-1, 1, 32).unsqueeze(1)
y = 3 * x + 1
with core.init() as ctx:
    print(f"ddp: rank {rank} core allgather {ctx.distributed.allgather(rank)}", flush=True)
    for step in range(1, info.trial.hparams["steps"] + 1):
        shard = slice(rank, None, size)  # each rank trains on its half of the data
        loss = torch.nn.functional.mse_loss(model(x[shard]), y[shard])
        optimizer.zero_grad()
        loss.backward()
        for param in model.parameters():  # what DistributedDataParallel does, without its seconds of imports
            dist.all_reduce(param.grad)
            param.grad /= size
        optimizer.step()
        if step % 10 == 0:
            losses = ctx.distributed.gather(loss.item())
            if rank == 0:
                ctx.train.report_training_metrics(step, {"loss": sum(losses) / len(losses)})
