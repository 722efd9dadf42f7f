"""det.pytorch.DataLoader: a drop-in torch DataLoader that the controller can repeat, shard and skip into.

The controller turns it into a torch loader over an index stream whose every batch is a function of
(seed, epoch, position in epoch) only: epoch ``e`` of a shuffled loader is the permutation drawn from a
generator seeded with the trial seed and ``e``. Skipping ``k`` batches on resume therefore lands on
exactly the batch that would have come next, without reading the skipped ones.
"""
import abc
import math
from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence

import numpy as np
import torch
import torch.utils.data

from determined import errors

_MASK63 = (1 << 63) - 1


def _epoch_seed(seed: int, epoch: int) -> int:
    """A seed per (trial seed, epoch), well spread so neighbouring epochs share nothing."""
    mixed = (seed * 0x9E3779B97F4A7C15 + (epoch + 1) * 0xBF58476D1CE4E5B9) & _MASK63
    mixed ^= mixed >> 31
    return (mixed * 0x94D049BB133111EB) & _MASK63


class _EpochSource(abc.ABC):
    """The batches (lists of indices; single indices without auto-batching) of each epoch."""

    @abc.abstractmethod
    def epoch_len(self) -> Optional[int]:
        """Batches per epoch, None when the sampler has no length."""

    @abc.abstractmethod
    def stream(self, start: int, step: int, repeat: bool) -> Iterator[Any]:
        """Global batches start, start+step, start+2*step, ...; one epoch only unless `repeat`."""


class _IndexOrder(_EpochSource):
    """The default order of a map-style dataset: sequential, or a per-epoch seeded permutation."""

    def __init__(self, size: int, batch_size: Optional[int], drop_last: bool, shuffle: bool, seed: int) -> None:
        self._size = size
        self._batch_size = batch_size
        self._drop_last = drop_last
        self._shuffle = shuffle
        self._seed = seed
        self._order_epoch: Optional[int] = None
        self._order: List[int] = []

    def epoch_len(self) -> int:
        if self._batch_size is None:
            return self._size
        if self._drop_last:
            return self._size // self._batch_size
        return math.ceil(self._size / self._batch_size)

    def _epoch_order(self, epoch: int) -> List[int]:
        if self._order_epoch != epoch:
            if self._shuffle:
                generator = torch.Generator().manual_seed(_epoch_seed(self._seed, epoch))
                self._order = torch.randperm(self._size, generator=generator).tolist()
            else:
                self._order = list(range(self._size))
            self._order_epoch = epoch
        return self._order

    def stream(self, start: int, step: int, repeat: bool) -> Iterator[Any]:
        length = self.epoch_len()
        if length == 0:
            raise errors.InvalidTrialError(
                f"the data loader yields no batches: {self._size} records with batch_size={self._batch_size} "
                f"and drop_last={self._drop_last}; use a smaller batch size or more data"
            )
        position = start
        order_epoch, order = -1, []
        while True:
            epoch, index = divmod(position, length)
            if epoch > 0 and not repeat:
                return
            if epoch != order_epoch:
                order, order_epoch = self._epoch_order(epoch), epoch
            if self._batch_size is None:
                yield order[index]
            else:
                yield order[index * self._batch_size : (index + 1) * self._batch_size]
            position += step


class _SamplerOrder(_EpochSource):
    """The order of a user's sampler or batch_sampler, re-iterated every epoch (set_epoch called if it has one)."""

    def __init__(self, batches: Iterable[Any], epoch_hooks: Sequence[Any]) -> None:
        self._batches = batches
        self._epoch_hooks = epoch_hooks

    def epoch_len(self) -> Optional[int]:
        try:
            return len(self._batches)  # type: ignore[arg-type]
        except TypeError:
            return None

    def stream(self, start: int, step: int, repeat: bool) -> Iterator[Any]:
        length = self.epoch_len()
        epoch, first = 0, 0
        if repeat and length:
            epoch = start // length
            first = epoch * length
        while True:
            for hook in self._epoch_hooks:
                hook.set_epoch(epoch)
            count = 0
            for count, batch in enumerate(self._batches, start=1):
                position = first + count - 1
                if position >= start and (position - start) % step == 0:
                    yield batch
            if count == 0:
                raise errors.InvalidTrialError("the data loader's sampler yields no batches in an epoch")
            if not repeat:
                return
            first += count
            epoch += 1


class _StreamSampler(torch.utils.data.Sampler):
    """A (batch) sampler over one rank's share of the stream, after `skip` of its batches."""

    def __init__(self, source: _EpochSource, repeat: bool, skip: int, num_replicas: int, rank: int) -> None:
        self._source = source
        self._repeat = repeat
        self._start = skip * num_replicas + rank
        self._step = num_replicas

    def __iter__(self) -> Iterator[Any]:
        return self._source.stream(self._start, self._step, self._repeat)

    def __len__(self) -> int:
        length = self._source.epoch_len()
        if self._repeat or length is None:
            raise TypeError("a repeating data loader has no length")
        return max(0, math.ceil((length - self._start) / self._step))


class _IterableStream:
    """Repeat, shard and skip for a loader over an IterableDataset (which has no indices to sample)."""

    def __init__(self, loader: torch.utils.data.DataLoader, repeat: bool, skip: int, num_replicas: int, rank: int):
        self.loader = loader
        self.dataset = loader.dataset
        self._repeat = repeat
        self._start = skip * num_replicas + rank
        self._step = num_replicas

    def __iter__(self) -> Iterator[Any]:
        position = 0
        while True:
            count = 0
            for batch in self.loader:
                count += 1
                if position >= self._start and (position - self._start) % self._step == 0:
                    yield batch
                position += 1
            if count == 0:
                raise errors.InvalidTrialError("the IterableDataset of the data loader yields no batches")
            if not self._repeat:
                return

    def __len__(self) -> int:
        if self._repeat:
            raise TypeError("a repeating data loader has no length")
        return max(0, math.ceil((len(self.loader) - self._start) / self._step))


class DataLoader:
    """A drop-in replacement for torch.utils.data.DataLoader: same arguments, same defaults, same iteration.

    It stores its arguments so that Determined can rebuild it as a repeating loader that skips the
    batches already trained on resume and gives each slot its own share of the batches. Epochs of a
    shuffled loader are drawn from the trial seed, so every run of a trial sees the same order.
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: Optional[int] = 1,
        shuffle: Optional[bool] = None,
        sampler: Any = None,
        batch_sampler: Any = None,
        num_workers: int = 0,
        collate_fn: Optional[Callable] = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Optional[Callable] = None,
        multiprocessing_context: Any = None,
        generator: Any = None,
        *,
        prefetch_factor: Optional[int] = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
    ) -> None:
        # Building the torch loader checks the arguments exactly as torch does, and serves plain iteration.
        self._torch_loader = torch.utils.data.DataLoader(
            dataset,
            batch_size=batch_size,
            shuffle=shuffle,
            sampler=sampler,
            batch_sampler=batch_sampler,
            num_workers=num_workers,
            collate_fn=collate_fn,
            pin_memory=pin_memory,
            drop_last=drop_last,
            timeout=timeout,
            worker_init_fn=worker_init_fn,
            multiprocessing_context=multiprocessing_context,
            generator=generator,
            prefetch_factor=prefetch_factor,
            persistent_workers=persistent_workers,
            pin_memory_device=pin_memory_device,
            in_order=in_order,
        )
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = bool(shuffle)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.collate_fn = collate_fn
        self.pin_memory = pin_memory
        self.drop_last = drop_last
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.pin_memory_device = pin_memory_device
        self.in_order = in_order

    def __len__(self) -> int:
        return len(self._torch_loader)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._torch_loader)

    def _is_iterable_dataset(self) -> bool:
        return isinstance(self.dataset, torch.utils.data.IterableDataset)

    def _source(self, seed: int) -> _EpochSource:
        if self.batch_sampler is not None:
            candidates = (self.batch_sampler, getattr(self.batch_sampler, "sampler", None))
            return _SamplerOrder(self.batch_sampler, [s for s in candidates if hasattr(s, "set_epoch")])
        if self.sampler is not None:
            batches: Iterable[Any] = self.sampler
            if self.batch_size is not None:
                batches = torch.utils.data.BatchSampler(self.sampler, self.batch_size, self.drop_last)
            hooks = [self.sampler] if hasattr(self.sampler, "set_epoch") else []
            return _SamplerOrder(batches, hooks)
        if self.generator is not None:
            seed = _epoch_seed(seed, self.generator.initial_seed())
        return _IndexOrder(len(self.dataset), self.batch_size, self.drop_last, self.shuffle, seed)

    def _loader_kwargs(self, seed: int) -> dict:
        return dict(
            num_workers=self.num_workers,
            collate_fn=self.collate_fn,
            pin_memory=self.pin_memory,
            timeout=self.timeout,
            worker_init_fn=self.worker_init_fn,
            multiprocessing_context=self.multiprocessing_context,
            # A private generator: creating an iterator then never draws from the global torch RNG,
            # whose state a checkpoint restores.
            generator=torch.Generator().manual_seed(_epoch_seed(seed, -1)),
            prefetch_factor=self.prefetch_factor,
            persistent_workers=self.persistent_workers,
            pin_memory_device=self.pin_memory_device,
            in_order=self.in_order,
        )

    def get_data_loader(
        self, repeat: bool = False, skip: int = 0, num_replicas: int = 1, rank: int = 0, seed: int = 0
    ) -> Iterable[Any]:
        """A torch loader over this rank's batches: rank r takes batches r, r+N, ... of the (repeated) stream,
        after skipping its first `skip` batches."""
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise errors.DeterminedError(f"get_data_loader: rank {rank} is not in [0, {num_replicas})")
        if skip < 0:
            raise errors.DeterminedError(f"get_data_loader: skip must be >= 0, got {skip}")
        kwargs = self._loader_kwargs(seed)
        if self._is_iterable_dataset():
            loader = torch.utils.data.DataLoader(
                self.dataset, batch_size=self.batch_size, drop_last=self.drop_last, **kwargs
            )
            if not repeat and skip == 0 and num_replicas == 1:
                return loader
            return _IterableStream(loader, repeat, skip, num_replicas, rank)
        sampler = _StreamSampler(self._source(seed), repeat, skip, num_replicas, rank)
        if self.batch_size is None and self.batch_sampler is None:
            return torch.utils.data.DataLoader(self.dataset, batch_size=None, sampler=sampler, **kwargs)
        return torch.utils.data.DataLoader(self.dataset, batch_sampler=sampler, **kwargs)

    def per_rank_len(self, num_replicas: int = 1) -> int:
        """Batches per epoch on one of `num_replicas` ranks (at least 1)."""
        return max(1, len(self) // num_replicas)


def data_length(data: Any) -> int:
    """The number of records in a batch: the length of its first tensor or array (looking into dicts, lists and
    tuples in order)."""
    if isinstance(data, (torch.Tensor, np.ndarray)):
        if data.ndim == 0:
            raise errors.InvalidTrialError("a batch made of a 0-dimensional tensor has no length (no records)")
        return int(data.shape[0])
    if isinstance(data, dict) and data:
        return data_length(next(iter(data.values())))
    if isinstance(data, (list, tuple)) and data:
        return data_length(data[0])
    raise errors.InvalidTrialError(
        f"cannot tell how many records a batch of type {type(data).__name__} holds; override "
        "get_batch_length(batch) in the trial to say"
    )
