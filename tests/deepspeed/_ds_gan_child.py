"""A GAN step as DeepSpeedTrials written for DeepSpeed 0.8 take it (0.20-0.26's deepspeed_dcgan): the generator's
engine runs `backward(loss)` through the discriminator's engine at ZeRO stage 0. In a process of its own (one gloo
rank on CPU); prints one `RESULT <json>` line."""
import copy
import json

import _ds_one_rank  # noqa: F401  (one rank on CPU, the compat shims; before deepspeed)
import deepspeed  # noqa: E402
import torch  # noqa: E402

torch.manual_seed(0)
config = {"train_batch_size": 4}
gen = torch.nn.Linear(3, 5)
disc = torch.nn.Sequential(torch.nn.Linear(5, 1), torch.nn.Sigmoid())
ref_gen, ref_disc = copy.deepcopy(gen), copy.deepcopy(disc)
g, _, _, _ = deepspeed.initialize(model=gen, optimizer=torch.optim.SGD(gen.parameters(), lr=0.1), config=dict(config))
d, _, _, _ = deepspeed.initialize(model=disc, optimizer=torch.optim.SGD(disc.parameters(), lr=0.1), config=dict(config))
criterion = torch.nn.BCELoss()
noise = torch.randn(4, 3)

# the generator's step, through the discriminator's engine
g.zero_grad()
err_g = criterion(d(g(noise)), torch.ones(4, 1))
g.backward(err_g)
g.step()
disc_grad = float(disc[0].weight.grad.abs().sum()) if disc[0].weight.grad is not None else 0.0

# the same step in plain torch
ref_opt = torch.optim.SGD(ref_gen.parameters(), lr=0.1)
ref_err = criterion(ref_disc(ref_gen(noise)), torch.ones(4, 1))
ref_err.backward()
ref_opt.step()

# a tensor.backward() that no engine started is still refused at stage 0
direct_refused = False
try:
    criterion(d(torch.randn(4, 5)), torch.ones(4, 1)).backward()
except RuntimeError as e:
    direct_refused = "engine.backward(loss)" in str(e)

print("RESULT " + json.dumps({
    "loss": float(err_g), "ref_loss": float(ref_err),
    "gen_diff": float((gen.weight.detach() - ref_gen.weight.detach()).abs().max()),
    "disc_grad": disc_grad,
    "ref_disc_grad": float(ref_disc[0].weight.grad.abs().sum()),
    "direct_refused": direct_refused,
}), flush=True)
