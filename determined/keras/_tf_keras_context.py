"""The contexts of tf.keras trials: TFKerasTrialContext (Trial API), TFKerasNativeContext (Native API), and
the experimental context with the dataset cache."""
import logging
from typing import Any, Callable, Dict, List

import tensorflow as tf

from determined import errors, tensorflow as det_tf
from determined._trial_context import TrialContext

logger = logging.getLogger("determined.keras")


class TFKerasContext:
    """The model and dataset wrappers shared by the tf.keras contexts."""

    def _init_wrappers(self) -> None:
        self._wrapped_models: List[tf.keras.Model] = []
        self._wrapped_optimizers: List[Any] = []
        self._wrapped_datasets = 0

    def wrap_model(self, model: Any) -> Any:
        """This should be used to wrap ``tf.keras.Model`` objects immediately after they have been created
        but before they have been compiled. This function takes a ``tf.keras.Model`` and returns a wrapped
        version of the model; the return value should be used in place of the original model.

        Args:
            model: tf.keras.Model
        """
        if not isinstance(model, tf.keras.Model):
            raise errors.InvalidTrialError(
                f"wrap_model() takes a tf.keras.Model, got {type(model).__name__}"
            )
        if getattr(model, "_is_compiled", False):
            logger.warning(
                "wrap_model() got a model that is already compiled: wrap models right after creating them, "
                "then compile the wrapped model"
            )
        if not any(model is m for m in self._wrapped_models):
            self._wrapped_models.append(model)
        return model

    def wrap_optimizer(self, optimizer: Any) -> Any:
        """This should be used to wrap optimizer objects immediately after they have been created (Determined
        0.14+); use the return value in place of the original optimizer, e.g. in ``model.compile()``.

        With several slots the trial's MultiWorkerMirroredStrategy averages the gradients, so the optimizer comes
        back as it is.

        Args:
            optimizer: a tf.keras optimizer
        """
        kinds: Any = (tf.keras.optimizers.Optimizer, tf.keras.optimizers.legacy.Optimizer)
        if not isinstance(optimizer, kinds):
            raise errors.InvalidTrialError(
                f"wrap_optimizer() takes a tf.keras optimizer (tf.keras.optimizers.* or tf.keras.optimizers.legacy.*), "
                f"got {type(optimizer).__name__}"
            )
        if not any(optimizer is o for o in self._wrapped_optimizers):
            self._wrapped_optimizers.append(optimizer)
        return optimizer

    def wrap_dataset(self, dataset: Any, shard_dataset: bool = True) -> Any:
        """This should be used to wrap ``tf.data.Dataset`` objects immediately after they have been created.
        Users should use the output of this wrapper as the new instance of their dataset. If users create
        multiple datasets (e.g., one for training and one for testing), users should wrap each dataset
        independently.

        With several slots, each slot keeps every `size`-th element (its shard) unless `shard_dataset` is
        False.

        Args:
            dataset: tf.data.Dataset
        """
        if not isinstance(dataset, tf.data.Dataset):
            raise errors.InvalidTrialError(f"wrap_dataset() takes a tf.data.Dataset, got {type(dataset).__name__}")
        self._wrapped_datasets += 1
        distributed = self.distributed  # type: ignore[attr-defined]
        if shard_dataset and distributed.size > 1:
            dataset = dataset.shard(distributed.size, distributed.rank)
        return dataset

    def _is_wrapped(self, model: Any) -> bool:
        return any(model is m for m in self._wrapped_models)


class TFKerasTrialContext(TFKerasContext, TrialContext):
    """The context of a TFKerasTrial: hyperparameters and config (from TrialContext), the model and dataset
    wrappers, `distributed` (ranks of the trial's processes) and `experimental` (the dataset cache)."""

    def __init__(self, core_context: Any, config: Dict[str, Any], hparams: Dict[str, Any], trial_seed: int) -> None:
        TrialContext.__init__(self, core_context, config, hparams, trial_seed)
        self._init_wrappers()
        self.experimental = TFKerasExperimentalContext(self)


class TFKerasExperimentalContext:
    """Context class that contains experimental runtime information and features for any Determined
    workflow that uses the ``tf.keras`` API (``context.experimental``)."""

    def __init__(self, parent: TrialContext) -> None:
        self._parent = parent

    def _cache(self, dataset_id: str, dataset_version: str, split: str, shuffle: bool,
               skip_shuffle_at_epoch_end: bool) -> Callable:
        distributed = self._parent.distributed
        decorator = det_tf.cache_dataset(
            dataset_id,
            dataset_version,
            split=split,
            shuffle=shuffle,
            skip_shuffle_at_epoch_end=skip_shuffle_at_epoch_end,
            seed=self._parent.get_trial_seed(),
            shard_index=distributed.rank,
            num_shards=distributed.size,
        )
        if isinstance(self._parent, TFKerasContext):
            self._parent._wrapped_datasets += 1  # a cached dataset comes back sharded already
        return decorator

    def cache_train_dataset(
        self,
        dataset_id: str,
        dataset_version: str,
        shuffle: bool = False,
        skip_shuffle_at_epoch_end: bool = False,
    ) -> Callable:
        """cache_train_dataset is a decorator for creating your training dataset. It should decorate a
        function that outputs a ``tf.data.Dataset`` object. The dataset will be stored in a cache, keyed by
        ``dataset_id`` and ``dataset_version``. The cache is re-used in subsequent calls.

        Args:
            dataset_id: A string that will be used as part of the unique identifier for this dataset.
            dataset_version: A string that will be used as part of the unique identifier for this dataset.
            shuffle: A bool indicating if the dataset should be shuffled. Shuffling will be performed with
                the trial's random seed which can be set in Experiment Configuration.
            skip_shuffle_at_epoch_end: A bool indicating if shuffling should be skipped at the end of epochs.

        ``dataset.batch()`` and runtime augmentation should be done after caching; ``dataset.repeat()`` is
        never needed.
        """
        return self._cache(dataset_id, dataset_version, "train", shuffle, skip_shuffle_at_epoch_end)

    def cache_validation_dataset(self, dataset_id: str, dataset_version: str, shuffle: bool = False) -> Callable:
        """cache_validation_dataset is a decorator for creating your validation dataset. It should decorate
        a function that outputs a ``tf.data.Dataset`` object. The dataset will be stored in a cache, keyed
        by ``dataset_id`` and ``dataset_version``. The cache is re-used in subsequent calls.

        Args:
            dataset_id: A string that will be used as part of the unique identifier for this dataset.
            dataset_version: A string that will be used as part of the unique identifier for this dataset.
            shuffle: A bool indicating if the dataset should be shuffled. Shuffling will be performed with
                the trial's random seed which can be set in Experiment Configuration.
        """
        return self._cache(dataset_id, dataset_version, "validation", shuffle, True)


class TFKerasNativeContext(TFKerasTrialContext):
    """The context `determined.experimental.keras.init()` returns: wrap the model with `wrap_model`, compile
    it, and call its `fit()`; the platform then trains it as the experiment's searcher says.

    `fit()` of a wrapped model takes Keras' arguments: `x`, `y`, `sample_weight` (arrays, a tf.data.Dataset,
    a Sequence or a det.keras.SequenceAdapter), `batch_size` (used when the hyperparameters have no
    global_batch_size), `validation_data` (required), `callbacks`, and `workers`/`use_multiprocessing`/
    `max_queue_size` for a Sequence; `epochs` and `steps_per_epoch` are ignored (the searcher's max_length
    says how long to train).
    """

    def __init__(self, core_context: Any, config: Dict[str, Any], hparams: Dict[str, Any], trial_seed: int,
                 run_fit: Callable[["TFKerasNativeContext", tf.keras.Model, Dict[str, Any]], Any]) -> None:
        super().__init__(core_context, config, hparams, trial_seed)
        self._run_fit = run_fit

    def wrap_model(self, model: Any) -> Any:
        model = super().wrap_model(model)
        context = self

        def fit(*args: Any, **kwargs: Any) -> Any:
            return context._run_fit(context, model, _fit_arguments(args, kwargs))

        # An instance attribute, so only this model's fit() is taken over.
        object.__setattr__(model, "fit", fit)
        return model


_FIT_PARAMS = (
    "x", "y", "batch_size", "epochs", "verbose", "callbacks", "validation_split", "validation_data", "shuffle",
    "class_weight", "sample_weight", "initial_epoch", "steps_per_epoch", "validation_steps",
    "validation_batch_size", "validation_freq", "max_queue_size", "workers", "use_multiprocessing",
)


def _fit_arguments(args: Any, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    if len(args) > len(_FIT_PARAMS):
        raise errors.InvalidTrialError(f"model.fit() takes at most {len(_FIT_PARAMS)} positional arguments")
    given = dict(zip(_FIT_PARAMS, args))
    for name, value in kwargs.items():
        if name not in _FIT_PARAMS:
            raise errors.InvalidTrialError(f"model.fit() got an unexpected argument {name!r}")
        if name in given:
            raise errors.InvalidTrialError(f"model.fit() got {name!r} twice")
        given[name] = value
    return given
