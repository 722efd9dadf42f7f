"""Trial source infos end to end on an embedded master: a Core API script trains and checkpoints a model, the SDK
registers it as a model version, then a torch_batch_process inference reports using that version (through
`TorchBatchProcessorContext.report_task_using_model_version`) and a Core API script reports using its checkpoint
(`core_context.experimental.report_task_using_checkpoint`); the SDK reads their metrics back through the version
and the checkpoint."""
import pathlib
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from determined import master
from determined.common.api import Session
from determined.experimental import client
from determined.master.rm import Slots
from tests.e2e._helpers import wait_for
from tests.master._helpers import model_def

TRAIN = '''
import torch
import determined as det

with det.core.init() as core_context:
    model = torch.nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.fill_(2.0)
        model.bias.fill_(0.5)
    core_context.train.report_validation_metrics(steps_completed=1, metrics={"loss": 0.1})
    with core_context.checkpoint.store_path({"steps_completed": 1}) as (path, uuid):
        torch.save(model.state_dict(), path / "model.pt")
'''

INFER = '''
import pathlib
import tempfile

import torch

import determined as det
from determined.experimental import client
from determined.pytorch import experimental

HP = det.get_cluster_info().trial.hparams


class Infer(experimental.TorchBatchProcessor):
    def __init__(self, context):
        self.context = context
        version = client.Determined().get_model(HP["model"]).get_version(HP["version"])
        context.report_task_using_model_version(version)
        path = pathlib.Path(version.checkpoint.download(str(pathlib.Path(tempfile.mkdtemp()) / "ckpt")))
        self.model = torch.nn.Linear(2, 1)
        self.model.load_state_dict(torch.load(path / "model.pt"))
        context.prepare_model_for_inference(self.model)
        self.total = context.wrap_reducer(sum, name="sum_of_outputs")
        self.seen = 0

    def process_batch(self, batch, batch_idx):
        (x,) = batch
        with torch.no_grad():
            y = self.model(self.context.to_device(x))
        self.total.update(float(y.sum()))
        self.seen += len(x)
        self.context.report_metrics("inference", steps_completed=batch_idx + 1, metrics={"seen": self.seen})


if __name__ == "__main__":
    data = torch.utils.data.TensorDataset(torch.ones(6, 2))
    experimental.torch_batch_process(Infer, data, batch_size=2, checkpoint_interval=10)
'''

USE_CHECKPOINT = '''
import determined as det
from determined.experimental import client

with det.core.init() as core_context:
    checkpoint = client.Determined().get_checkpoint(det.get_cluster_info().trial.hparams["uuid"])
    core_context.experimental.report_task_using_checkpoint(checkpoint)
    core_context.train.report_validation_metrics(steps_completed=1, metrics={"score": 1.5})
'''

TERMINAL = ("COMPLETED", "CANCELED", "ERROR")


def _run(session: Session, script: str, entrypoint: str, hparams: Dict[str, Any], storage: pathlib.Path) -> int:
    config = {"entrypoint": entrypoint, "max_restarts": 0, "hyperparameters": hparams,
              "searcher": {"name": "single", "metric": "loss"},
              "checkpoint_storage": {"type": "shared_fs", "host_path": str(storage)}}
    answer = session.post("/experiments", {"config": config, "model_definition": model_def({"script.py": script})})
    return int(answer["experiment"]["id"])


def _completed(session: Session, exp_id: int) -> int:
    def state() -> str:
        return str(session.get(f"/experiments/{exp_id}")["experiment"]["state"])

    wait_for(lambda: state() in TERMINAL, 240, 0.2, what=f"experiment {exp_id} to end")
    desc = session.get(f"/experiments/{exp_id}")
    (trial,) = desc["trials"]
    logs = "\n".join(e["message"] for e in session.get(f"/trials/{trial['id']}/logs", {"limit": 10000})["logs"])
    assert desc["experiment"]["state"] == "COMPLETED", logs[-3000:]
    return int(trial["id"])


def _shown(metrics: Any) -> List[Tuple[int, str, int, Dict[str, Any]]]:
    return [(m.trial_id, m.group, m.steps_completed, m.metrics) for m in metrics]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    root = tmp_path_factory.mktemp("sources")
    embedded = master.start(root / "data", slots=Slots(gpus=[], cpu_count=2))
    try:
        session = embedded.session()
        trainer = _completed(session, _run(session, TRAIN, "python3 script.py", {}, root / "ckpts"))
        d = client.Determined(master=embedded.url, user="determined", password="")
        (checkpoint,) = d.get_trial(trainer).list_checkpoints()
        version = d.create_model("linear").register_version(checkpoint.uuid)
        inference = _run(session, INFER, "python3 script.py", {"model": "linear", "version": 1}, root / "ckpts")
        reader = _run(session, USE_CHECKPOINT, "python3 script.py", {"uuid": checkpoint.uuid}, root / "ckpts")
        yield {"d": d, "trainer": trainer, "checkpoint": checkpoint, "version": version,
               "inference": _completed(session, inference), "reader": _completed(session, reader)}
    finally:
        embedded.stop(timeout=10)


@pytest.mark.slow
def test_the_version_and_the_checkpoint_read_the_metrics_of_the_trials_that_used_them(runs: Dict[str, Any]) -> None:
    d, inference, reader = runs["d"], runs["inference"], runs["reader"]
    version = d.get_model("linear").get_version(1)
    own = [m for g in ("training", "validation", "inference") for m in d.get_trial(inference).iter_metrics(g)]
    assert _shown(own) == [(inference, "validation", 3, {"sum_of_outputs": 27.0}),
                           (inference, "inference", 1, {"seen": 2}), (inference, "inference", 2, {"seen": 4}),
                           (inference, "inference", 3, {"seen": 6})]
    got = list(version.get_metrics())
    assert _shown(got) == _shown(own), "exactly the inference trial's metrics"
    assert isinstance(got[0], client.ValidationMetrics) and isinstance(got[1], client.TrialMetrics)
    assert _shown(version.iter_metrics("inference")) == _shown(own[1:])

    checkpoint = d.get_checkpoint(runs["checkpoint"].uuid)
    assert _shown(checkpoint.get_metrics()) == _shown(own) + [(reader, "validation", 1, {"score": 1.5})]
    assert _shown(checkpoint.get_metrics("validation")) == [(inference, "validation", 3, {"sum_of_outputs": 27.0}),
                                                           (reader, "validation", 1, {"score": 1.5})]
    assert runs["trainer"] not in {m.trial_id for m in checkpoint.get_metrics()}, \
        "the trial that wrote the checkpoint did not report using it"
