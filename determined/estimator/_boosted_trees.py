"""`BoostedTreesClassifier` and `BoostedTreesRegressor`: the gradient boosted trees Estimators of TF 1.15, which
TF 2.15's tensorflow_estimator no longer has, as `tf.estimator.Estimator`s with TF 1.15's constructors.

Installed as `tf.estimator.BoostedTreesClassifier` / `BoostedTreesRegressor` (and their `tf.compat.v1.estimator`
names) by determined/estimator/_tf1_compat.py. docs/estimator.md describes them.

Training is TF 1.15's, layer by layer:

1. The first `n_batches_per_layer` steps collect the numeric columns' values; their quantiles become the bucket
   boundaries (`quantile_sketch_epsilon` apart: 100 buckets by default). Feature columns without numeric columns
   skip this.
2. Each following step sums the batch's gradients and hessians of the head's loss with respect to the logits per
   node of the tree's last layer, per feature and per bucket; every `n_batches_per_layer` steps the sums (averaged
   over the batches) grow one layer: each node takes its best split, or stays a leaf. With `center_bias`, the
   first layers' statistics move the bias (the first tree's root) by Newton steps until it settles, before any
   split.
3. A tree is complete at `max_depth` layers or when no node splits; after `n_trees` trees, steps train nothing.

The ensemble, the bucket boundaries and the statistics being summed are variables of the checkpoint: an
Estimator restored from its model_dir predicts the same and goes on growing where it stopped.
"""
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from determined.estimator import _boosted_trees_ensemble as ens
from determined.estimator import _boosted_trees_features as feats

_SCOPE = "boosted_trees"


def _variable(name: str, initial: tf.Tensor) -> tf.Variable:
    """A non-trainable checkpointed variable whose shape may change from step to step."""
    return tf.compat.v1.Variable(
        initial, name=name, trainable=False, use_resource=True, shape=tf.TensorShape(None)
    )


class _State:
    """The variables of the model: the ensemble, the bucket boundaries, and what the current layer has summed."""

    def __init__(self, lay: feats.FeatureLayout, params: ens.TreeParams, n_batches_per_layer: int,
                 center_bias: bool) -> None:
        self.variables: Dict[str, tf.Variable] = {}
        self.logits_dimension = params.logits_dimension
        self.num_quantile_features, self.num_quantiles = lay.num_quantile_features, lay.num_quantiles
        with tf.compat.v1.variable_scope(_SCOPE):
            for key, initial in ens.initial_ensemble(params.logits_dimension).items():
                self.variables[key] = _variable(f"ensemble_{key}", initial)
            k, q = lay.num_quantile_features, lay.num_quantiles
            self.variables["boundaries"] = _variable("bucket_boundaries", tf.zeros([k, q], tf.float32))
            self.variables["ready"] = _variable("boundaries_ready", tf.constant(k == 0))
            if center_bias:
                self.variables["centered"] = _variable("bias_centered", tf.constant(False))
            if n_batches_per_layer > 1:
                self.variables["batches"] = _variable("batches_summed", tf.constant(0, tf.int32))
                self.variables["stats"] = _variable("stats_summed", tf.zeros([0, 0, 0, 0], tf.float32))
                if k:
                    self.variables["values"] = _variable("values_collected", tf.zeros([0, k], tf.float32))

    def read(self) -> Dict[str, tf.Tensor]:
        """The variables' values, reshaped to their ranks (which the variables do not fix): the graph's shape
        inference, Grappler's included, then knows the ranks of the logits and of what follows from them."""
        shapes = {"value": [-1, self.logits_dimension], "layer": [2],
                  "boundaries": [self.num_quantile_features, self.num_quantiles]}
        for key in ("feature", "threshold", "left", "gain", "roots"):
            shapes[key] = [-1]
        for key in ("finalized", "depth", "ready", "centered", "batches"):
            shapes[key] = []
        return {key: tf.reshape(var.read_value(), shapes[key]) if key in shapes else var.read_value()
                for key, var in self.variables.items()}

    def assign(self, values: Dict[str, tf.Tensor]) -> tf.Operation:
        return tf.group(*[self.variables[key].assign(values[key], read_value=False) for key in self.variables])


def _ensemble(state: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    return {key: state[key] for key in ens.ENSEMBLE_KEYS}


def _gradients_and_hessians(loss: tf.Tensor, logits: tf.Tensor, dimension: int) -> Tuple[tf.Tensor, tf.Tensor]:
    """The loss's gradient with respect to each example's logits and the diagonal of its hessian."""
    gradients = tf.gradients(loss, logits)[0]
    hessians = [tf.gradients(gradients[:, k], logits)[0][:, k] for k in range(dimension)]
    return gradients, tf.stack(hessians, axis=1)


class _Trainer:
    """The step of training: from the state read at the start of the step to the state at its end."""

    def __init__(self, features: Dict[str, Any], lay: feats.FeatureLayout, params: ens.TreeParams,
                 n_batches_per_layer: int, center_bias: bool) -> None:
        self.features, self.lay, self.params = features, lay, params
        self.n_batches = n_batches_per_layer
        self.center_bias = center_bias

    def step(self, state: Dict[str, tf.Tensor], nodes: tf.Tensor, buckets: tf.Tensor, gradients: tf.Tensor,
             hessians: tf.Tensor) -> Dict[str, tf.Tensor]:
        def trees() -> Dict[str, tf.Tensor]:
            return tf.cond(ens.is_complete(_ensemble(state), self.params), lambda: dict(state),
                           lambda: self._sum_layer(state, nodes, buckets, gradients, hessians))

        if not self.lay.num_quantile_features:
            return trees()
        return tf.cond(state["ready"], trees, lambda: self._collect_values(state))

    def _collect_values(self, state: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        values = feats.numeric_values(self.features, self.lay)
        out = dict(state)
        if self.n_batches == 1:
            out["boundaries"] = feats.quantile_boundaries(values, self.lay.num_quantiles)
            out["ready"] = tf.constant(True)
            return out
        collected = tf.concat([state["values"], values], axis=0)
        batches = state["batches"] + 1
        done = batches >= self.n_batches
        out["boundaries"] = tf.cond(done, lambda: feats.quantile_boundaries(collected, self.lay.num_quantiles),
                                    lambda: state["boundaries"])
        out["ready"] = done
        out["values"] = tf.cond(done, lambda: collected[:0], lambda: collected)
        out["batches"] = tf.where(done, 0, batches)
        return out

    def _sum_layer(self, state: Dict[str, tf.Tensor], nodes: tf.Tensor, buckets: tf.Tensor, gradients: tf.Tensor,
                   hessians: tf.Tensor) -> Dict[str, tf.Tensor]:
        stats = ens.layer_stats(_ensemble(state), nodes, buckets, gradients, hessians, self.lay.num_buckets)
        if self.n_batches == 1:
            return self._use_layer(state, stats)
        # What earlier batches of this layer summed (the variable's value is stale when none did). No constant
        # of another shape flows into the sum: Grappler's constant folding mistakes the shapes of such a graph.
        summed = stats + tf.cond(state["batches"] > 0, lambda: state["stats"], lambda: tf.zeros_like(stats))
        batches = state["batches"] + 1

        def keep() -> Dict[str, tf.Tensor]:
            out = dict(state)
            out["stats"], out["batches"] = summed, batches
            return out

        def use() -> Dict[str, tf.Tensor]:
            out = self._use_layer(state, summed / float(self.n_batches))
            out["stats"], out["batches"] = summed[:0], tf.constant(0)
            return out

        return tf.cond(batches >= self.n_batches, use, keep)

    def _use_layer(self, state: Dict[str, tf.Tensor], stats: tf.Tensor) -> Dict[str, tf.Tensor]:
        def grow() -> Dict[str, tf.Tensor]:
            out = dict(state)
            out.update(ens.grow_layer(_ensemble(state), stats, self.params))
            return out

        if not self.center_bias:
            return grow()

        def center() -> Dict[str, tf.Tensor]:
            out = dict(state)
            centered_ensemble, settled = ens.center_bias(_ensemble(state), stats, self.params)
            out.update(centered_ensemble)
            out["centered"] = settled
            return out

        return tf.cond(state["centered"], grow, center)


def _model_fn_for(head: Any, feature_columns: Sequence[Any], params: ens.TreeParams, n_batches_per_layer: int,
                  center_bias: bool, quantile_sketch_epsilon: float) -> Callable[..., tf.estimator.EstimatorSpec]:
    lay = feats.layout(feature_columns, quantile_sketch_epsilon)

    def model_fn(features: Dict[str, Any], labels: Any, mode: str, config: Any = None) -> tf.estimator.EstimatorSpec:
        if not isinstance(features, dict):
            raise ValueError(f"BoostedTrees Estimators take features as a dict of tensors, got {type(features)}")
        if tf.distribute.has_strategy() and tf.distribute.get_strategy().num_replicas_in_sync > 1:
            raise ValueError(
                f"BoostedTrees Estimators train on one replica, as TF 1.15's did; this one runs under a "
                f"distribution strategy of {tf.distribute.get_strategy().num_replicas_in_sync} replicas: train it on "
                f"one slot (resources.slots_per_trial: 1)"
            )
        state_vars = _State(lay, params, n_batches_per_layer, center_bias)
        state = state_vars.read()
        buckets = feats.bucket_matrix(features, lay, state["boundaries"])
        nodes = ens.leaves(_ensemble(state), buckets, params.max_depth)
        logits = ens.logits_of(_ensemble(state), nodes)

        def train_op_fn(loss: tf.Tensor) -> tf.Operation:
            gradients, hessians = _gradients_and_hessians(loss, logits, params.logits_dimension)
            trainer = _Trainer(features, lay, params, n_batches_per_layer, center_bias)
            new_state = trainer.step(state, nodes, buckets, gradients, hessians)
            with tf.control_dependencies([state_vars.assign(new_state)]):
                global_step = tf.compat.v1.train.get_or_create_global_step()
                return tf.compat.v1.assign_add(global_step, 1).op

        return head.create_estimator_spec(
            features=features, mode=mode, logits=logits, labels=labels, train_op_fn=train_op_fn
        )

    return model_fn


def _check(n_batches_per_layer: int, n_trees: int, max_depth: int, learning_rate: float, l1: float, l2: float,
           tree_complexity: float, min_node_weight: float, pruning_mode: str) -> None:
    if int(n_batches_per_layer) < 1:
        raise ValueError(f"n_batches_per_layer must be a positive number of batches, got {n_batches_per_layer}")
    if int(n_trees) < 1 or int(max_depth) < 1:
        raise ValueError(f"n_trees and max_depth must be at least 1, got {n_trees} and {max_depth}")
    if learning_rate <= 0:
        raise ValueError(f"learning_rate must be positive, got {learning_rate}")
    if min(l1, l2, tree_complexity, min_node_weight) < 0:
        raise ValueError("l1_regularization, l2_regularization, tree_complexity and min_node_weight must not be "
                         "negative")
    if pruning_mode not in ens.PRUNING_MODES:
        raise ValueError(f"pruning_mode must be one of {ens.PRUNING_MODES}, got {pruning_mode!r}")
    if pruning_mode != "none" and tree_complexity <= 0:
        raise ValueError(f"pruning_mode={pruning_mode!r} prunes splits whose gain is below tree_complexity: "
                         f"set tree_complexity > 0")


class _BoostedTreesBase(tf.estimator.Estimator):
    """What both Estimators share: the model_fn on a head, and the importances of the features."""

    def __init__(self, head: Any, feature_columns: Sequence[Any], n_batches_per_layer: int,
                 model_dir: Optional[str], n_trees: int, max_depth: int, learning_rate: float,
                 l1_regularization: float, l2_regularization: float, tree_complexity: float,
                 min_node_weight: float, config: Any, center_bias: bool, pruning_mode: str,
                 quantile_sketch_epsilon: float, logits_dimension: int) -> None:
        _check(n_batches_per_layer, n_trees, max_depth, learning_rate, l1_regularization, l2_regularization,
               tree_complexity, min_node_weight, pruning_mode)
        params = ens.TreeParams(
            n_trees=int(n_trees), max_depth=int(max_depth), learning_rate=float(learning_rate),
            l1=float(l1_regularization), l2=float(l2_regularization), tree_complexity=float(tree_complexity),
            min_node_weight=float(min_node_weight), pruning_mode=pruning_mode, logits_dimension=logits_dimension,
        )
        self._feature_layout = feats.layout(list(feature_columns), quantile_sketch_epsilon)
        model_fn = _model_fn_for(head, list(feature_columns), params, int(n_batches_per_layer),
                                 bool(center_bias), quantile_sketch_epsilon)
        super().__init__(model_fn=model_fn, model_dir=model_dir, config=config)

    def experimental_feature_importances(self, normalize: bool = False) -> Tuple[List[str], np.ndarray]:
        """The features' gain-based importances in the latest checkpoint: the names of the feature columns and the
        summed gains of the splits on them, most important first (normalized to sum to 1 with `normalize`)."""
        path = tf.train.latest_checkpoint(self.model_dir)
        if path is None:
            raise ValueError(f"no checkpoint in {self.model_dir}: train the Estimator before asking for its "
                             f"feature importances")
        reader = tf.train.load_checkpoint(path)
        feature = reader.get_tensor(f"{_SCOPE}/ensemble_feature")
        gain = reader.get_tensor(f"{_SCOPE}/ensemble_gain")
        columns = self._feature_layout.column_of_feature()
        totals: Dict[str, float] = {c: 0.0 for c in columns}
        for f, g in zip(feature, gain):
            if f >= 0:
                totals[columns[f]] += float(g)
        ordered = sorted(totals.items(), key=lambda item: -item[1])
        importances = np.array([v for _, v in ordered], dtype=np.float64)
        if normalize:
            total = importances.sum()
            if total <= 0:
                raise AssertionError("no split with a positive gain: the importances cannot be normalized")
            importances = importances / total
        return [name for name, _ in ordered], importances


class BoostedTreesClassifier(_BoostedTreesBase):
    """TF 1.15's `tf.estimator.BoostedTreesClassifier`: gradient boosted trees for binary classification, or for
    `n_classes` > 2 classes (one logit per class, diagonal hessians)."""

    def __init__(self, feature_columns: Sequence[Any], n_batches_per_layer: int, model_dir: Optional[str] = None,
                 n_classes: int = 2, weight_column: Any = None, label_vocabulary: Optional[Sequence[str]] = None,
                 n_trees: int = 100, max_depth: int = 6, learning_rate: float = 0.1,
                 l1_regularization: float = 0.0, l2_regularization: float = 0.0, tree_complexity: float = 0.0,
                 min_node_weight: float = 0.0, config: Any = None, center_bias: bool = False,
                 pruning_mode: str = "none", quantile_sketch_epsilon: float = 0.01,
                 train_in_memory: bool = False) -> None:
        if int(n_classes) < 2:
            raise ValueError(f"n_classes must be at least 2, got {n_classes}")
        if int(n_classes) == 2:
            head = tf.estimator.BinaryClassHead(weight_column=weight_column, label_vocabulary=label_vocabulary)
            dimension = 1
        else:
            head = tf.estimator.MultiClassHead(int(n_classes), weight_column=weight_column,
                                               label_vocabulary=label_vocabulary)
            dimension = int(n_classes)
        # train_in_memory only let TF 1.15 keep the examples' leaves between steps: the trees are the same.
        del train_in_memory
        super().__init__(head, feature_columns, n_batches_per_layer, model_dir, n_trees, max_depth, learning_rate,
                         l1_regularization, l2_regularization, tree_complexity, min_node_weight, config,
                         center_bias, pruning_mode, quantile_sketch_epsilon, dimension)


class BoostedTreesRegressor(_BoostedTreesBase):
    """TF 1.15's `tf.estimator.BoostedTreesRegressor`: gradient boosted trees on the mean squared error, for
    `label_dimension` targets."""

    def __init__(self, feature_columns: Sequence[Any], n_batches_per_layer: int, model_dir: Optional[str] = None,
                 label_dimension: int = 1, weight_column: Any = None, n_trees: int = 100, max_depth: int = 6,
                 learning_rate: float = 0.1, l1_regularization: float = 0.0, l2_regularization: float = 0.0,
                 tree_complexity: float = 0.0, min_node_weight: float = 0.0, config: Any = None,
                 center_bias: bool = False, pruning_mode: str = "none", quantile_sketch_epsilon: float = 0.01,
                 train_in_memory: bool = False) -> None:
        if int(label_dimension) < 1:
            raise ValueError(f"label_dimension must be at least 1, got {label_dimension}")
        head = tf.estimator.RegressionHead(label_dimension=int(label_dimension), weight_column=weight_column)
        del train_in_memory
        super().__init__(head, feature_columns, n_batches_per_layer, model_dir, n_trees, max_depth, learning_rate,
                         l1_regularization, l2_regularization, tree_complexity, min_node_weight, config,
                         center_bias, pruning_mode, quantile_sketch_epsilon, int(label_dimension))
