"""det.transformers.DetCallback (Determined 0.38) with a real transformers.Trainer run as an experiment's
entrypoint on an embedded master: a tiny BERT built from a config (never from a hub) reports training and
validation with batches/epochs, uploads each checkpoint the Trainer saves (with user_data), pauses through
should_training_stop and resumes from the downloaded checkpoint. Skipped without the `transformers` extra."""
import json
import os
import pathlib
import subprocess
import sys
import types
from typing import Any, Dict, Iterator, Tuple

import pytest

pytest.importorskip("transformers", reason="needs the transformers extra: pip install 'determined-revived[transformers]'")
pytest.importorskip("accelerate", reason="transformers.Trainer needs accelerate (the transformers extra installs it)")

from determined import master  # noqa: E402
from determined.common.api import Session  # noqa: E402
from determined.master.rm import Slots  # noqa: E402
from tests.master._helpers import model_def, wait_for  # noqa: E402

pytestmark = pytest.mark.slow

WAIT = (pathlib.Path(__file__).parents[1] / "_wait_for_pause.py").read_text()
SCRIPT = pathlib.Path(__file__).with_name("_hf_script.py").read_text()


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[Session, int, pathlib.Path]]:
    tmp = tmp_path_factory.mktemp("hf038")
    with master.start(tmp / "data", slots=Slots(gpus=[], cpu_count=1), preemption_timeout=30) as em:
        s = em.session()
        config = {"searcher": {"name": "single", "metric": "eval_loss"},
                  "hyperparameters": {"learning_rate": 0.003, "wait_dir": str(tmp)},
                  "checkpoint_storage": {"type": "shared_fs", "host_path": str(tmp), "storage_path": "ckpts",
                                         "save_trial_latest": 5},
                  "environment": {"environment_variables": ["HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1"]},
                  "entrypoint": "python3 train.py", "max_restarts": 0}
        body = {"config": config, "model_definition": model_def({"train.py": SCRIPT, "wait_for_pause.py": WAIT})}
        yield s, int(s.post("/experiments", body)["experiment"]["id"]), tmp


def test_searcher_length_checks_and_off_platform_use() -> None:
    """0.38's checks: an integer max_length or a length or ASHA time that is not the Trainer's is an error."""
    import transformers

    from determined.transformers import DetCallback

    args = types.SimpleNamespace(max_steps=100, num_train_epochs=3.0)
    check = DetCallback._check_length
    check(None, {"name": "single", "max_length": {"batches": 100}}, args)
    check(None, {"name": "adaptive_asha", "time_metric": "batches", "max_time": 100}, args)
    check(None, {"name": "adaptive_asha", "time_metric": "eval_seconds", "max_time": 7}, args)
    with pytest.raises(ValueError, match="has no unit"):
        check(None, {"name": "single", "max_length": 100}, args)
    with pytest.raises(ValueError, match=r"\(epochs=3\) is not the Trainer's length --max_steps \(batches=100\)"):
        check(None, {"name": "single", "max_length": {"epochs": 3}}, args)
    with pytest.raises(ValueError, match="--num_train_epochs"):
        check(None, {"name": "async_halving", "time_metric": "epochs", "max_time": 2},
              types.SimpleNamespace(max_steps=-1, num_train_epochs=3.0))
    assert "DET_TRIAL_ID" not in os.environ
    with pytest.raises(RuntimeError, match="runs in a trial"):
        DetCallback(None, transformers.TrainingArguments(output_dir="unused", report_to=[]))  # type: ignore[arg-type]


def test_without_transformers_the_import_names_the_extra() -> None:
    code = "import sys; sys.modules['transformers'] = None; import determined.transformers"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "pip install 'determined-revived[transformers]'" in proc.stderr.splitlines()[-1]


def test_a_trainer_script_reports_checkpoints_pauses_and_resumes(platform: Tuple[Session, int, pathlib.Path]) -> None:
    s, exp_id, tmp = platform
    wait_for(lambda: (tmp / "ready").exists(), 120, "the Trainer to reach step 4")
    s.post(f"/experiments/{exp_id}/pause")
    wait_for(lambda: s.get(f"/experiments/{exp_id}")["experiment"]["state"] == "PAUSED", 60, "the pause")
    s.post(f"/experiments/{exp_id}/activate")
    wait_for(lambda: s.get(f"/experiments/{exp_id}")["experiment"]["state"] in ("COMPLETED", "ERROR", "CANCELED"),
             120, "the experiment to end")
    desc: Dict[str, Any] = s.get(f"/experiments/{exp_id}")
    [trial] = desc["trials"]
    text = "\n".join(m["message"] for m in s.get(f"/trials/{trial['id']}/logs", params={"limit": 10000})["logs"])
    assert trial["state"] == "COMPLETED", text[-4000:]
    t = s.get(f"/trials/{trial['id']}")
    training = {m["steps_completed"]: m["metrics"] for m in t["training_metrics"]}
    assert sorted(training) == [2, 4, 6, 8]
    assert training[2]["batches"] == 2 and training[2]["epochs"] == pytest.approx(0.5) and "loss" in training[2]
    assert not any(k == "epoch" or k.endswith(("_runtime", "_per_second")) for m in training.values() for k in m)
    validation = {m["steps_completed"]: m["metrics"] for m in t["validation_metrics"]}
    assert sorted(validation) == [4, 8] and validation[8]["epochs"] == pytest.approx(2.0)
    assert validation[8]["eval_loss"] < 0.75  # two balanced classes: a model that guesses has ~0.69
    checkpoints = [c for c in t["checkpoints"] if c["state"] == "COMPLETED"]
    assert [c["steps_completed"] for c in checkpoints] == [4, 8]
    assert checkpoints[0]["metadata"]["trial_id"] == trial["id"]
    stored = tmp / "ckpts" / checkpoints[0]["uuid"]
    assert json.loads((stored / "checkpoint-4" / "my_data.json").read_text()) == {"owner": "test"}
    assert not (stored / "checkpoint-8").exists()  # each checkpoint holds its own step only
    # the second run downloaded the step-4 checkpoint and the Trainer resumed from it
    assert "resume_from_checkpoint=None" in text and "hf_output/checkpoint-4" in text
    assert desc["experiment"]["progress"] == 1.0
