"""Small TFKerasTrials, one per kind of data loader, on a tiny linearly separable problem."""
import pathlib
from typing import Any, Dict, List, Optional, Type

import numpy as np
import tensorflow as tf

from determined import _execution, config as det_config, core
from determined.keras import SequenceAdapter, TFKerasTrial

RECORDS = 64
FEATURES = 4


def make_data(seed: int = 0, n: int = RECORDS) -> "tuple[np.ndarray, np.ndarray]":
    rng = np.random.RandomState(seed)
    x = rng.normal(size=(n, FEATURES)).astype("float32")
    y = (x @ np.array([1.0, -2.0, 0.5, 1.5]) > 0).astype("float32").reshape(-1, 1)
    return x, y


def build_model(context: Any, inputs: str = "single") -> tf.keras.Model:
    if inputs == "single":
        model = tf.keras.Sequential([
            tf.keras.layers.Input(shape=(FEATURES,)),
            tf.keras.layers.Dense(8, activation="tanh"),
            tf.keras.layers.Dense(1, activation="sigmoid"),
        ])
    else:
        a = tf.keras.layers.Input(shape=(2,), name="a")
        b = tf.keras.layers.Input(shape=(2,), name="b")
        hidden = tf.keras.layers.Dense(8, activation="tanh")(tf.keras.layers.Concatenate()([a, b]))
        model = tf.keras.Model(inputs=[a, b], outputs=tf.keras.layers.Dense(1, activation="sigmoid")(hidden))
    model = context.wrap_model(model)
    model.compile(
        optimizer=tf.keras.optimizers.Adam(learning_rate=context.get_hparam("learning_rate")),
        loss="binary_crossentropy",
        metrics=["accuracy"],
    )
    return model


class ArrayTrial(TFKerasTrial):
    """(x, y) numpy arrays."""

    def build_model(self) -> tf.keras.Model:
        return build_model(self.context)

    def build_training_data_loader(self) -> Any:
        return make_data(0)

    def build_validation_data_loader(self) -> Any:
        return make_data(1, 32)


class SampleWeightTrial(ArrayTrial):
    """(x, y, sample_weights): records of weight 0 do not count."""

    def build_training_data_loader(self) -> Any:
        x, y = make_data(0)
        return x, y, np.where(np.arange(len(x)) % 2 == 0, 1.0, 0.5).astype("float32")


class DictInputTrial(ArrayTrial):
    """A model with two named inputs, fed a dict of arrays."""

    def build_model(self) -> tf.keras.Model:
        return build_model(self.context, inputs="two")

    def build_training_data_loader(self) -> Any:
        x, y = make_data(0)
        return {"a": x[:, :2], "b": x[:, 2:]}, y

    def build_validation_data_loader(self) -> Any:
        x, y = make_data(1, 32)
        return {"a": x[:, :2], "b": x[:, 2:]}, y


class ListInputTrial(DictInputTrial):
    """A model with two inputs, fed a list of arrays."""

    def build_training_data_loader(self) -> Any:
        x, y = make_data(0)
        return [x[:, :2], x[:, 2:]], y


class DatasetTrial(ArrayTrial):
    """tf.data.Dataset, wrapped with context.wrap_dataset."""

    def _dataset(self, seed: int, n: int) -> tf.data.Dataset:
        x, y = make_data(seed, n)
        ds = self.context.wrap_dataset(tf.data.Dataset.from_tensor_slices((x, y)))
        return ds.batch(self.context.get_per_slot_batch_size())

    def build_training_data_loader(self) -> Any:
        return self._dataset(0, RECORDS).shuffle(8, seed=1)

    def build_validation_data_loader(self) -> Any:
        return self._dataset(1, 32)


class ShuffledSequence(tf.keras.utils.Sequence):
    """A Sequence that reshuffles its records at each epoch end with its own seeded RNG."""

    def __init__(self, x: np.ndarray, y: np.ndarray, batch_size: int, seed: int = 5) -> None:
        super().__init__()
        self.x, self.y, self.batch_size = x, y, batch_size
        self.rng = np.random.RandomState(seed)
        self.order = np.arange(len(x))
        self.epoch_ends = 0

    def __len__(self) -> int:
        return (len(self.x) + self.batch_size - 1) // self.batch_size

    def __getitem__(self, index: int) -> Any:
        rows = self.order[index * self.batch_size:(index + 1) * self.batch_size]
        return self.x[rows], self.y[rows]

    def on_epoch_end(self) -> None:
        self.epoch_ends += 1
        self.rng.shuffle(self.order)


class SequenceTrial(ArrayTrial):
    """A tf.keras.utils.Sequence."""

    def build_training_data_loader(self) -> Any:
        return ShuffledSequence(*make_data(0), self.context.get_per_slot_batch_size())

    def build_validation_data_loader(self) -> Any:
        return ShuffledSequence(*make_data(1, 32), 16)


class AdapterThreadsTrial(SequenceTrial):
    """A SequenceAdapter reading ahead with two threads."""

    def build_training_data_loader(self) -> Any:
        return SequenceAdapter(super().build_training_data_loader(), workers=2, use_multiprocessing=False)


class AdapterProcessesTrial(SequenceTrial):
    """A SequenceAdapter reading ahead with one background process."""

    def build_training_data_loader(self) -> Any:
        return SequenceAdapter(super().build_training_data_loader(), workers=1, use_multiprocessing=True)

    def build_validation_data_loader(self) -> Any:
        return SequenceAdapter(super().build_validation_data_loader(), workers=0)


class AdapterMainThreadTrial(SequenceTrial):
    """A SequenceAdapter with workers=0: read in the main thread."""

    def build_training_data_loader(self) -> Any:
        return SequenceAdapter(super().build_training_data_loader(), workers=0)


LOADER_TRIALS: List[Type[TFKerasTrial]] = [
    ArrayTrial, SampleWeightTrial, DictInputTrial, ListInputTrial, DatasetTrial, SequenceTrial,
    AdapterThreadsTrial, AdapterProcessesTrial, AdapterMainThreadTrial,
]


def make_config(length: int = 40, **overrides: Any) -> Dict[str, Any]:
    raw: Dict[str, Any] = {
        "entrypoint": "tests.keras._keras_trials:ArrayTrial",
        "hyperparameters": {"global_batch_size": 8, "learning_rate": 0.05},
        "searcher": {"name": "single", "metric": "val_loss", "max_length": {"batches": length}},
        "scheduling_unit": 10,
    }
    raw.update(overrides)
    return det_config.load_experiment_config(raw)


def run_trial(
    trial_class: Type[Any],
    ckpt_dir: pathlib.Path,
    lengths: List[int],
    config: Optional[Dict[str, Any]] = None,
    seed: int = 3,
    latest_checkpoint: Optional[str] = None,
    steps_completed: int = 0,
) -> core.Context:
    """Run the trial with a local core context (as the harness would); returns the closed context."""
    config = config or make_config()
    hparams = {k: v["val"] for k, v in config["hyperparameters"].items()}
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    with core._make_local_context(
        str(ckpt_dir), lengths, config, hparams, seed,
        latest_checkpoint=latest_checkpoint, steps_completed=steps_completed,
    ) as context:
        _execution.run_trial(trial_class, context)
    return context
