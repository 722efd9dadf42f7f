"""The CUDA path of the PyTorch APIs, on a machine with an NVIDIA GPU (every test here is skipped elsewhere).

What each test shows on the GPU: a PyTorchTrial trains on ``cuda:0`` through the embedded master, forked from the
warm torch server, which never initialised CUDA; exact resume in a new process, the CUDA generator included; AMP
through ``wrap_scaler`` (the 0.13-era ``torch.cuda.amp.GradScaler``) and through ``experimental.use_amp()``; the
Trainer API; DistributedDataParallel over an nccl process group (one rank: NCCL refuses two ranks on one GPU).
Run them where a GPU is: ``python -m pytest tests/gpu``.
"""
import json
import os
import pathlib
import subprocess
import sys
import textwrap
from typing import Any, Dict, List

import pytest
import torch
from torch import nn

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS, before CUDA starts

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with CUDA")

PYTORCH_TESTS = pathlib.Path(__file__).resolve().parent.parent / "pytorch"
sys.path.insert(0, str(PYTORCH_TESTS))

import determined.pytorch as det_torch  # noqa: E402
from _pytorch_runs import make_config, run_trial  # noqa: E402
import _trials  # noqa: E402
from test_amp import DTYPES, SCALES, ScalerTrial, UseAmpTrial  # noqa: E402
from test_resume import _assert_identical, _resume_in_new_process  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parent.parent.parent


def _state(ckpt_dir: pathlib.Path, uuid: str) -> Dict[str, Any]:
    return torch.load(ckpt_dir / uuid / "state_dict.pth", weights_only=False, map_location="cpu")


# -- exact resume, with the CUDA generator ---------------------------------------------------------------------------


def test_a_pytorch_trial_on_the_gpu_resumes_exactly_in_a_new_process(tmp_path: pathlib.Path) -> None:
    n = 7  # 20 records in batches of 4: resumes in the middle of a shuffled epoch
    whole_dir, split_dir = tmp_path / "whole", tmp_path / "split"
    whole = run_trial(_trials.DropoutTrial, whole_dir, [n, 2 * n])
    at_n = _state(whole_dir, whole.checkpoint.reported[0]["uuid"])
    at_2n = _state(whole_dir, whole.checkpoint.reported[-1]["uuid"])
    # The trial trained on the GPU, and its dropout drew from the CUDA generator, which the checkpoint holds.
    assert all(t.device.type == "cpu" for t in at_2n["models_state_dict"][0].values())  # loaded with map_location
    saved_on = torch.load(whole_dir / whole.checkpoint.reported[-1]["uuid"] / "state_dict.pth", weights_only=False)
    assert {t.device.type for t in saved_on["models_state_dict"][0].values()} == {"cuda"}
    assert at_2n["rng_state"]["gpu_rng_state"] is not None
    assert not torch.equal(at_n["rng_state"]["gpu_rng_state"], at_2n["rng_state"]["gpu_rng_state"])

    first = run_trial(_trials.DropoutTrial, split_dir, [n])
    uuid = first.checkpoint.reported[-1]["uuid"]
    result = _resume_in_new_process("DropoutTrial", split_dir, 2 * n, uuid, n)
    resumed = _state(split_dir, result["checkpoints"][-1])
    assert resumed["steps_completed"] == 2 * n
    for key in ("models_state_dict", "optimizers_state_dict", "lr_schedulers_state_dict", "rng_state"):
        _assert_identical(at_2n[key], resumed[key], key)
    whole_batches = [b for r in whole.train.training_history for b in r["batch_metrics"]]
    resumed_batches = [b for r in result["training"] for b in r["batch_metrics"]]
    assert resumed_batches == whole_batches[n:]


# -- automatic mixed precision (the trials of tests/pytorch/test_amp.py, on the GPU) -------------------------------------


class CudaScalerTrial(ScalerTrial):
    """Written as for Determined 0.13: torch.cuda.amp's GradScaler, driven by the trial."""

    def make_scaler(self) -> Any:
        return torch.cuda.amp.GradScaler(init_scale=1024.0, growth_interval=3)


def test_amp_through_wrap_scaler_on_the_gpu_trains_in_float16_and_checkpoints_the_scaler(tmp_path: pathlib.Path) -> None:
    DTYPES.clear()
    SCALES.clear()
    first = run_trial(CudaScalerTrial, tmp_path, [12], config=make_config(scheduling_unit=4))
    losses = [r["metrics"]["loss"] for r in first.train.training_history]
    assert losses[-1] < losses[0], losses
    assert set(DTYPES) == {torch.float16}
    uuid = first.checkpoint.reported[-1]["uuid"]
    saved = _state(tmp_path, uuid)["scaler_state_dict"]
    assert saved["scale"] > 1024.0  # it grew every 3 steps without an overflow
    run_trial(CudaScalerTrial, tmp_path, [14], config=make_config(scheduling_unit=4), latest_checkpoint=uuid,
              steps_completed=12)
    assert SCALES == [1024.0, saved["scale"]]


def test_use_amp_on_the_gpu_runs_float16_with_a_cuda_grad_scaler(tmp_path: pathlib.Path) -> None:
    DTYPES.clear()
    context = run_trial(UseAmpTrial, tmp_path, [24], config=make_config(scheduling_unit=8))
    losses = [r["metrics"]["loss"] for r in context.train.training_history]
    assert losses[-1] < losses[0] * 0.8, losses
    assert set(DTYPES) == {torch.float16}
    state = _state(tmp_path, context.checkpoint.reported[-1]["uuid"])
    assert state["scaler_state_dict"]["scale"] > 0  # use_amp's scaler is a real (enabled) one on a GPU


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))


# -- the Trainer API --------------------------------------------------------------------------------------------------

DEVICES: List[str] = []
LOSSES: List[torch.Tensor] = []


class TrainerTrial(det_torch.PyTorchTrial):
    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        self.context = context
        self.model = context.wrap_model(_mlp())
        self.optimizer = context.wrap_optimizer(torch.optim.Adam(self.model.parameters(), lr=0.02))

    def build_training_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(_trials.random_dataset(64), batch_size=8, shuffle=True)

    def build_validation_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(_trials.random_dataset(32, seed=1), batch_size=8)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        x, y = batch
        DEVICES.append(str(next(self.model.parameters()).device))
        loss = nn.functional.cross_entropy(self.model(x), y)
        LOSSES.append(loss.detach())
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        return {"loss": loss}

    def evaluate_batch(self, batch: Any) -> Dict[str, Any]:
        x, y = batch
        return {"val_loss": nn.functional.cross_entropy(self.model(x), y)}


def test_the_trainer_api_fits_on_the_gpu(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    DEVICES.clear()
    LOSSES.clear()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DET_DATA_DIR", str(tmp_path))
    with det_torch.init(hparams={"global_batch_size": 8}, enable_tensorboard_logging=False) as context:
        assert context.device == torch.device("cuda", 0)
        trainer = det_torch.Trainer(TrainerTrial(context), context)
        trainer.fit(max_length=det_torch.Batch(40), reporting_period=det_torch.Batch(10),
                    validation_period=det_torch.Batch(20), checkpoint_period=det_torch.Batch(40))
    assert set(DEVICES) == {"cuda:0"} and len(DEVICES) == 40
    losses = [float(t) for t in LOSSES]
    assert sum(losses[-10:]) < sum(losses[:10]), losses
    assert list(tmp_path.rglob("state_dict.pth")), "the Trainer wrote no checkpoint"


# -- DistributedDataParallel over nccl -------------------------------------------------------------------------------

NCCL_WORKER = textwrap.dedent('''
    import socket, sys
    import torch
    import torch.distributed as dist
    from torch import nn
    from determined.pytorch import _distributed

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    assert _distributed.backend_for(device) == "nccl"
    torch.manual_seed(0)
    plain = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
    wrapped = _distributed.wrap_ddp(nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1)).to(device), device)
    wrapped.module.load_state_dict(plain.state_dict())
    x = torch.randn(32, 4, device=device)
    y = x.sum(dim=1, keepdim=True)
    for sync in (False, True):  # accumulate without the all-reduce, then with it
        with _distributed.gradient_sync([wrapped], sync):
            nn.functional.mse_loss(wrapped(x), y).backward()
        nn.functional.mse_loss(plain(x), y).backward()
    for a, b in zip(plain.parameters(), wrapped.module.parameters()):
        assert torch.allclose(a.grad, b.grad, rtol=1e-5, atol=1e-6), (a.grad, b.grad)
    t = torch.ones(3, device=device)
    dist.all_reduce(t)
    assert t.tolist() == [1.0, 1.0, 1.0]
    dist.destroy_process_group()
    print("NCCL OK", torch.cuda.nccl.version())
''')


def test_ddp_wrapping_trains_over_an_nccl_process_group(tmp_path: pathlib.Path) -> None:
    script = tmp_path / "nccl_worker.py"
    script.write_text(NCCL_WORKER)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                         cwd=str(REPO), env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0 and "NCCL OK" in out.stdout, (out.stdout + out.stderr)[-3000:]


# -- through the master: the warm worker never initialised CUDA -------------------------------------------------------

GPU_MODEL = '''
import json
import sys

WARM = "torch" in sys.modules  # the fork server imported it before the fork
import torch

CUDA_BEFORE = torch.cuda.is_initialized()  # what the fork server left: must be False

import os
from torch import nn
from determined import pytorch


def data(records, seed):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(records, 8, generator=generator)
    return torch.utils.data.TensorDataset(x, (x.sum(dim=1) > 0).long())


class GpuTrial(pytorch.PyTorchTrial):
    def __init__(self, context):
        self.context = context
        self.model = context.wrap_model(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2)))
        self.optimizer = context.wrap_optimizer(torch.optim.Adam(self.model.parameters(), lr=0.01))
        print("gpu-probe " + json.dumps({
            "warm": WARM, "cuda_before": CUDA_BEFORE, "device": str(context.device),
            "param_device": str(next(self.model.parameters()).device),
            "visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "pid": os.getpid(), "ppid": os.getppid(),
        }), flush=True)

    def build_training_data_loader(self):
        return pytorch.DataLoader(data(256, 0), batch_size=self.context.get_per_slot_batch_size(), shuffle=True)

    def build_validation_data_loader(self):
        return pytorch.DataLoader(data(64, 1), batch_size=32)

    def train_batch(self, batch, epoch_idx, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        return {"loss": loss}

    def evaluate_batch(self, batch):
        x, y = batch
        logits = self.model(x)
        return {"val_loss": nn.functional.cross_entropy(logits, y), "accuracy": (logits.argmax(1) == y).float().mean()}
'''


def test_trials_through_the_master_train_on_the_gpu_forked_from_a_server_without_cuda(tmp_path: pathlib.Path) -> None:
    from determined import master
    from determined.master.rm import Slots
    from tests.e2e._helpers import wait_for
    from tests.master._helpers import model_def

    config = {
        "entrypoint": "model_def:GpuTrial",
        # Two trials of a grid, one after the other on the one GPU: each is forked from the same server.
        "hyperparameters": {"global_batch_size": 16, "variant": {"type": "categorical", "vals": [0, 1]}},
        "searcher": {"name": "grid", "metric": "val_loss", "max_length": {"batches": 60}},
        "min_validation_period": {"batches": 20},
        "max_restarts": 0,
    }
    with master.start(tmp_path / "data", slots=Slots(gpus=["0"], cpu_count=1)) as em:
        s = em.session()
        exp_id = s.post("/experiments", {"config": config,
                                         "model_definition": model_def({"model_def.py": GPU_MODEL})})["experiment"]["id"]
        wait_for(lambda: s.get(f"/experiments/{exp_id}")["experiment"]["state"] in ("COMPLETED", "ERROR", "CANCELED"),
                 timeout=300, what="the experiment to end")
        described = s.get(f"/experiments/{exp_id}")
        trials = described["trials"]
        logs = {t["id"]: "\n".join(l["message"] for l in s.get(f"/trials/{t['id']}/logs")["logs"]) for t in trials}
        assert described["experiment"]["state"] == "COMPLETED", "\n".join(logs.values())[-4000:]
        assert len(trials) == 2
        for trial in trials:
            log = logs[trial["id"]]
            probes = [json.loads(l.split("gpu-probe ", 1)[1]) for l in log.splitlines() if "gpu-probe " in l]
            assert len(probes) == 1, log[-3000:]
            probe = probes[0]
            assert probe["device"] == "cuda:0" and probe["param_device"] == "cuda:0", probe
            assert probe["visible"] == "0", probe
            assert probe["warm"] is True, probe  # forked from the torch server, which had imported torch
            assert probe["cuda_before"] is False, probe  # ... and had not initialised CUDA
            detail = s.get(f"/trials/{trial['id']}")
            losses = [m["metrics"]["loss"] for m in detail["training_metrics"]]
            assert losses[-1] < losses[0], losses
            assert detail["checkpoints"], detail
