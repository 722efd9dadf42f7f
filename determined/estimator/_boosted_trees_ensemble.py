"""The tree ensemble of the BoostedTrees Estimators (determined/estimator/_boosted_trees.py), in TensorFlow ops.

TF 2.15 still defines the `BoostedTrees*` ops but its build has no kernels for them, so the ensemble is kept in
plain variables, all of them in the Estimator's checkpoint:

* nodes, one entry per node of every tree: `feature` (the scalar feature a node splits on, -1 for a leaf),
  `threshold` (examples whose bucket id is <= threshold go left), `left` (the left child; the right child is the
  next node), `gain` (of the node's split) and `value` [N, logits_dimension] (a leaf's output: its parent's value
  plus the learning rate times its Newton step);
* `roots` [T], the root node of each tree begun so far (a tree's nodes follow its root);
* the state of the tree being grown: `finalized` (trees complete), `depth` (layers grown in the last tree) and
  `layer` [2], the range of node ids of its last layer: the leaves that the next layer may split.

A layer is grown from the gradient and hessian statistics of the loss, summed per node of the last layer, per
feature and per bucket (`layer_stats`), by `grow_layer`: the best split of each node (XGBoost's gain with l1/l2
regularization, less `tree_complexity` per split; a node whose hessian sum is below `min_node_weight` stays a
leaf), two new leaves per split.
"""
import dataclasses
from typing import Dict, Tuple

import tensorflow as tf

PRUNING_MODES = ("none", "pre", "post")
# Center bias stops when a Newton step moves the bias by less than this.
_CENTER_BIAS_TOLERANCE = 1e-2


@dataclasses.dataclass(frozen=True)
class TreeParams:
    n_trees: int
    max_depth: int
    learning_rate: float
    l1: float
    l2: float
    tree_complexity: float
    min_node_weight: float
    pruning_mode: str
    logits_dimension: int


ENSEMBLE_KEYS = ("feature", "threshold", "left", "gain", "value", "roots", "finalized", "depth", "layer")


def initial_ensemble(logits_dimension: int) -> Dict[str, tf.Tensor]:
    """One tree that is a single leaf of value 0, its root the layer to split."""
    return {
        "feature": tf.constant([-1], tf.int32),
        "threshold": tf.constant([0], tf.int32),
        "left": tf.constant([0], tf.int32),
        "gain": tf.constant([0.0], tf.float32),
        "value": tf.zeros([1, logits_dimension], tf.float32),
        "roots": tf.constant([0], tf.int32),
        "finalized": tf.constant(0, tf.int32),
        "depth": tf.constant(0, tf.int32),
        "layer": tf.constant([0, 1], tf.int32),
    }


def leaves(ensemble: Dict[str, tf.Tensor], buckets: tf.Tensor, max_depth: int) -> tf.Tensor:
    """The leaf each example [batch, F] reaches in each tree: int32 [batch, T]."""
    roots = ensemble["roots"]
    nodes = tf.tile(roots[tf.newaxis, :], [tf.shape(buckets)[0], 1])
    for _ in range(max_depth):
        feature = tf.gather(ensemble["feature"], nodes)
        bucket = tf.gather(buckets, tf.maximum(feature, 0), batch_dims=1)
        child = tf.gather(ensemble["left"], nodes) + tf.cast(
            bucket > tf.gather(ensemble["threshold"], nodes), tf.int32
        )
        nodes = tf.where(feature < 0, nodes, child)
    return nodes


def logits_of(ensemble: Dict[str, tf.Tensor], nodes: tf.Tensor) -> tf.Tensor:
    """The sum of the leaves' values over the trees: float32 [batch, logits_dimension]."""
    dimension = ensemble["value"].shape[-1] if ensemble["value"].shape.rank else None
    logits = tf.reduce_sum(tf.gather(ensemble["value"], nodes), axis=1)
    logits.set_shape([None, dimension])
    return logits


def layer_stats(
    ensemble: Dict[str, tf.Tensor],
    nodes: tf.Tensor,
    buckets: tf.Tensor,
    gradients: tf.Tensor,
    hessians: tf.Tensor,
    num_buckets: int,
) -> tf.Tensor:
    """Gradients and hessians summed per node of the last layer, feature and bucket: float32
    [L, F, num_buckets, 2 * logits_dimension] (gradients first). Examples in leaves that the last layer did not
    reach (their node stopped splitting earlier) count nowhere."""
    start, end = ensemble["layer"][0], ensemble["layer"][1]
    size = end - start
    current = nodes[:, -1]
    in_layer = tf.logical_and(current >= start, current < end)
    local = tf.where(in_layer, current - start, size)  # node `size`: a bin for the rest, dropped below
    num_features = tf.shape(buckets)[1]
    segments = (local[:, tf.newaxis] * num_features + tf.range(num_features)[tf.newaxis, :]) * num_buckets + buckets
    per_example = tf.concat([gradients, hessians], axis=1)
    dims = tf.shape(per_example)[1]
    values = tf.reshape(tf.tile(per_example[:, tf.newaxis, :], [1, num_features, 1]), [-1, dims])
    sums = tf.math.unsorted_segment_sum(values, tf.reshape(segments, [-1]), (size + 1) * num_features * num_buckets)
    return tf.reshape(sums, [size + 1, num_features, num_buckets, dims])[:size]


def _shrunk(g: tf.Tensor, l1: float) -> tf.Tensor:
    return tf.sign(g) * tf.maximum(tf.abs(g) - l1, 0.0) if l1 else g


def leaf_weight(g: tf.Tensor, h: tf.Tensor, params: TreeParams) -> tf.Tensor:
    """The Newton step of a leaf with gradient sum `g` and hessian sum `h` (l1 shrinks g, l2 adds to h)."""
    return -tf.math.divide_no_nan(_shrunk(g, params.l1), h + params.l2)


def _score(g: tf.Tensor, h: tf.Tensor, params: TreeParams) -> tf.Tensor:
    shrunk = _shrunk(g, params.l1)
    return tf.reduce_sum(tf.math.divide_no_nan(shrunk * shrunk, h + params.l2), axis=-1)


def best_splits(stats: tf.Tensor, params: TreeParams) -> Dict[str, tf.Tensor]:
    """For each node of the layer: whether it splits, and its best split's feature, threshold, gain and the two
    children's Newton steps."""
    d = params.logits_dimension
    g, h = stats[..., :d], stats[..., d:]
    g_left, h_left = tf.cumsum(g, axis=2), tf.cumsum(h, axis=2)
    g_total, h_total = g_left[:, :, -1:, :], h_left[:, :, -1:, :]
    g_right, h_right = g_total - g_left, h_total - h_left
    gains = (_score(g_left, h_left, params) + _score(g_right, h_right, params)
             - _score(g_total, h_total, params) - params.tree_complexity)
    # A node splits when its hessian sum is at least min_node_weight, into two children that both hold some.
    weight = tf.reduce_sum(h_total, axis=-1)
    valid = tf.logical_and(
        tf.logical_and(tf.reduce_sum(h_left, axis=-1) > 0.0, tf.reduce_sum(h_right, axis=-1) > 0.0),
        weight >= params.min_node_weight,
    )
    masked = tf.where(valid, gains, tf.fill(tf.shape(gains), float("-inf")))
    size, num_features, num_buckets = tf.shape(stats)[0], tf.shape(stats)[1], tf.shape(stats)[2]
    flat = tf.reshape(masked, [size, num_features * num_buckets])
    best = tf.argmax(flat, axis=1, output_type=tf.int32)
    best_gain = tf.reduce_max(flat, axis=1)
    splits = tf.math.is_finite(best_gain)
    if params.pruning_mode == "pre":
        splits = tf.logical_and(splits, best_gain > 0.0)
    index = tf.stack([tf.range(size), best // num_buckets, best % num_buckets], axis=1)
    return {
        "splits": splits,
        "feature": best // num_buckets,
        "threshold": best % num_buckets,
        "gain": tf.where(splits, best_gain, tf.zeros_like(best_gain)),
        "left_step": leaf_weight(tf.gather_nd(g_left, index), tf.gather_nd(h_left, index), params),
        "right_step": leaf_weight(tf.gather_nd(g_right, index), tf.gather_nd(h_right, index), params),
    }


def _prune(ensemble: Dict[str, tf.Tensor], root: tf.Tensor, max_depth: int) -> tf.Tensor:
    """Post-pruning of the tree rooted at `root` (its nodes are those from root on): bottom-up, a split whose gain
    is negative and whose children are both leaves is undone. Returns the new `feature`."""
    feature, left, gain = ensemble["feature"], ensemble["left"], ensemble["gain"]
    ids = tf.range(tf.shape(feature)[0])
    for _ in range(max_depth):
        internal = feature >= 0
        left_child = tf.where(internal, left, tf.zeros_like(left))
        right_child = tf.where(internal, left + 1, tf.zeros_like(left))
        both_leaves = tf.logical_and(tf.gather(feature, left_child) < 0, tf.gather(feature, right_child) < 0)
        prune = tf.logical_and(tf.logical_and(internal, both_leaves), tf.logical_and(gain < 0.0, ids >= root))
        feature = tf.where(prune, -tf.ones_like(feature), feature)
    return feature


def grow_layer(
    ensemble: Dict[str, tf.Tensor], stats: tf.Tensor, params: TreeParams
) -> Dict[str, tf.Tensor]:
    """The ensemble with the last layer's best splits made; the tree is complete when no node splits or it is
    `max_depth` deep, and then the next tree begins (unless `n_trees` are complete)."""
    found = best_splits(stats, params)
    start = ensemble["layer"][0]
    split_local = tf.cast(tf.reshape(tf.where(found["splits"]), [-1]), tf.int32)
    count = tf.shape(split_local)[0]
    size = tf.shape(ensemble["feature"])[0]
    parents = start + split_local
    children = size + 2 * tf.range(count)
    at = parents[:, tf.newaxis]

    def updated(key: str, new_values: tf.Tensor) -> tf.Tensor:
        return tf.tensor_scatter_nd_update(ensemble[key], at, new_values)

    parent_values = tf.gather(ensemble["value"], parents)
    lr = params.learning_rate
    child_values = tf.reshape(
        tf.stack([parent_values + lr * tf.gather(found["left_step"], split_local),
                  parent_values + lr * tf.gather(found["right_step"], split_local)], axis=1),
        [-1, params.logits_dimension],
    )
    grown = {
        "feature": tf.concat([updated("feature", tf.gather(found["feature"], split_local)),
                              -tf.ones([2 * count], tf.int32)], axis=0),
        "threshold": tf.concat([updated("threshold", tf.gather(found["threshold"], split_local)),
                                tf.zeros([2 * count], tf.int32)], axis=0),
        "left": tf.concat([updated("left", children), tf.zeros([2 * count], tf.int32)], axis=0),
        "gain": tf.concat([updated("gain", tf.gather(found["gain"], split_local)), tf.zeros([2 * count])], axis=0),
        "value": tf.concat([ensemble["value"], child_values], axis=0),
        "roots": ensemble["roots"],
        "finalized": ensemble["finalized"],
        "depth": ensemble["depth"] + 1,
        "layer": tf.stack([size, size + 2 * count]),
    }
    complete = tf.logical_or(tf.equal(count, 0), grown["depth"] >= params.max_depth)
    return tf.cond(complete, lambda: _complete_tree(grown, params), lambda: grown)


def _complete_tree(ensemble: Dict[str, tf.Tensor], params: TreeParams) -> Dict[str, tf.Tensor]:
    out = dict(ensemble)
    if params.pruning_mode == "post":
        out["feature"] = _prune(ensemble, ensemble["roots"][-1], params.max_depth)
    out["finalized"] = ensemble["finalized"] + 1
    out["depth"] = tf.constant(0, tf.int32)
    size = tf.shape(ensemble["feature"])[0]

    def begin_tree() -> Dict[str, tf.Tensor]:
        begun = dict(out)
        begun["feature"] = tf.concat([out["feature"], [-1]], axis=0)
        begun["threshold"] = tf.concat([out["threshold"], [0]], axis=0)
        begun["left"] = tf.concat([out["left"], [0]], axis=0)
        begun["gain"] = tf.concat([out["gain"], [0.0]], axis=0)
        begun["value"] = tf.concat([out["value"], tf.zeros([1, params.logits_dimension])], axis=0)
        begun["roots"] = tf.concat([out["roots"], [size]], axis=0)
        begun["layer"] = tf.stack([size, size + 1])
        return begun

    def done() -> Dict[str, tf.Tensor]:
        finished = dict(out)
        finished["layer"] = tf.stack([size, size])
        return finished

    return tf.cond(out["finalized"] < params.n_trees, begin_tree, done)


def center_bias(
    ensemble: Dict[str, tf.Tensor], stats: tf.Tensor, params: TreeParams
) -> Tuple[Dict[str, tf.Tensor], tf.Tensor]:
    """A Newton step of the first tree's root value (the bias) from the root's statistics; and whether the bias
    has converged (the step was small)."""
    d = params.logits_dimension
    totals = tf.reduce_sum(stats[0, 0], axis=0)  # every example is in the root, every bucket of feature 0
    step = leaf_weight(totals[:d], totals[d:], params)
    out = dict(ensemble)
    out["value"] = tf.tensor_scatter_nd_add(ensemble["value"], [[0]], step[tf.newaxis, :])
    return out, tf.reduce_max(tf.abs(step)) < _CENTER_BIAS_TOLERANCE


def is_complete(ensemble: Dict[str, tf.Tensor], params: TreeParams) -> tf.Tensor:
    return ensemble["finalized"] >= params.n_trees
