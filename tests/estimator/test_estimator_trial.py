"""EstimatorTrial driven in-process by its controller with a local core context (no master)."""
import enum
import json
import pathlib
from typing import Any, Dict, List, Optional, Type

import numpy as np
import pytest
import tensorflow as tf

import _estimator_trials
from determined import _execution, core, errors
from determined.experimental import Checkpoint

HPARAMS = {"global_batch_size": 8, "learning_rate": 0.05}


def run(
    trial_class: Type[Any],
    ckpt_dir: pathlib.Path,
    lengths: List[int],
    latest: Optional[Dict[str, Any]] = None,
    **config: Any,
) -> core.Context:
    cfg = _estimator_trials.config(**config)
    kwargs = {"latest_checkpoint": latest["uuid"], "steps_completed": latest["steps_completed"]} if latest else {}
    with core._make_local_context(str(ckpt_dir), lengths, cfg, dict(HPARAMS), 7, **kwargs) as context:
        _execution.run_trial(trial_class, context)
    return context


def losses(context: core.Context) -> List[float]:
    return [r["metrics"]["loss"] for r in context.train.training_history]


def test_premade_estimator_trains_exports_and_loads(tmp_path: pathlib.Path) -> None:
    context = run(_estimator_trials.PremadeTrial, tmp_path, [20, 40])
    assert [r["steps_completed"] for r in context.train.training_history] == [10, 20, 30, 40]
    first, *_, last = losses(context)
    assert last < first / 2, losses(context)
    validation = context.train.validation_history
    assert [v["steps_completed"] for v in validation] == [20, 40]
    assert validation[-1]["metrics"]["accuracy"] >= 0.8
    assert [op["length"] for op in context.searcher.completed_operations] == [20, 40]

    reported = context.checkpoint.reported[-1]
    assert reported["steps_completed"] == 40
    assert reported["framework"] == f"tensorflow-{tf.__version__}" and reported["format"] == "saved_model"
    ckpt = tmp_path / reported["uuid"]
    assert (ckpt / "raw" / "saved_model.pb").is_file()
    assert tf.train.latest_checkpoint(str(ckpt)).endswith("model.ckpt-40")
    # The seed's RunHook example wrote its file into every checkpoint.
    for r in context.checkpoint.reported:
        assert (tmp_path / r["uuid"] / "metadata.txt").read_text() == "my_metadata"
        assert "metadata.txt" in r["resources"]

    model = Checkpoint.load_from_path(str(ckpt), tags=["serve"])
    features, labels = _estimator_trials.blobs(_estimator_trials.N_VAL, 2)
    outputs = model.signatures["predict"](x=tf.constant(features))
    accuracy = float(np.mean(outputs["class_ids"].numpy().reshape(-1) == labels))
    assert accuracy == pytest.approx(validation[-1]["metrics"]["accuracy"], abs=1e-6)


def test_custom_estimator_and_metric_reducers(tmp_path: pathlib.Path) -> None:
    context = run(_estimator_trials.CustomTrial, tmp_path, [30])
    first, *_, last = losses(context)
    assert last < first, losses(context)
    metrics = context.train.validation_history[-1]["metrics"]
    _, labels = _estimator_trials.blobs(_estimator_trials.N_VAL, 2)
    # 30 records in batches of 8: the last batch holds 6, and every record counts exactly once.
    assert metrics["mean_label"] == pytest.approx(float(np.mean(labels)), rel=1e-12)
    assert metrics["batch_sizes"] == 30.0
    assert metrics["accuracy"] > 0.6

    # EvalSpec(steps=2) evaluates two batches only.
    class TwoSteps(_estimator_trials.CustomTrial):
        def build_validation_spec(self) -> tf.estimator.EvalSpec:
            return tf.estimator.EvalSpec(self._input_fn(False), steps=2)

    two = run(TwoSteps, tmp_path / "two", [5])
    assert two.train.validation_history[-1]["metrics"]["batch_sizes"] == 16.0
    assert two.train.validation_history[-1]["metrics"]["mean_label"] == pytest.approx(float(np.mean(labels[:16])))


def _variables(ckpt: pathlib.Path) -> Dict[str, np.ndarray]:
    reader = tf.train.load_checkpoint(str(ckpt))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def test_resume_continues_at_the_global_step_of_the_checkpoint(tmp_path: pathlib.Path) -> None:
    straight = run(_estimator_trials.CustomTrial, tmp_path / "straight", [20, 30])
    first = run(_estimator_trials.CustomTrial, tmp_path / "resumed", [20])
    saved = first.checkpoint.reported[-1]
    assert saved["steps_completed"] == 20
    # The hook's callbacks: no checkpoint loaded on the first run, closed once.
    resumed = run(_estimator_trials.CustomTrial, tmp_path / "resumed", [30], latest=saved)
    assert [r["steps_completed"] for r in resumed.train.training_history] == [30]
    end = resumed.checkpoint.reported[-1]
    assert end["steps_completed"] == 30
    a = _variables(tmp_path / "straight" / straight.checkpoint.reported[-1]["uuid"])
    b = _variables(tmp_path / "resumed" / end["uuid"])
    assert int(b["global_step"]) == 30
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_allclose(a[name], b[name], rtol=1e-5, atol=1e-6, err_msg=name)
    assert resumed.train.validation_history[-1]["metrics"] == pytest.approx(
        straight.train.validation_history[-1]["metrics"], rel=1e-5
    )


def test_run_hook_callbacks(tmp_path: pathlib.Path) -> None:
    hooks = []

    class Recording(_estimator_trials.CustomTrial):
        def __init__(self, context: Any) -> None:
            super().__init__(context)
            hooks.append(self.hook)

    first = run(Recording, tmp_path, [5])
    run(Recording, tmp_path, [10], latest=first.checkpoint.reported[-1])
    assert [(h.loaded, h.closed) for h in hooks] == [([], 1), (["my_metadata"], 1)]


def test_dataset_cache(tmp_path: pathlib.Path, det_data_dir: pathlib.Path) -> None:
    context = run(_estimator_trials.CachedTrial, tmp_path, [10])
    assert context.train.validation_history[-1]["metrics"]["batch_sizes"] == 30.0
    cache = det_data_dir / "dataset_cache" / "blobs" / "v1"
    assert (cache / "train").is_dir() and (cache / "validation").is_dir()
    again = run(_estimator_trials.CachedTrial, tmp_path / "again", [10])
    assert again.train.validation_history[-1]["metrics"] == context.train.validation_history[-1]["metrics"]


def test_input_fn_must_return_a_dataset(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.InvalidTrialError, match="only an input_fn that returns a tf.data.Dataset"):
        run(_estimator_trials.TupleInputTrial, tmp_path, [5])


def test_build_methods_are_checked(tmp_path: pathlib.Path) -> None:
    class NoEstimator(_estimator_trials.CustomTrial):
        def build_estimator(self) -> Any:
            return "estimator"

    with pytest.raises(errors.InvalidTrialError, match="build_estimator\\(\\) must return a tf.estimator.Estimator"):
        run(NoEstimator, tmp_path, [5])


def test_load_data_names_the_exports(tmp_path: pathlib.Path) -> None:
    context = run(_estimator_trials.CustomTrial, tmp_path, [3])
    data = json.loads((tmp_path / context.checkpoint.reported[-1]["uuid"] / "load_data.json").read_text())
    assert data["format"] == "saved_model" and data["serving_input_receiver_fns"] == ["raw"]


def test_preemption_checkpoints_and_stops(tmp_path: pathlib.Path) -> None:
    class PreemptAfter7(tf.estimator.SessionRunHook):
        def __init__(self, context: Any) -> None:
            self.context, self.runs = context, 0

        def before_run(self, run_context: Any) -> None:
            self.runs += 1
            if self.runs == 7:
                self.context.core.preempt._preempted = True  # what a pause on the master does

    class Preempted(_estimator_trials.CustomTrial):
        def build_train_spec(self) -> tf.estimator.TrainSpec:
            return tf.estimator.TrainSpec(self._input_fn(True), hooks=[self.hook, PreemptAfter7(self.context)])

    context = run(Preempted, tmp_path, [20])
    assert [c["steps_completed"] for c in context.checkpoint.reported] == [7]
    assert context.searcher.completed_operations == []
    assert context.train.training_history[-1]["steps_completed"] == 7
    resumed = run(_estimator_trials.CustomTrial, tmp_path, [20], latest=context.checkpoint.reported[-1])
    end = resumed.checkpoint.reported[-1]
    assert end["steps_completed"] == 20
    assert int(_variables(tmp_path / end["uuid"])["global_step"]) == 20


def test_native_modes() -> None:
    from determined.experimental.estimator import Mode, _resolve_mode

    assert _resolve_mode(Mode.CLUSTER, None, False) == (False, False)
    assert _resolve_mode(Mode.LOCAL, None, False) == (True, True)
    assert _resolve_mode("cluster", True, True) == (True, True)
    assert _resolve_mode(True, None, True) == (True, True)

    class OtherMode(enum.Enum):  # e.g. determined.experimental.keras.Mode
        LOCAL = "local"

    assert _resolve_mode(OtherMode.LOCAL, None, False) == (True, True)
    with pytest.raises(errors.DeterminedError, match="Mode.CLUSTER or Mode.LOCAL"):
        _resolve_mode("remote", None, False)
