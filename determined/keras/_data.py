"""The five kinds of tf.keras data loaders, and the streams of training batches built from them.

A training stream knows its position (batches since the start of the trial), so the controller can put
it back exactly where a checkpoint left it: arrays and Sequences resume at the exact batch; a
`tf.data.Dataset` starts again from its beginning (see the TFKerasTrial docs).
"""
import collections
import concurrent.futures
import inspect
import logging
import math
import multiprocessing
from typing import Any, Deque, Dict, Iterator, List, Optional, Tuple, Union

import numpy as np
import tensorflow as tf

from determined import errors

logger = logging.getLogger("determined.keras")

LOADER_KINDS = (
    "a tuple (x, y) or (x, y, sample_weights) of numpy arrays (x may be a list or a dict of arrays), "
    "a tf.data.Dataset, a tf.keras.utils.Sequence, or a det.keras.SequenceAdapter"
)


class SequenceAdapter:
    """A class to assist to optimize performance of tf.keras.sequence and help with restoring and saving
    iterators for a dataset.

    Batches are read ahead by `workers` background threads, or processes when `use_multiprocessing`
    (then the Sequence must be usable in a forked child), at most `max_queue_size` batches ahead; with
    `workers=0` they are read in the main thread. Its position is saved with each checkpoint.
    """

    def __init__(
        self,
        data: tf.keras.utils.Sequence,
        use_multiprocessing: bool = False,
        workers: int = 1,
        max_queue_size: int = 10,
    ) -> None:
        """Multiprocessing or multithreading for native Python generators is not supported. If you want
        these performance accelerations, please consider using a Sequence.

        Args:
            data: A tf.keras.utils.Sequence that holds the data.
            use_multiprocessing: If True, use process-based threading. Defaults to False.
            workers: Maximum number of processes (or threads) to spin up. If 0, the data loading runs on
                the main thread. Defaults to 1.
            max_queue_size: Maximum size for the generator queue. Defaults to 10.
        """
        if inspect.isgenerator(data) or (hasattr(data, "__next__") and not hasattr(data, "__getitem__")):
            raise errors.InvalidTrialError(
                "SequenceAdapter takes a tf.keras.utils.Sequence, got a Python generator/iterator: generators "
                "cannot be read ahead by workers nor resumed at a batch; turn it into a tf.keras.utils.Sequence "
                "(__len__ and __getitem__(index))"
            )
        if not isinstance(data, tf.keras.utils.Sequence):
            raise errors.InvalidTrialError(
                f"SequenceAdapter takes a tf.keras.utils.Sequence, got {type(data).__name__}"
            )
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
            raise errors.InvalidTrialError(f"SequenceAdapter: workers must be an int >= 0, got {workers!r}")
        if isinstance(max_queue_size, bool) or not isinstance(max_queue_size, int) or max_queue_size < 1:
            raise errors.InvalidTrialError(
                f"SequenceAdapter: max_queue_size must be an int >= 1, got {max_queue_size!r}"
            )
        self.sequence = data
        self.use_multiprocessing = bool(use_multiprocessing)
        self.workers = workers
        self.max_queue_size = max_queue_size
        self.position = 0  # batches handed out since the start of the trial

    def __len__(self) -> int:
        return len(self.sequence)


class ArraySequence(tf.keras.utils.Sequence):
    """Batches of in-memory arrays; for training, a fresh permutation per epoch drawn from (seed, epoch)."""

    def __init__(
        self,
        x: Any,
        y: Any,
        sample_weight: Optional[Any],
        batch_size: int,
        shuffle: bool,
        seed: int,
        where: str,
    ) -> None:
        super().__init__()
        self.x = _inputs(x, where)
        self.y = _array(y, f"{where}: y")
        self.sample_weight = None if sample_weight is None else _array(sample_weight, f"{where}: sample_weights")
        self.n = len(self.y)
        for name, arr in _named_arrays(self.x, self.sample_weight):
            if len(arr) != self.n:
                raise errors.InvalidTrialError(
                    f"{where}: {name} has {len(arr)} rows but y has {self.n}; every array needs one row per record"
                )
        if self.n == 0:
            raise errors.InvalidTrialError(f"{where}: the arrays are empty; give at least one record")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise errors.InvalidTrialError(f"{where}: the batch size must be an int >= 1, got {batch_size!r}")
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = int(seed)
        self.epoch = 0
        self._order = self._permutation()

    def _permutation(self) -> np.ndarray:
        if not self.shuffle:
            return np.arange(self.n)
        return np.random.RandomState((self.seed + 7919 * self.epoch) % 2**32).permutation(self.n)

    def __len__(self) -> int:
        return math.ceil(self.n / self.batch_size)

    def __getitem__(self, index: int) -> Tuple[Any, ...]:
        rows = self._order[index * self.batch_size:(index + 1) * self.batch_size]
        batch = (_take(self.x, rows), self.y[rows])
        if self.sample_weight is not None:
            batch += (self.sample_weight[rows],)
        return batch

    def on_epoch_end(self) -> None:
        self.epoch += 1
        self._order = self._permutation()


def _array(value: Any, where: str) -> np.ndarray:
    try:
        arr = np.asarray(value)
    except Exception as e:  # noqa: BLE001 -- anything numpy refuses
        raise errors.InvalidTrialError(f"{where} cannot be turned into a numpy array: {e}") from None
    if arr.ndim == 0:
        raise errors.InvalidTrialError(f"{where} must be an array with one row per record, got a scalar")
    return arr


def _inputs(x: Any, where: str) -> Any:
    if isinstance(x, dict):
        return {str(k): _array(v, f"{where}: x[{k!r}]") for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_array(v, f"{where}: x[{i}]") for i, v in enumerate(x)]
    return _array(x, f"{where}: x")


def _named_arrays(x: Any, sample_weight: Optional[np.ndarray]) -> List[Tuple[str, np.ndarray]]:
    if isinstance(x, dict):
        named = [(f"x[{k!r}]", v) for k, v in x.items()]
    elif isinstance(x, list):
        named = [(f"x[{i}]", v) for i, v in enumerate(x)]
    else:
        named = [("x", x)]
    if sample_weight is not None:
        named.append(("sample_weights", sample_weight))
    return named


def _take(x: Any, rows: np.ndarray) -> Any:
    if isinstance(x, dict):
        return {k: v[rows] for k, v in x.items()}
    if isinstance(x, list):
        return [v[rows] for v in x]
    return x[rows]


class _ArrayLikeAdapter(ArraySequence):
    """Arrays as a ``tf.keras.utils.Sequence`` of batches, in order (the adapter of Determined 0.12/0.13, which
    Native API scripts import): ``x`` an array, a list of arrays or a dict of arrays, ``y`` the targets,
    ``sample_weights`` optional; ``drop_leftovers`` leaves out a last batch smaller than ``batch_size``."""

    def __init__(
        self,
        x: "ArrayLike",
        y: "ArrayLike",
        batch_size: int,
        sample_weights: Optional[np.ndarray] = None,
        drop_leftovers: bool = False,
    ) -> None:
        super().__init__(x, y, sample_weights, batch_size, shuffle=False, seed=0, where="_ArrayLikeAdapter")
        self.drop_leftovers = bool(drop_leftovers)
        if self.drop_leftovers and self.n < self.batch_size:
            raise errors.InvalidTrialError(
                f"_ArrayLikeAdapter: drop_leftovers=True with {self.n} records and batch_size={self.batch_size} "
                "leaves no batch; use a smaller batch size or drop_leftovers=False"
            )

    def __len__(self) -> int:
        return self.n // self.batch_size if self.drop_leftovers else super().__len__()


# The kinds of arrays a loader tuple holds, and the loaders a TFKerasTrial's build_*_data_loader() returns.
ArrayLike = Union[np.ndarray, List[np.ndarray], Dict[str, np.ndarray]]
InputData = Union[tf.keras.utils.Sequence, tf.data.Dataset, SequenceAdapter, tuple]
Loader = Union[ArraySequence, tf.keras.utils.Sequence, SequenceAdapter, tf.data.Dataset]


def _cardinality(dataset: tf.data.Dataset) -> int:
    cardinality = dataset.cardinality()
    if tf.executing_eagerly():
        return int(cardinality)
    return int(tf.compat.v1.keras.backend.get_session().run(cardinality))


def adapt_loader(loader: Any, *, batch_size: Optional[int], training: bool, seed: int, where: str) -> Loader:
    """The loader a trial returned, checked, with a tuple of arrays turned into an ArraySequence."""
    if isinstance(loader, (SequenceAdapter, tf.data.Dataset)):
        if isinstance(loader, tf.data.Dataset) and not training:
            if _cardinality(loader) == tf.data.INFINITE_CARDINALITY:
                raise errors.InvalidTrialError(
                    f"{where} returned an infinite tf.data.Dataset (repeat() without a count); validation "
                    "reads the dataset to its end, so drop the repeat()"
                )
        return loader
    if isinstance(loader, tf.keras.utils.Sequence):
        if len(loader) == 0:
            raise errors.InvalidTrialError(f"{where} returned a Sequence of length 0; it must have batches")
        return loader
    if isinstance(loader, tuple) and len(loader) in (2, 3):
        if batch_size is None:
            raise errors.InvalidTrialError(
                f"{where} returned arrays, which need a batch size: add global_batch_size to the hyperparameters"
            )
        return ArraySequence(
            loader[0], loader[1], loader[2] if len(loader) == 3 else None, batch_size, training, seed, where
        )
    if isinstance(loader, tuple):
        raise errors.InvalidTrialError(
            f"{where} returned a tuple of {len(loader)} items; a tuple loader is (x, y) or (x, y, sample_weights)"
        )
    raise errors.InvalidTrialError(f"{where} returned {type(loader).__name__}, which is not a supported loader: "
                                   f"return {LOADER_KINDS}")


def check_batch(batch: Any, where: str) -> Tuple[Any, ...]:
    """A batch as the tuple (inputs,), (inputs, targets) or (inputs, targets, sample_weights), as Keras reads it:
    a batch that is not a tuple is the inputs alone (for a model whose train_step needs no targets, a GAN say)."""
    if isinstance(batch, list):
        batch = tuple(batch)
    if not isinstance(batch, tuple):
        return (batch,)
    if len(batch) not in (1, 2, 3):
        raise errors.InvalidTrialError(
            f"{where} yielded a tuple of {len(batch)} items; every batch must be a tuple (inputs, targets) or "
            "(inputs, targets, sample_weights), or the inputs alone"
        )
    return batch


class _Prefetcher:
    """Reads the batches start, start + stride, ... (< end) of one epoch of a Sequence ahead, in order, with
    threads or processes."""

    def __init__(self, adapter: SequenceAdapter, start: int, end: int, stride: int = 1) -> None:
        self._adapter = adapter
        self._next_submit = start
        self._end = end
        self._stride = stride
        self._pending: Deque["concurrent.futures.Future[Any]"] = collections.deque()
        self._executor: concurrent.futures.Executor
        if adapter.use_multiprocessing:
            global _FORKED_SEQUENCE
            _FORKED_SEQUENCE = adapter.sequence  # inherited by the forked workers, never pickled
            self._executor = concurrent.futures.ProcessPoolExecutor(
                max_workers=adapter.workers, mp_context=multiprocessing.get_context("fork")
            )
        else:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=adapter.workers, thread_name_prefix="det-sequence"
            )
        self._fill()

    def _fill(self) -> None:
        while self._next_submit < self._end and len(self._pending) < self._adapter.max_queue_size:
            if self._adapter.use_multiprocessing:
                future = self._executor.submit(_forked_item, self._next_submit)
            else:
                future = self._executor.submit(self._adapter.sequence.__getitem__, self._next_submit)
            self._pending.append(future)
            self._next_submit += self._stride

    def get(self) -> Any:
        future = self._pending.popleft()
        self._fill()
        return future.result()

    def close(self) -> None:
        for future in self._pending:
            future.cancel()
        self._pending.clear()
        self._executor.shutdown(wait=True, cancel_futures=True)


_FORKED_SEQUENCE: Any = None


def _forked_item(index: int) -> Any:
    return _FORKED_SEQUENCE[index]


class GraphDatasetReader:
    """The batches of a tf.data.Dataset in graph mode (eager execution disabled), where a dataset cannot be
    iterated in Python: one initializable iterator in the Keras session's graph, run in that session."""

    def __init__(self, dataset: tf.data.Dataset) -> None:
        self._iterator = tf.compat.v1.data.make_initializable_iterator(dataset)
        self._next = self._iterator.get_next()

    def epoch(self) -> Iterator[Any]:
        """The batches of one pass over the dataset, from its beginning."""
        session = tf.compat.v1.keras.backend.get_session()
        session.run(self._iterator.initializer)
        while True:
            try:
                yield session.run(self._next)
            except tf.errors.OutOfRangeError:
                return


class TrainingStream:
    """Endless training batches, epoch after epoch, from a position given in batches since the trial began.

    `next()` returns `(batch, epoch_idx, index_in_epoch, is_last_of_epoch)`.

    With `size` ranks, a position counts steps (one batch per rank): rank `rank` reads batches
    rank, rank + size, ... of the array or Sequence stream, so that step k trains the batches k*size ..
    k*size + size - 1 of that stream, and epochs and indices passed to callbacks count steps. A
    tf.data.Dataset is read in full by every rank: `context.wrap_dataset` shards it.
    """

    def __init__(self, loader: Loader, where: str, rank: int = 0, size: int = 1) -> None:
        self.loader = loader
        self.where = where
        self.position = 0
        self.rank = rank
        self.size = size
        self._sequence_epoch = 0  # on_epoch_end() calls made so far
        self._epoch_len: Optional[int] = None if isinstance(loader, tf.data.Dataset) else len(loader)
        self._prefetcher: Optional[_Prefetcher] = None
        self._dataset_iter: Optional[Iterator[Any]] = None
        self._peeked: Any = None
        self._dataset_epoch = 0
        self._dataset_index = 0
        self._graph_reader: Optional[GraphDatasetReader] = None

    @property
    def epoch_len(self) -> Optional[int]:
        """Steps per epoch; None for a tf.data.Dataset (its epochs end where its data does)."""
        if self._epoch_len is None:
            return None
        return max(1, self._epoch_len // self.size)

    def seek(self, position: int) -> None:
        """Stand at batch `position` (since the trial began). A Sequence's on_epoch_end() is called once per
        epoch before it, as when those epochs were trained; a tf.data.Dataset starts from its beginning."""
        self.close()
        self.position = int(position)
        if isinstance(self.loader, tf.data.Dataset):
            if position:
                logger.info(
                    "resuming at batch %d: a tf.data.Dataset cannot be restored at a batch, so the training "
                    "dataset starts again from its beginning", position,
                )
            return
        assert self._epoch_len is not None
        self._sequence_epoch = 0
        self._end_epochs((self.position * self.size + self.rank) // self._epoch_len)
        if isinstance(self.loader, SequenceAdapter):
            self.loader.position = self.position

    def _sequence(self) -> Any:
        return self.loader.sequence if isinstance(self.loader, SequenceAdapter) else self.loader

    def next(self) -> Tuple[Tuple[Any, ...], int, int, bool]:
        if isinstance(self.loader, tf.data.Dataset):
            return self._next_from_dataset()
        length = self._epoch_len
        assert length is not None
        read = self.position * self.size + self.rank
        self._end_epochs(read // length)
        batch = self._read(read % length)
        # Epochs of steps, for the callbacks: step k belongs to the epoch of batch k * size.
        epoch = self.position * self.size // length
        index = self.position - -(-epoch * length // self.size)
        last = (self.position + 1) * self.size // length > epoch
        self.position += 1
        if isinstance(self.loader, SequenceAdapter):
            self.loader.position = self.position
        self._end_epochs((read + self.size) // length)
        return check_batch(batch, self.where), epoch, index, last

    def _end_epochs(self, epoch: int) -> None:
        """Call the Sequence's on_epoch_end() until it stands at `epoch` (of its own batches)."""
        while self._sequence_epoch < epoch:
            self._end_prefetch()
            self._sequence().on_epoch_end()
            self._sequence_epoch += 1

    def _read(self, index: int) -> Any:
        loader = self.loader
        if isinstance(loader, SequenceAdapter) and loader.workers > 0:
            if self._prefetcher is None:
                self._prefetcher = _Prefetcher(loader, index, len(loader), self.size)
            return self._prefetcher.get()
        return self._sequence()[index]

    def _end_prefetch(self) -> None:
        if self._prefetcher is not None:
            self._prefetcher.close()
            self._prefetcher = None

    def _next_from_dataset(self) -> Tuple[Tuple[Any, ...], int, int, bool]:
        if self._dataset_iter is None:
            if tf.executing_eagerly():
                self._dataset_iter = iter(self.loader)
            else:
                if self._graph_reader is None:
                    self._graph_reader = GraphDatasetReader(self.loader)
                self._dataset_iter = self._graph_reader.epoch()
            self._peeked = next(self._dataset_iter, None)
            if self._peeked is None:
                raise errors.InvalidTrialError(f"{self.where} returned an empty tf.data.Dataset")
        batch = self._peeked
        self._peeked = next(self._dataset_iter, None)
        epoch, index = self._dataset_epoch, self._dataset_index
        last = self._peeked is None
        if last:
            self._dataset_iter = None
            self._dataset_epoch += 1
            self._dataset_index = 0
        else:
            self._dataset_index += 1
        self.position += 1
        return check_batch(batch, self.where), epoch, index, last

    def state(self) -> Dict[str, Any]:
        return {"position": self.position, "kind": type(self.loader).__name__}

    def close(self) -> None:
        self._end_prefetch()
        self._dataset_iter = None
        self._peeked = None


def evaluate_kwargs(loader: Loader) -> Dict[str, Any]:
    """The arguments of `model.evaluate` that read the whole validation loader."""
    if isinstance(loader, ArraySequence) and not getattr(loader, "drop_leftovers", False):
        kwargs: Dict[str, Any] = {"x": loader.x, "y": loader.y, "batch_size": loader.batch_size}
        if loader.sample_weight is not None:
            kwargs["sample_weight"] = loader.sample_weight
        return kwargs
    if isinstance(loader, SequenceAdapter):
        return {
            "x": loader.sequence,
            "workers": loader.workers,
            "use_multiprocessing": loader.use_multiprocessing,
            "max_queue_size": loader.max_queue_size,
        }
    return {"x": loader}


def validation_shard(loader: Loader, rank: int, size: int) -> Iterator[Any]:
    """The validation batches of rank `rank` of `size`: batches rank, rank + size, ... of an array or
    Sequence loader, once; a tf.data.Dataset whole (`context.wrap_dataset` shards it)."""
    if isinstance(loader, tf.data.Dataset):
        yield from loader
        return
    sequence = loader.sequence if isinstance(loader, SequenceAdapter) else loader
    for index in range(rank, len(sequence), size):
        yield sequence[index]
