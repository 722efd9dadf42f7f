"""`deepspeed.initialize(args=hparams, config=dict)` as DeepSpeedTrials of Determined 0.19-0.26 call it, in a process
of its own (one gloo rank on CPU). Prints one `RESULT <json>` line."""
import json
import types

import _ds_one_rank  # noqa: F401  (one rank on CPU, the compat shims; before deepspeed)
import deepspeed  # noqa: E402
import torch  # noqa: E402

torch.manual_seed(0)
model = torch.nn.Linear(3, 1)
before = model.weight.detach().clone()
# the hyperparameters name a JSON file that does not exist: DeepSpeed 0.8 used config= and never read it
hparams = types.SimpleNamespace(deepspeed_config="no_such_ds_config.json", local_rank=-1, lr=0.5)
engine, optimizer, _, _ = deepspeed.initialize(
    args=hparams, model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.5),
    config={"train_batch_size": 4, "gradient_accumulation_steps": 1},
)
loss = engine(torch.ones(4, 3)).pow(2).mean()
engine.backward(loss)
engine.step()
print("RESULT " + json.dumps({
    "train_batch_size": engine.train_batch_size(),
    "moved": float((model.weight.detach() - before).abs().sum()),
    "hparams_config": hparams.deepspeed_config,
    "hparams_local_rank": hparams.local_rank,
}), flush=True)
# The group DeepSpeed created ends here, not in the interpreter's teardown, where gloo's threads can abort the
# process ("terminate called without an active exception") after its result was printed.
if torch.distributed.is_initialized():
    torch.distributed.destroy_process_group()
