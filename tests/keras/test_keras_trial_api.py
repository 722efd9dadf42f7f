"""Clear errors for misuse, keras callbacks at the right times, checkpoints that load back as a Keras model."""
import json
import pathlib
import subprocess
import sys
from typing import Any, List

import numpy as np
import pytest
import tensorflow as tf

from determined import errors
from determined.experimental import Checkpoint
from determined.keras import SequenceAdapter
from tests.keras import _keras_trials as trials

REPO = pathlib.Path(__file__).resolve().parents[2]


class UnwrappedTrial(trials.ArrayTrial):
    def build_model(self) -> tf.keras.Model:
        model = tf.keras.Sequential([tf.keras.layers.Input(shape=(4,)), tf.keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
        return model


class UncompiledTrial(trials.ArrayTrial):
    def build_model(self) -> tf.keras.Model:
        return self.context.wrap_model(tf.keras.Sequential([tf.keras.layers.Input(shape=(4,)), tf.keras.layers.Dense(1)]))


class ListLoaderTrial(trials.ArrayTrial):
    def build_training_data_loader(self) -> Any:
        return list(zip(*trials.make_data(0)))


class GeneratorLoaderTrial(trials.ArrayTrial):
    def build_training_data_loader(self) -> Any:
        return (batch for batch in [trials.make_data(0)])


class InfiniteValidationTrial(trials.DatasetTrial):
    def build_validation_data_loader(self) -> Any:
        return self._dataset(1, 32).repeat()


class BadBatchTrial(trials.SequenceTrial):
    def build_training_data_loader(self) -> Any:
        class FourItems(tf.keras.utils.Sequence):
            def __len__(self) -> int:
                return 2

            def __getitem__(self, i: int) -> Any:
                x, y = trials.make_data(0)
                return x[:8], y[:8], y[:8], y[:8]

        return FourItems()


@pytest.mark.parametrize(
    "trial_class, message",
    [
        (UnwrappedTrial, "was not wrapped: create it, then `model = self.context.wrap_model(model)`"),
        (UncompiledTrial, "is not compiled: call model.compile(optimizer=..., loss=..."),
        (ListLoaderTrial, "returned list, which is not a supported loader: return a tuple (x, y)"),
        (GeneratorLoaderTrial, "returned generator, which is not a supported loader"),
        (InfiniteValidationTrial, "returned an infinite tf.data.Dataset"),
        (BadBatchTrial, "a tuple of 4 items; every batch must be a tuple (inputs, targets) or (inputs, targets, s"),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else "",
)
def test_clear_errors(trial_class: type, message: str, tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.InvalidTrialError) as info:
        trials.run_trial(trial_class, tmp_path, [4])
    assert message in str(info.value)


def test_a_tfkerastrial_needs_global_batch_size(tmp_path: pathlib.Path) -> None:
    # The config no longer requires it (Determined 0.38 does not); the Trial API that batches with it does.
    config = trials.make_config(hyperparameters={"learning_rate": 0.05})
    with pytest.raises(errors.InvalidTrialError) as info:
        trials.run_trial(trials.ArrayTrial, tmp_path, [4], config=config)
    assert str(info.value).startswith("hyperparameters.global_batch_size: missing; a TFKerasTrial (ArrayTrial) "
                                      "batches its data with it: add it under hyperparameters, e.g.")


def test_sequence_adapter_arguments() -> None:
    with pytest.raises(errors.InvalidTrialError, match="turn it into a tf.keras.utils.Sequence"):
        SequenceAdapter(x for x in range(3))
    with pytest.raises(errors.InvalidTrialError, match="workers must be an int >= 0"):
        SequenceAdapter(trials.ShuffledSequence(*trials.make_data(0), 8), workers=-1)
    adapter = SequenceAdapter(trials.ShuffledSequence(*trials.make_data(0), 8))
    assert (adapter.use_multiprocessing, adapter.workers, adapter.max_queue_size) == (False, 1, 10)


class Recorder(tf.keras.callbacks.Callback):
    def __init__(self, stop_at: int = 0) -> None:
        super().__init__()
        self.events: List[str] = []
        self.stop_at = stop_at
        self.batches = 0

    def on_train_begin(self, logs: Any = None) -> None:
        self.events.append("train_begin")

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self.events.append(f"epoch_begin {epoch}")

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        self.events.append(f"epoch_end {epoch} {sorted(logs)}")

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self.batches += 1
        if self.stop_at and self.batches == self.stop_at:
            self.model.stop_training = True

    def on_test_begin(self, logs: Any = None) -> None:
        self.events.append("test_begin")

    def on_train_end(self, logs: Any = None) -> None:
        self.events.append("train_end")
        RECORDED.append(self)


RECORDED: List[Recorder] = []


class CallbackTrial(trials.ArrayTrial):
    stop_at = 0

    def keras_callbacks(self) -> List[tf.keras.callbacks.Callback]:
        return [Recorder(self.stop_at)]


class StoppingTrial(CallbackTrial):
    stop_at = 5


def test_keras_callbacks_run_at_the_right_times(tmp_path: pathlib.Path) -> None:
    RECORDED.clear()
    config = trials.make_config(length=16, min_validation_period={"batches": 8})
    trials.run_trial(CallbackTrial, tmp_path, [16], config)
    [recorder] = RECORDED
    assert recorder.batches == 16
    assert recorder.events == [
        "train_begin",
        "epoch_begin 0", "epoch_end 0 ['accuracy', 'loss']", "test_begin",
        "epoch_begin 1", "epoch_end 1 ['accuracy', 'loss', 'val_accuracy', 'val_loss']", "test_begin",
        "train_end",
    ]


def test_stop_training_from_a_callback_stops_the_trial_early(tmp_path: pathlib.Path) -> None:
    ctx = trials.run_trial(StoppingTrial, tmp_path, [16])
    assert ctx.train.early_exit_reason == "USER_REQUESTED_STOP"
    assert [c["steps_completed"] for c in ctx.checkpoint.reported] == [5]
    assert ctx.searcher.completed_operations == []


def test_checkpoint_loads_as_the_trained_keras_model(tmp_path: pathlib.Path) -> None:
    RECORDED.clear()
    ctx = trials.run_trial(CallbackTrial, tmp_path, [16])
    [recorder] = RECORDED
    x = trials.make_data(7, 10)[0]
    trained = recorder.model.predict(x, verbose=0)
    uuid = ctx.checkpoint.reported[-1]["uuid"]
    files = set(ctx.checkpoint.reported[-1]["resources"])
    assert {"determined-keras-model-weights.index", "rng_state.pkl", "load_data.json"} <= files
    load_data = json.loads((tmp_path / uuid / "load_data.json").read_text())
    assert load_data["trial_cls_spec"].endswith("test_keras_trial_api:CallbackTrial")
    model = Checkpoint.load_from_path(str(tmp_path / uuid))
    assert isinstance(model, tf.keras.Model) and model is not recorder.model
    np.testing.assert_array_equal(model.predict(x, verbose=0), trained)
    assert model.optimizer.iterations.numpy() == 16


EAGER_OFF_TRIAL = """
import sys
sys.path.insert(0, {repo!r})
import determined as det
from determined.tensorflow import _tf1_compat

_tf1_compat.install_when_imported()  # as the harness does before it imports a trial's code
assert "tensorflow" not in sys.modules
import tensorflow as tf
from tensorflow.python.keras.utils.data_utils import Sequence
assert Sequence is tf.keras.utils.Sequence, "the TF 1.x shims are installed once TensorFlow is imported"
assert callable(det.experimental.keras.init) and callable(det.experimental.estimator.init)

from tests.keras import _keras_trials as trials

class GraphTrial(trials.ArrayTrial):
    def __init__(self, context):
        tf.compat.v1.disable_eager_execution()
        super().__init__(context)

    def build_model(self):
        assert not tf.executing_eagerly()
        model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="tanh", input_shape=(4,)),
                                     tf.keras.layers.Dense(1, activation="sigmoid")])
        model = self.context.wrap_model(model)
        optimizer = tf.keras.optimizers.Adam(0.05)  # Keras 2.15's cannot train in graph mode: the legacy one
        assert isinstance(optimizer, tf.keras.optimizers.legacy.Adam)
        model.compile(optimizer=optimizer, loss="binary_crossentropy", metrics=["accuracy"])
        return model

class GraphDatasetTrial(GraphTrial):
    def _dataset(self, seed, n):
        x, y = trials.make_data(seed, n)
        return self.context.wrap_dataset(tf.data.Dataset.from_tensor_slices((x, y))).batch(8)

    def build_training_data_loader(self):
        return self._dataset(0, trials.RECORDS)

    def build_validation_data_loader(self):
        return self._dataset(1, 32)

for trial in (GraphTrial, GraphDatasetTrial):
    ctx = trials.run_trial(trial, __import__("pathlib").Path({ckpt!r}) / trial.__name__, [40])
    h = ctx.train.training_history
    v = ctx.train.validation_history[-1]["metrics"]
    print("LOSSES", h[0]["metrics"]["loss"], h[-1]["metrics"]["loss"], len(ctx.checkpoint.reported), v["val_accuracy"])
"""


def test_eager_execution_can_be_disabled_in_init(tmp_path: pathlib.Path) -> None:
    """Arrays and a tf.data.Dataset (read through the Keras session) train in graph mode; in a process of its own,
    which also checks the TF 1.x shims of a trial process and `det.experimental.keras` after `import determined`."""
    code = EAGER_OFF_TRIAL.format(repo=str(REPO), ckpt=str(tmp_path / "ckpt"))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln.split()[1:] for ln in proc.stdout.splitlines() if ln.startswith("LOSSES")]
    assert len(lines) == 2, proc.stdout
    for first, last, checkpoints, accuracy in lines:
        assert float(last) < float(first) * 0.8 and checkpoints == "1" and float(accuracy) > 0.7
