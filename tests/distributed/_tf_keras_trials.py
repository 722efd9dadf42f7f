"""tf.keras trials for the distributed tests (importable by the worker processes: this dir goes on sys.path)."""
import time
from typing import Any, List

import numpy as np
import tensorflow as tf

import determined.keras as det_keras

TRAIN_RECORDS = 64
VALIDATION_RECORDS = 41  # per-slot batches of 4: 11 batches, 6 on rank 0 and 5 on rank 1, the last of 1 record
WEIGHTS = np.array([[1.5], [-2.0], [0.5]], dtype=np.float32)


def regression_data(records: int, seed: int) -> "tuple[np.ndarray, np.ndarray]":
    x = np.random.RandomState(seed).randn(records, 3).astype(np.float32)
    return x, (x @ WEIGHTS + 0.25).astype(np.float32)


class Records(tf.keras.metrics.Metric):
    """The number of records seen: a SUM over batches of each batch's record count."""

    def __init__(self, name: str = "records", **kwargs: Any) -> None:
        super().__init__(name=name, **kwargs)
        self.count = self.add_weight(name="count", initializer="zeros")

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        self.count.assign_add(tf.cast(tf.shape(y_true)[0], tf.float32))

    def result(self) -> Any:
        return self.count


class LinearTrial(det_keras.TFKerasTrial):
    """Linear regression with plain SGD (no dropout, no randomness in the step): 1 and N slots must agree."""

    def __init__(self, context: det_keras.TFKerasTrialContext) -> None:
        super().__init__(context)
        # As Determined 0.26's cifar10_tf_keras example: the machine's local rank 0 fetches the data while the other
        # ranks wait in allgather_local.
        local = context.distributed.allgather_local(context.distributed.get_local_rank())
        assert local == list(range(context.distributed.local_size)), local

    def build_model(self) -> tf.keras.Model:
        tf.keras.utils.set_random_seed(0)
        model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(3,))])
        model = self.context.wrap_model(model)
        model.compile(
            optimizer=tf.keras.optimizers.SGD(self.context.get_hparam("lr")),
            loss="mse",
            metrics=[tf.keras.metrics.MeanAbsoluteError(name="mae"), Records()],
        )
        return model

    def build_training_data_loader(self) -> Any:
        return regression_data(TRAIN_RECORDS, 0)

    def build_validation_data_loader(self) -> Any:
        return regression_data(VALIDATION_RECORDS, 1)


class DatasetTrial(LinearTrial):
    """tf.data datasets sharded by wrap_dataset (records, then per-slot batches)."""

    def _dataset(self, records: int, seed: int) -> tf.data.Dataset:
        dataset = self.context.wrap_dataset(tf.data.Dataset.from_tensor_slices(regression_data(records, seed)))
        return dataset.batch(self.context.get_per_slot_batch_size())

    def build_training_data_loader(self) -> Any:
        return self._dataset(TRAIN_RECORDS, 0)

    def build_validation_data_loader(self) -> Any:
        return self._dataset(VALIDATION_RECORDS, 1)


class _StopOnRankOne(tf.keras.callbacks.Callback):
    def __init__(self, rank: int) -> None:
        super().__init__()
        self.rank = rank

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        time.sleep(0.02)
        if self.rank == 1 and batch == 4:
            self.model.stop_training = True


class StopOnRankOneTrial(LinearTrial):
    """Rank 1 alone stops the training after its fifth batch: every rank must stop there."""

    def keras_callbacks(self) -> List[tf.keras.callbacks.Callback]:
        return [_StopOnRankOne(self.context.distributed.rank)]


class _DieOnRankOne(tf.keras.callbacks.Callback):
    def __init__(self, rank: int) -> None:
        super().__init__()
        self.rank = rank

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        if self.rank == 1 and batch == 3:
            import os

            os._exit(3)


class DieOnRankOneTrial(LinearTrial):
    """Rank 1 dies after its fourth batch, in the middle of training."""

    def keras_callbacks(self) -> List[tf.keras.callbacks.Callback]:
        return [_DieOnRankOne(self.context.distributed.rank)]


def native_script(context: Any) -> None:
    """What a Horovod-era Native API script does after `context = init(config)`: build and compile its model at
    module level (in no strategy scope of its own), then fit() it."""
    tf.keras.utils.set_random_seed(0)
    model = context.wrap_model(tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(3,))]))
    model.compile(
        optimizer=tf.keras.optimizers.SGD(context.get_hparam("lr")),
        loss="mse",
        metrics=[tf.keras.metrics.MeanAbsoluteError(name="mae"), Records()],
    )
    model.fit(*regression_data(TRAIN_RECORDS, 0), validation_data=regression_data(VALIDATION_RECORDS, 1), epochs=5)
