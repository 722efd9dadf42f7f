"""A small TensorpackTrial written as 0.12/0.13 Tensorpack trials were (TF 1.x names: tf.train.AdamOptimizer,
tf.train.exponential_decay), on synthetic 12x12 "images" whose class is the band that is lit."""
from typing import Any, Dict, List

import numpy as np
import tensorflow as tf
import tensorpack as tp

from determined import config as det_config
from determined.tensorpack import Evaluator, NamedTensorsEvaluator, SchedulePoint, ScheduleSetter, TensorpackTrial

SIZE, CLASSES = 12, 4


class Bands(tp.DataFlow):
    def __init__(self, records: int, seed: int) -> None:
        self.records, self.seed = records, seed

    def __len__(self) -> int:
        return self.records

    def __iter__(self) -> Any:
        rng = np.random.RandomState(self.seed)
        for _ in range(self.records):
            label = rng.randint(CLASSES)
            image = (rng.rand(SIZE, SIZE) * 0.5).astype("float32")
            image[label * 3:label * 3 + 3, :] += 1.0
            yield [image, label]


class Model(tp.ModelDesc):
    def __init__(self, hparams: Dict[str, Any]) -> None:
        self.hparams = hparams

    def inputs(self) -> List[tf.TensorSpec]:
        return [tf.TensorSpec((None, SIZE, SIZE), tf.float32, "input"), tf.TensorSpec((None,), tf.int32, "label")]

    def build_graph(self, image: Any, label: Any) -> Any:
        logits = tp.FullyConnected("fc0", tf.reshape(image, [-1, SIZE * SIZE]), CLASSES, activation=tf.identity)
        cost = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=label),
                              name="cross_entropy_loss")
        correct = tf.cast(tf.nn.in_top_k(predictions=logits, targets=label, k=1), tf.float32, name="correct")
        tf.reduce_mean(correct, name="accuracy")
        return tf.identity(cost, name="total_cost")

    def optimizer(self) -> Any:
        lr = tf.train.exponential_decay(  # TF 1.x's names, as Tensorpack-era code wrote them
            learning_rate=self.hparams["learning_rate"], global_step=tp.get_global_step_var(),
            decay_steps=1000, decay_rate=0.5, name="learning_rate",
        )
        return tf.train.AdamOptimizer(lr)


class BandsTrial(TensorpackTrial):
    def build_model(self, trainer_type: str) -> tp.ModelDesc:
        return Model(self.context.get_hparams())

    def training_metrics(self) -> List[str]:
        return ["learning_rate"]

    def validation_metrics(self) -> Any:
        return ["cross_entropy_loss", "accuracy"]

    def build_training_dataflow(self) -> tp.DataFlow:
        return tp.BatchData(Bands(256, 0), self.context.get_per_slot_batch_size())

    def build_validation_dataflow(self) -> tp.DataFlow:
        return tp.BatchData(Bands(64, 1), self.context.get_per_slot_batch_size())


class WeightNorm(Evaluator):
    """An Evaluator of its own: the norm of the weights, computed in the training session."""

    def set_up_graph(self, trainer: Any) -> None:
        self.trainer = trainer
        self.norm = tf.norm(tf.compat.v1.trainable_variables()[0])

    def compute_validation_metrics(self) -> Dict[str, Any]:
        return {"weight_norm": float(self.trainer.sess.run(self.norm))}


class ScheduledTrial(BandsTrial):
    """A learning rate variable set by a ScheduleSetter; validation by an Evaluator and a NamedTensorsEvaluator."""

    def build_model(self, trainer_type: str) -> tp.ModelDesc:
        class Scheduled(Model):
            def optimizer(self) -> Any:
                lr = tf.compat.v1.get_variable("lr", initializer=1.0, trainable=False)
                return tf.train.GradientDescentOptimizer(lr)

        return Scheduled(self.context.get_hparams())

    def training_metrics(self) -> List[str]:
        return ["lr"]

    def validation_metrics(self) -> Any:
        return WeightNorm() if self.context.get_hparam("evaluator") == "weights" else NamedTensorsEvaluator(["lr"])

    def tensorpack_callbacks(self) -> List[tp.Callback]:
        return [ScheduleSetter("lr", [SchedulePoint(0, 0.5, interp="linear"), SchedulePoint(10, 0.1)])]


def make_config(metric: str = "val_accuracy", **hparams: Any) -> Dict[str, Any]:
    return det_config.load_experiment_config({
        "hyperparameters": {"global_batch_size": 16, "learning_rate": 0.05, **hparams},
        "searcher": {"name": "single", "metric": metric, "smaller_is_better": False, "max_length": {"batches": 40}},
        "scheduling_unit": 10,
        "min_checkpoint_period": {"batches": 20},
        "entrypoint": "tests.tensorpack._tensorpack_trials:BandsTrial",
    })
