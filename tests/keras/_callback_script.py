"""A Determined 0.38 Keras script (DeterminedCallback, det.keras.TensorBoard) on synthetic data: the test runs it
as an experiment's entrypoint, alone or through determined.launch.tensorflow on two slots."""
import logging
import os

import numpy as np
import tensorflow as tf

import determined as det
import determined.keras
from wait_for_pause import wait_for_pause


class WaitForPause(tf.keras.callbacks.Callback):
    """Before epoch 2 of a fresh run, wait until the platform asks the trial to stop."""

    def __init__(self, core_context: det.core.Context, wait_dir: str) -> None:
        super().__init__()
        self.core_context, self.wait_dir = core_context, wait_dir

    def on_epoch_begin(self, epoch: int, logs: object = None) -> None:
        if epoch == 1:
            wait_for_pause(self.core_context, self.wait_dir)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    info = det.get_cluster_info()
    assert info is not None
    hparams = info.trial.hparams
    distributed, strategy = det.core.DistributedContext.from_tf_config()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(128, 4)).astype("float32")
    y = tf.keras.utils.to_categorical((x[:, 0] + x[:, 1] > 0).astype(int) + (x[:, 2] > 1).astype(int), 3)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Input((4,)), tf.keras.layers.Dense(3, activation="softmax")])
        model.compile(tf.keras.optimizers.Adam(0.05), "categorical_crossentropy", ["categorical_accuracy"])
    with det.core.init(distributed=distributed) as core_context:
        callbacks = [det.keras.DeterminedCallback(core_context, info.latest_checkpoint, info.trial.trial_id),
                     det.keras.TensorBoard(core_context, "ignored_dir", update_freq="epoch", profile_batch=0)]
        if hparams.get("wait_dir") and info.latest_checkpoint is None:
            callbacks.append(WaitForPause(core_context, hparams["wait_dir"]))
        multi = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
        print(f"rank {distributed.rank} of {distributed.size}: "
              f"{'MultiWorkerMirroredStrategy' if multi else type(strategy).__name__}", flush=True)
        model.fit(x, y, batch_size=hparams["batch_size"], epochs=hparams["epochs"], validation_data=(x, y),
                  callbacks=callbacks, verbose=1)
        print(f"rank {distributed.rank} done after {len(os.listdir('.'))} files", flush=True)


if __name__ == "__main__":
    main()
