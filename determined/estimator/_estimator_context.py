"""The contexts of tf.estimator workflows: EstimatorTrialContext (Trial API), EstimatorNativeContext (Native API)."""
import functools
import logging
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import tensorflow as tf

from determined import errors
from determined._trial_context import TrialContext
from determined.estimator import _metrics

logger = logging.getLogger("determined.estimator")

_OPTIMIZER_TYPES: Tuple[type, ...] = (tf.compat.v1.train.Optimizer, tf.keras.optimizers.Optimizer)
try:
    _OPTIMIZER_TYPES += (tf.keras.optimizers.legacy.Optimizer,)
except AttributeError:  # a Keras without the legacy optimizers
    pass


# A function that returns the ServingInputReceiver of a SavedModel export (build_serving_input_receiver_fns).
ServingInputReceiverFn = Callable[
    ..., Union[tf.estimator.export.ServingInputReceiver, tf.estimator.export.TensorServingInputReceiver]
]


def _is_dataset(value: Any) -> bool:
    return isinstance(value, (tf.data.Dataset, tf.compat.v1.data.Dataset))


def _in_eager_thread(fn: Callable[[], Any]) -> None:
    """Call `fn` in a fresh thread, where TensorFlow executes eagerly whatever graph this thread builds."""
    failure: List[BaseException] = []

    def target() -> None:
        try:
            fn()
        except BaseException as e:  # noqa: B036 -- re-raised in the calling thread
            failure.append(e)

    thread = threading.Thread(target=target, name="det-dataset-cache")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]


class EstimatorContext(TrialContext):
    """Base context class that contains runtime information for any Determined workflow that uses the
    tf.estimator API: hyperparameters and config, ``context.distributed`` (ranks of the trial's
    processes) and ``context.experimental`` (an EstimatorExperimentalContext)."""

    def __init__(self, core_context: Any, config: Dict[str, Any], hparams: Dict[str, Any], trial_seed: int) -> None:
        super().__init__(core_context, config, hparams, trial_seed)
        self.experimental = EstimatorExperimentalContext(self)
        self.optimizers: List[Any] = []
        self.wrapped_datasets = 0

    def wrap_optimizer(self, optimizer: Any) -> Any:
        """This should be used to wrap optimizer objects immediately after they have been created.

        Use the output of this wrapper as the new instance of your optimizer: for example, if you create
        the optimizer within build_estimator(), call ``optimizer = wrap_optimizer(optimizer)`` before
        passing it to the Estimator. An Estimator without an optimizer (BoostedTrees) may call
        ``wrap_optimizer(None)``, as Determined 0.12-0.20 code did; it returns None.
        """
        if optimizer is None:
            return None
        if not isinstance(optimizer, _OPTIMIZER_TYPES):
            raise errors.InvalidTrialError(
                f"wrap_optimizer() takes a TensorFlow optimizer (tf.compat.v1.train.Optimizer or a "
                f"tf.keras optimizer), got {type(optimizer).__name__}"
            )
        self.optimizers.append(optimizer)
        return optimizer

    def wrap_dataset(self, dataset: Any, shard_dataset: bool = True) -> Any:
        """This should be used to wrap tf.data.Dataset objects immediately after they have been created.

        Use the output of this wrapper as the new instance of your dataset, and wrap each dataset
        (training, validation) independently. With several slots the dataset comes back sharded: each slot
        reads its own part of the records, unless ``shard_dataset`` is False (then shard it yourself).
        """
        if not _is_dataset(dataset):
            raise errors.InvalidTrialError(
                f"wrap_dataset() takes a tf.data.Dataset, got {type(dataset).__name__}"
            )
        self.wrapped_datasets += 1
        if shard_dataset and self.distributed.size > 1:
            dataset = dataset.shard(self.distributed.size, self.distributed.rank)
        return dataset


class EstimatorTrialContext(EstimatorContext):
    """The context passed to an EstimatorTrial's constructor."""


class EstimatorNativeContext(EstimatorContext):
    """The context returned by ``determined.experimental.estimator.init()``.

    Set ``serving_input_receiver_fns`` (a dict of name -> serving_input_receiver_fn) before calling
    ``tf.estimator.train_and_evaluate`` to export SavedModels into every checkpoint, as
    EstimatorTrial.build_serving_input_receiver_fns() does.
    """

    def __init__(self, core_context: Any, config: Dict[str, Any], hparams: Dict[str, Any], trial_seed: int) -> None:
        super().__init__(core_context, config, hparams, trial_seed)
        self.serving_input_receiver_fns: Dict[str, ServingInputReceiverFn] = {}
        # What train_and_evaluate runs: set by determined.experimental.estimator.init().
        self._train_and_evaluate: Optional[Callable[[Any, Any, Any], Any]] = None

    def train_and_evaluate(
        self, estimator: tf.estimator.Estimator, train_spec: tf.estimator.TrainSpec, eval_spec: tf.estimator.EvalSpec
    ) -> Any:
        """Train and validate `estimator` as the experiment's searcher says (Determined 0.12/0.13's call on the
        context; ``tf.estimator.train_and_evaluate`` does the same once ``init()`` returned this context).

        Inside a trial this trains the trial and then ends the process; in local test mode it trains one
        batch, validates and checkpoints, and returns ``(validation_metrics, [])``.
        """
        if self._train_and_evaluate is None:
            raise errors.DeterminedError(
                "train_and_evaluate() is for the context determined.experimental.estimator.init() returns; this "
                "context was made without it"
            )
        return self._train_and_evaluate(estimator, train_spec, eval_spec)


class EstimatorExperimentalContext:
    """Context class that contains experimental runtime information and features for any Determined
    workflow that uses the tf.estimator API (``context.experimental``)."""

    def __init__(self, parent: EstimatorContext) -> None:
        self._parent = parent

    def cache_train_dataset(
        self,
        dataset_id: str,
        dataset_version: str,
        shuffle: bool = False,
        skip_shuffle_at_epoch_end: bool = False,
    ) -> Callable:
        """A decorator for the function that creates your training tf.data.Dataset.

        The dataset is stored in an on-disk cache keyed by ``dataset_id`` and ``dataset_version`` and
        re-used by later calls, in this and other trials. With ``shuffle`` it is shuffled with the trial's
        random seed, again at the end of each epoch unless ``skip_shuffle_at_epoch_end``. Batch and augment
        after caching; there is no need to call ``dataset.repeat()``.
        """
        return self._cache(dataset_id, dataset_version, "train", shuffle, skip_shuffle_at_epoch_end)

    def cache_validation_dataset(self, dataset_id: str, dataset_version: str, shuffle: bool = False) -> Callable:
        """A decorator for the function that creates your validation tf.data.Dataset, cached like
        ``cache_train_dataset``; shuffled with the trial's random seed when ``shuffle``."""
        return self._cache(dataset_id, dataset_version, "validation", shuffle, False)

    def _cache(self, dataset_id: str, dataset_version: str, split: str, shuffle: bool, skip_end: bool) -> Callable:
        from determined.tensorflow import cache_dataset

        parent = self._parent
        decorator = cache_dataset(
            dataset_id,
            dataset_version,
            split=split,
            shuffle=bool(shuffle),
            skip_shuffle_at_epoch_end=bool(skip_end),
            seed=parent.get_trial_seed(),
            shard_index=parent.distributed.rank,
            num_shards=parent.distributed.size,
        )

        def wrap(make_dataset: Callable[[], Any]) -> Callable[[], Any]:
            cached = decorator(make_dataset)

            @functools.wraps(make_dataset)
            def build() -> Any:
                if not tf.executing_eagerly():
                    # An input_fn runs in the Estimator's graph; the cache is written eagerly, outside of it.
                    _in_eager_thread(cached)
                return cached()

            return build

        return wrap

    def make_metric(self, metric: Any, reducer: _metrics.Reducer, numpy_dtype: Any) -> Tuple[Any, Any]:
        """A custom validation metric for the ``eval_metric_ops`` of an EstimatorSpec (call it in the
        model_fn in EVAL mode).

        ``metric`` is a tensor (or a nested structure of tensors) computed for each batch; its values, as
        numpy arrays of ``numpy_dtype``, are passed to the ``reducer``: either a
        det.estimator.MetricReducer (``accumulate`` per batch, ``cross_slot_reduce`` over slots), or a
        function that takes the list of every batch's value and returns the metric (e.g. ``np.mean``).
        Returns the (value_op, update_op) pair that eval_metric_ops expects.
        """
        distributed = self._parent.distributed

        def allgather(obj: Any) -> List[Any]:
            return distributed.allgather(obj) if distributed.size > 1 else [obj]

        return _metrics.make_metric(metric, reducer, numpy_dtype, allgather)
