"""DeepSpeed 0.8 idioms of DeepSpeedTrial code (Determined 0.19-0.26) on DeepSpeed 0.19: `deepspeed.initialize`
given both `args` with a `deepspeed_config` and `config=` uses `config`, as DeepSpeed 0.8 did (0.9+ asserts)."""
import importlib.util
import json
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent

needs_deepspeed = pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="needs deepspeed")


@needs_deepspeed
def test_initialize_with_args_and_config_uses_the_config_and_trains() -> None:
    out = subprocess.run([sys.executable, str(HERE / "_ds_initialize_child.py")], capture_output=True, text=True,
                         timeout=240, cwd=str(HERE.parent.parent))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    result = json.loads(next(line for line in out.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert result["train_batch_size"] == 4  # from config=, not from the (missing) file the args name
    assert result["moved"] > 0  # one optimizer step changed the weights
    assert result["hparams_config"] == "no_such_ds_config.json"  # the user's object is left as it was
    assert result["hparams_local_rank"] == 0  # except what DeepSpeed sets on args, as it always did


@needs_deepspeed
def test_a_generator_backward_through_the_discriminator_engine_trains_as_in_deepspeed_0_8() -> None:
    out = subprocess.run([sys.executable, str(HERE / "_ds_gan_child.py")], capture_output=True, text=True,
                         timeout=240, cwd=str(HERE.parent.parent))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    result = json.loads(next(line for line in out.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert result["loss"] == pytest.approx(result["ref_loss"], abs=1e-6)
    # the generator took the same SGD step as plain torch: its gradient crossed the discriminator unscaled
    assert result["gen_diff"] < 1e-6
    # the discriminator's parameters collected the gradient, as with DeepSpeed 0.8 (its next zero_grad clears it)
    assert result["disc_grad"] == pytest.approx(result["ref_disc_grad"], rel=1e-5)
    assert result["disc_grad"] > 0
    # a plain tensor.backward() through an engine at ZeRO stage 0 is still DeepSpeed's error
    assert result["direct_refused"] is True
