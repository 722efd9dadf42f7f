"""Off the platform (a local core context): a DeterminedCallback checkpoint continues its own run (same continue_id)
at the next epoch, and only warm-starts another (weights, not the epoch). Run by test_keras_callback_038.py in its
own process (TensorFlow stays out of the process that hosts the test's embedded master); prints `ok`."""
import pathlib
import sys

import numpy as np
import tensorflow as tf

import determined as det
import determined.keras


def model() -> tf.keras.Model:
    m = tf.keras.Sequential([tf.keras.layers.Input((4,)), tf.keras.layers.Dense(1, activation="sigmoid")])
    m.compile(tf.keras.optimizers.SGD(0.5), "binary_crossentropy")
    return m


def main(storage: pathlib.Path) -> None:
    x = np.random.default_rng(1).normal(size=(32, 4)).astype("float32")
    y = (x[:, :1] > 0).astype("float32")
    with det.core.init(checkpoint_storage=str(storage)) as core_context:
        first = model()
        first.fit(x, y, batch_size=8, epochs=2, verbose=0,
                  callbacks=[det.keras.DeterminedCallback(core_context, None, "run-a", checkpoint_epochs=2)])
        stored = [p for p in storage.iterdir() if (p / "metadata.json").is_file()]
        assert len(stored) == 1, [(p.name, sorted(q.name for q in p.iterdir())) for p in storage.iterdir()]
        uuid = stored[0].name
        files = {p.name for p in (storage / uuid).iterdir()}
        assert {"callback_state", "metadata.json", "model_checkpoint.index"} <= files, files
        trained = first.get_weights()
        same = model()
        history = same.fit(x, y, batch_size=8, epochs=3, verbose=0,
                           callbacks=[det.keras.DeterminedCallback(core_context, uuid, "run-a")])
        assert history.epoch == [2], history.epoch  # only the third epoch was left
        steps = [h["steps_completed"] for h in core_context.train.training_history]
        assert steps == [4, 8, 12], steps  # the second run's count goes on from the checkpoint's 8
        other = model()
        loaded = []  # the weights fit() starts from, read right after the DeterminedCallback's on_train_begin
        probe = tf.keras.callbacks.LambdaCallback(on_train_begin=lambda logs: loaded.append(other.get_weights()))
        history = other.fit(x, y, batch_size=8, epochs=1, verbose=0,
                            callbacks=[det.keras.DeterminedCallback(core_context, uuid, "run-b"), probe])
        assert history.epoch == [0] and core_context.train.training_history[-1]["steps_completed"] == 4
        assert all(np.array_equal(a, b) for a, b in zip(loaded[0], trained))  # warm-started from the weights
        try:
            det.keras.DeterminedCallback(core_context, None, 1, train_metrics_report_period=0)
        except det.errors.DeterminedError as e:
            assert "train_metrics_report_period" in str(e)
        else:
            raise AssertionError("train_metrics_report_period=0 was accepted")
    print("ok", flush=True)


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
