"""Feature columns of the BoostedTrees Estimators (determined/estimator/_boosted_trees.py) as one matrix of bucket
ids, the input of the trees' splits.

Every feature column becomes one or more scalar features, each a column of an int32 matrix [batch, F]:

* `numeric_column`: one feature per dimension, bucketized by boundaries at the quantiles of the training data (the
  boundaries are computed from the first `n_batches_per_layer` batches and kept in the checkpoint);
* `bucketized_column`: one feature per dimension of its source column, its own bucket ids;
* `indicator_column`: one binary feature per dimension of its one-hot (or multi-hot) encoding.

Columns are taken in the order of their names, as TF 1.x's BoostedTrees Estimators took them.
"""
import dataclasses
from typing import Any, Dict, List, Sequence

import tensorflow as tf
from tensorflow.python.feature_column import feature_column as fc_v1
from tensorflow.python.feature_column import feature_column_v2 as fc_v2

_NUMERIC = (fc_v2.NumericColumn, fc_v1._NumericColumn)
_BUCKETIZED = (fc_v2.BucketizedColumn, fc_v1._BucketizedColumn)
_INDICATOR = (fc_v2.IndicatorColumn, fc_v1._IndicatorColumn)


def _width(column: Any) -> int:
    shape = getattr(column, "shape", None) or (1,)
    width = 1
    for d in shape:
        width *= int(d)
    return width


@dataclasses.dataclass(frozen=True)
class FeatureLayout:
    """Which scalar features the feature columns give: how many come from numeric columns (bucketized by
    quantiles, they come first) and how many buckets each feature has."""

    columns: Sequence[Any]
    num_quantile_features: int
    buckets_per_feature: Sequence[int]
    num_quantiles: int

    @property
    def num_features(self) -> int:
        return len(self.buckets_per_feature)

    @property
    def num_buckets(self) -> int:
        """The buckets of the widest feature (every feature's stats are laid out this wide)."""
        return max(self.buckets_per_feature)

    def column_of_feature(self) -> List[str]:
        """The name of the feature column of each scalar feature, in the order of the matrix's columns."""
        names: List[str] = []
        numeric = [c for c in self.columns if isinstance(c, _NUMERIC)]
        for column in numeric + [c for c in self.columns if not isinstance(c, _NUMERIC)]:
            if isinstance(column, _BUCKETIZED):
                width = _width(column.source_column)
            elif isinstance(column, _INDICATOR):
                width = _indicator_width(column)
            else:
                width = _width(column)
            names.extend([column.name] * width)
        return names


def _indicator_width(column: Any) -> int:
    categorical = column.categorical_column
    return int(getattr(categorical, "num_buckets", None) or categorical._num_buckets)


def layout(feature_columns: Sequence[Any], quantile_sketch_epsilon: float) -> FeatureLayout:
    """The layout of `feature_columns`; a clear error for a column the trees cannot split on."""
    if not feature_columns:
        raise ValueError("BoostedTrees Estimators need at least one feature column (feature_columns is empty)")
    if not 0 < quantile_sketch_epsilon < 1:
        raise ValueError(f"quantile_sketch_epsilon must be in (0, 1), got {quantile_sketch_epsilon}")
    columns = sorted(feature_columns, key=lambda c: c.name)
    num_quantiles = max(1, int(round(1.0 / quantile_sketch_epsilon)))
    numeric: List[int] = []
    other: List[int] = []
    for column in columns:
        if isinstance(column, _NUMERIC):
            numeric.extend([num_quantiles + 1] * _width(column))
        elif isinstance(column, _BUCKETIZED):
            other.extend([len(column.boundaries) + 1] * _width(column.source_column))
        elif isinstance(column, _INDICATOR):
            other.extend([2] * _indicator_width(column))
        else:
            raise ValueError(
                f"BoostedTrees Estimators take numeric_column, bucketized_column and indicator_column feature "
                f"columns; {column.name!r} is a {type(column).__name__}: wrap a categorical column into "
                f"tf.feature_column.indicator_column(...), or bucketize a numeric one"
            )
    return FeatureLayout(columns, len(numeric), numeric + other, num_quantiles)


def _dense(features: Dict[str, Any], column: Any) -> tf.Tensor:
    return tf.compat.v1.feature_column.input_layer(dict(features), [column])


def numeric_values(features: Dict[str, Any], lay: FeatureLayout) -> tf.Tensor:
    """The raw values of the numeric columns' features, float32 [batch, num_quantile_features]."""
    parts = [_dense(features, c) for c in lay.columns if isinstance(c, _NUMERIC)]
    return tf.concat(parts, axis=1) if parts else tf.zeros([0, 0], tf.float32)


def bucket_matrix(features: Dict[str, Any], lay: FeatureLayout, boundaries: tf.Tensor) -> tf.Tensor:
    """Every feature's bucket id, int32 [batch, F]; `boundaries` float32 [num_quantile_features, Q]."""
    parts: List[tf.Tensor] = []
    if lay.num_quantile_features:
        values = numeric_values(features, lay)
        # The number of boundaries below each value: its bucket, 0..Q.
        ids = tf.searchsorted(boundaries, tf.transpose(values), side="left", out_type=tf.int32)
        parts.append(tf.transpose(ids))
    for column in lay.columns:
        if isinstance(column, _BUCKETIZED):
            source = _dense(features, column.source_column)
            parts.append(tf.raw_ops.Bucketize(input=source, boundaries=[float(b) for b in column.boundaries]))
        elif isinstance(column, _INDICATOR):
            parts.append(tf.cast(tf.minimum(_dense(features, column), 1.0), tf.int32))
    return tf.concat(parts, axis=1)


def quantile_boundaries(values: tf.Tensor, num_quantiles: int) -> tf.Tensor:
    """Boundaries at `num_quantiles` evenly spaced quantiles of each column of `values` [n, K]: float32 [K, Q],
    non-decreasing along Q (repeated values give repeated boundaries, whose buckets stay empty)."""
    ordered = tf.sort(values, axis=0)
    n = tf.shape(ordered)[0]
    fractions = tf.range(1, num_quantiles + 1, dtype=tf.float32) / float(num_quantiles + 1)
    positions = tf.cast(tf.round(fractions * tf.cast(tf.maximum(n - 1, 0), tf.float32)), tf.int32)
    return tf.transpose(tf.gather(ordered, positions, axis=0))
