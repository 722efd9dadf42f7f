"""TF 1.15's BoostedTreesClassifier / BoostedTreesRegressor (determined/estimator/_boosted_trees.py), reached as
tf.estimator.* names once determined.estimator is imported: they learn, keep to n_trees and max_depth, restore
from their model_dir with the same predictions and go on growing; and an EstimatorTrial trains one."""
import pathlib
from typing import Any, Callable, Dict, List, Tuple

import numpy as np
import pytest
import tensorflow as tf

from determined import estimator
from determined.experimental import Checkpoint
from determined.tensorflow._tf1_compat import v1_behavior
from test_estimator_trial import run

SCOPE = "boosted_trees"


def tabular(n: int, seed: int) -> Tuple[Dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Two numeric features, a categorical one and a number of siblings; a class rule and a regression target."""
    rng = np.random.RandomState(seed)
    age = rng.uniform(0, 80, n).astype(np.float32)
    fare = rng.lognormal(3, 1, n).astype(np.float32)
    sex = rng.choice(["male", "female"], n)
    siblings = rng.randint(0, 5, n).astype(np.int64)
    label = (((sex == "female") & (age < 60)) | (fare > 60) | ((siblings == 0) & (age < 12))).astype(np.int64)
    target = (0.05 * age + 2.0 * (sex == "female") - 0.5 * siblings + rng.normal(0, 0.1, n)).astype(np.float32)
    return {"age": age, "fare": fare, "sex": sex, "siblings": siblings}, label, target


def columns() -> List[Any]:
    sex = tf.feature_column.categorical_column_with_vocabulary_list("sex", ["male", "female"])
    return [
        tf.feature_column.numeric_column("age"),
        tf.feature_column.numeric_column("fare"),
        tf.feature_column.indicator_column(sex),
        tf.feature_column.bucketized_column(tf.feature_column.numeric_column("siblings"), [1.0, 2.0, 3.0]),
    ]


def input_fn(n: int, seed: int, regression: bool = False, repeat: bool = True) -> Callable[[], tf.data.Dataset]:
    def make() -> tf.data.Dataset:
        features, label, target = tabular(n, seed)
        ds = tf.data.Dataset.from_tensor_slices((features, target if regression else label))
        return (ds.repeat() if repeat else ds).batch(n)

    return make


def ensemble(model_dir: str) -> Dict[str, np.ndarray]:
    reader = tf.train.load_checkpoint(model_dir)
    return {name[len(SCOPE) + 1:]: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name.startswith(SCOPE + "/ensemble_")}


def tree_depths(e: Dict[str, np.ndarray]) -> List[int]:
    """The depth of every tree of an ensemble read from a checkpoint."""
    feature, left = e["ensemble_feature"], e["ensemble_left"]

    def depth(node: int) -> int:
        if feature[node] < 0:
            return 0
        return 1 + max(depth(int(left[node])), depth(int(left[node]) + 1))

    return [depth(int(root)) for root in e["ensemble_roots"]]


@pytest.fixture(autouse=True)
def _v1() -> Any:
    """EstimatorTrial code runs with TF 1.x behaviour; so do these Estimators here."""
    with v1_behavior():
        yield


def test_the_tf1_names_are_these_estimators() -> None:
    from determined.estimator import _boosted_trees

    assert tf.estimator.BoostedTreesClassifier is _boosted_trees.BoostedTreesClassifier
    assert tf.compat.v1.estimator.BoostedTreesRegressor is _boosted_trees.BoostedTreesRegressor
    assert issubclass(tf.estimator.BoostedTreesClassifier, tf.estimator.Estimator)


def test_classifier_learns_within_n_trees_of_max_depth(tmp_path: pathlib.Path) -> None:
    est = tf.estimator.BoostedTreesClassifier(columns(), n_batches_per_layer=1, model_dir=str(tmp_path), n_trees=4,
                                              max_depth=3, learning_rate=0.5, l2_regularization=0.01)
    est.train(input_fn(400, 1), steps=1)  # the numeric columns' quantiles: nothing learnt yet
    untrained = est.evaluate(input_fn(200, 2, repeat=False))
    assert untrained["accuracy"] == pytest.approx(untrained["accuracy_baseline"])
    est.train(input_fn(400, 1), steps=8)
    metrics = est.evaluate(input_fn(200, 2, repeat=False))
    assert metrics["accuracy"] > metrics["accuracy_baseline"] + 0.2, metrics
    assert metrics["accuracy"] >= 0.9 and metrics["auc"] > 0.9 and metrics["loss"] < untrained["loss"]
    assert {"precision", "recall", "average_loss", "label/mean", "prediction/mean"} <= set(metrics)

    est.train(input_fn(400, 1), steps=30)  # far more layers than 4 trees of 3 layers need
    grown = ensemble(str(tmp_path))
    assert int(grown["ensemble_finalized"]) == 4 and len(grown["ensemble_roots"]) == 4
    depths = tree_depths(grown)
    assert max(depths) == 3 and all(1 <= d <= 3 for d in depths), depths
    est.train(input_fn(400, 1), steps=3)
    after = ensemble(str(tmp_path))
    for key, value in grown.items():
        np.testing.assert_array_equal(after[key], value, err_msg=f"{key} changed after n_trees were complete")

    [prediction] = list(est.predict(input_fn(1, 3, repeat=False)))
    assert set(prediction) >= {"logits", "logistic", "probabilities", "class_ids", "classes"}
    assert prediction["probabilities"].sum() == pytest.approx(1.0)
    names, importances = est.experimental_feature_importances(normalize=True)
    assert sorted(names) == ["age", "fare", "sex_indicator", "siblings_bucketized"]
    assert importances.sum() == pytest.approx(1.0) and importances[0] > 0


def _predicted(est: tf.estimator.Estimator) -> np.ndarray:
    return np.stack([p["logits"] for p in est.predict(input_fn(100, 3, repeat=False))])


def test_restored_from_its_model_dir_it_predicts_the_same_and_goes_on_growing(tmp_path: pathlib.Path) -> None:
    def make(model_dir: pathlib.Path) -> tf.estimator.Estimator:
        return tf.estimator.BoostedTreesClassifier(columns(), n_batches_per_layer=1, model_dir=str(model_dir),
                                                  n_trees=3, max_depth=2, learning_rate=0.3)

    first = make(tmp_path / "resumed")
    first.train(input_fn(300, 1), steps=4)  # the quantiles, then the first tree and half the second
    before = _predicted(first)
    again = make(tmp_path / "resumed")
    np.testing.assert_array_equal(_predicted(again), before)
    again.train(input_fn(300, 1), steps=3)
    resumed = ensemble(str(tmp_path / "resumed"))
    assert len(resumed["ensemble_roots"]) == 3

    straight = make(tmp_path / "straight")
    straight.train(input_fn(300, 1), steps=7)
    expected = ensemble(str(tmp_path / "straight"))
    assert resumed.keys() == expected.keys()
    for key in expected:
        np.testing.assert_allclose(resumed[key], expected[key], rtol=1e-6, err_msg=key)
    np.testing.assert_array_equal(_predicted(again), _predicted(straight))
    assert not np.array_equal(_predicted(again), before)


def test_regressor_loss_drops_and_center_bias_moves_the_bias_first(tmp_path: pathlib.Path) -> None:
    est = tf.estimator.BoostedTreesRegressor(columns(), n_batches_per_layer=1, model_dir=str(tmp_path), n_trees=20,
                                             max_depth=3, learning_rate=0.3, center_bias=True)
    losses, first_node = [], []
    for steps in (1, 2, 40):  # the quantiles; two Newton steps of the bias (the second settles it); the trees
        est.train(input_fn(400, 1, regression=True), steps=steps)
        losses.append(est.evaluate(input_fn(200, 2, regression=True, repeat=False))["average_loss"])
        first_node.append(int(ensemble(str(tmp_path))["ensemble_feature"][0]))
    _, _, target = tabular(200, 2)
    assert losses[0] == pytest.approx(float(np.mean(target ** 2)), rel=1e-4)  # nothing learnt: predicts 0
    assert losses[1] == pytest.approx(float(np.var(target)), rel=0.05)  # the bias is the mean
    assert first_node == [-1, -1, first_node[2]] and first_node[2] >= 0, "no split before the bias settled"
    assert losses[2] < losses[1] / 10, losses


def test_multiclass_and_several_batches_per_layer(tmp_path: pathlib.Path) -> None:
    features, label, target = tabular(600, 1)
    classes = np.digitize(target, np.quantile(target, [1 / 3, 2 / 3])).astype(np.int64)

    def fn() -> tf.data.Dataset:
        return tf.data.Dataset.from_tensor_slices((features, classes)).repeat().batch(200)

    est = tf.estimator.BoostedTreesClassifier(columns(), n_batches_per_layer=3, model_dir=str(tmp_path),
                                              n_classes=3, n_trees=5, max_depth=3, learning_rate=0.5)
    est.train(fn, steps=3 + 3 * 4)  # three batches of quantiles, then four layers of three batches each
    e = ensemble(str(tmp_path))
    assert int(e["ensemble_finalized"]) == 1 and tree_depths(e)[0] == 3 and int(e["ensemble_depth"]) == 1
    assert e["ensemble_value"].shape[1] == 3
    metrics = est.evaluate(lambda: tf.data.Dataset.from_tensor_slices((features, classes)).batch(200))
    assert metrics["accuracy"] > 0.6, metrics  # three balanced classes: 1/3 by chance


def test_pre_pruning_makes_no_split_below_tree_complexity_and_post_pruning_undoes_them(tmp_path: pathlib.Path) -> None:
    grown = {}
    for mode in ("pre", "post"):
        est = tf.estimator.BoostedTreesClassifier(columns(), n_batches_per_layer=1, model_dir=str(tmp_path / mode),
                                                  n_trees=2, max_depth=2, tree_complexity=1e3, pruning_mode=mode)
        est.train(input_fn(200, 1), steps=6)
        grown[mode] = ensemble(str(tmp_path / mode))
        assert int(grown[mode]["ensemble_finalized"]) == 2
        assert (grown[mode]["ensemble_feature"] == -1).all(), f"{mode}: a split of negative gain is left"
    assert len(grown["pre"]["ensemble_feature"]) == 2, "pre-pruning: each tree a single leaf"
    assert len(grown["post"]["ensemble_feature"]) == 2 * 7, "post-pruning: grown to depth 2, then undone"
    assert (grown["post"]["ensemble_gain"] < 0).any()


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="'sex' is a VocabularyListCategoricalColumn: wrap .*indicator_column"):
        tf.estimator.BoostedTreesClassifier(
            [tf.feature_column.categorical_column_with_vocabulary_list("sex", ["m", "f"])], n_batches_per_layer=1)
    with pytest.raises(ValueError, match="set tree_complexity > 0"):
        tf.estimator.BoostedTreesRegressor(columns(), n_batches_per_layer=1, pruning_mode="pre")
    with pytest.raises(ValueError, match="n_batches_per_layer must be a positive"):
        tf.estimator.BoostedTreesRegressor(columns(), n_batches_per_layer=0)


class BoostedTreesTrial(estimator.EstimatorTrial):
    """A trial of the kind Determined's gbt examples are: the whole data set in one batch, no optimizer."""

    def __init__(self, context: estimator.EstimatorTrialContext) -> None:
        self.context = context
        assert context.wrap_optimizer(None) is None

    def build_estimator(self) -> tf.estimator.Estimator:
        return tf.estimator.BoostedTreesClassifier(columns(), n_batches_per_layer=1, n_trees=10, max_depth=3,
                                                  learning_rate=0.3)

    def _input_fn(self, train: bool) -> Callable[[], tf.data.Dataset]:
        def make() -> tf.data.Dataset:
            features, label, _ = tabular(300 if train else 100, 1 if train else 2)
            ds = self.context.wrap_dataset(tf.data.Dataset.from_tensor_slices((features, label)))
            return ds.batch(len(label))

        return make

    def build_train_spec(self) -> tf.estimator.TrainSpec:
        return tf.estimator.TrainSpec(self._input_fn(True))

    def build_validation_spec(self) -> tf.estimator.EvalSpec:
        return tf.estimator.EvalSpec(self._input_fn(False), steps=None)

    def build_serving_input_receiver_fns(self) -> Dict[str, estimator.ServingInputReceiverFn]:
        def serving() -> tf.estimator.export.ServingInputReceiver:
            features = {name: tf.compat.v1.placeholder(dtype, [None], name=name) for name, dtype in
                        [("age", tf.float32), ("fare", tf.float32), ("sex", tf.string), ("siblings", tf.int64)]}
            return tf.estimator.export.ServingInputReceiver(features, features)

        return {"raw": serving}


def test_estimator_trial_trains_boosted_trees_and_resumes(tmp_path: pathlib.Path) -> None:
    straight = run(BoostedTreesTrial, tmp_path / "straight", [8])
    metrics = straight.train.validation_history[-1]["metrics"]
    assert metrics["accuracy"] > metrics["accuracy_baseline"] + 0.15, metrics
    first = run(BoostedTreesTrial, tmp_path / "resumed", [4])
    resumed = run(BoostedTreesTrial, tmp_path / "resumed", [8], latest=first.checkpoint.reported[-1])
    assert resumed.train.validation_history[-1]["metrics"] == pytest.approx(
        straight.train.validation_history[-1]["metrics"], rel=1e-6)
    a = ensemble(str(tmp_path / "straight" / straight.checkpoint.reported[-1]["uuid"]))
    b = ensemble(str(tmp_path / "resumed" / resumed.checkpoint.reported[-1]["uuid"]))
    for key in a:
        np.testing.assert_allclose(a[key], b[key], rtol=1e-6, err_msg=key)

    # The checkpoint's SavedModel predicts as the trial validated.
    model = Checkpoint.load_from_path(str(tmp_path / "resumed" / resumed.checkpoint.reported[-1]["uuid"]),
                                      tags=["serve"])
    features, label, _ = tabular(100, 2)
    outputs = model.signatures["predict"](**{k: tf.constant(v) for k, v in features.items()})
    accuracy = float(np.mean(outputs["class_ids"].numpy().reshape(-1) == label))
    assert accuracy == pytest.approx(resumed.train.validation_history[-1]["metrics"]["accuracy"], abs=1e-6)

