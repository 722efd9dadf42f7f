"""Samplers to build reproducible data loaders by hand (with ``context.experimental.disable_dataset_reproducibility_checks()``).

Each wraps a sampler (indices) or a batch sampler (lists of indices). Chain them in this order: shuffle
(reproducibly, from a seed), then skip what was already trained (``context.get_initial_batch()`` batches),
then repeat; shard for the slots (``Distributed*``) anywhere after the shuffle, never after a repeat of a
sampler whose length differs between slots. ``det.pytorch.DataLoader`` does all of this by itself.
"""
from typing import Any, Iterator, List

import numpy as np
import torch.utils.data

from determined import errors


class RepeatSampler(torch.utils.data.Sampler):
    """The indices of `sampler`, epoch after epoch, forever; its length is one epoch's."""

    def __init__(self, sampler: Any) -> None:
        self._sampler = sampler

    def __len__(self) -> int:
        return len(self._sampler)

    def __iter__(self) -> Iterator[Any]:
        while True:
            count = 0
            for index in self._sampler:
                count += 1
                yield index
            if count == 0:
                return


class RepeatBatchSampler(torch.utils.data.BatchSampler):
    """The batches of `batch_sampler`, epoch after epoch, forever; its length is one epoch's."""

    def __init__(self, batch_sampler: Any) -> None:
        self.batch_sampler = batch_sampler

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def __iter__(self) -> Iterator[List[int]]:
        return RepeatSampler(self.batch_sampler).__iter__()


def _check_shard(num_workers: int, rank: int) -> None:
    if num_workers < 1:
        raise errors.DeterminedError(f"a distributed sampler needs num_workers >= 1, got {num_workers}")
    if not 0 <= rank < num_workers:
        raise errors.DeterminedError(f"a distributed sampler's rank must be in [0, {num_workers}), got {rank}")


def _shard_len(total: int, num_workers: int, rank: int) -> int:
    return total // num_workers + (1 if rank < total % num_workers else 0)


class DistributedSampler(torch.utils.data.Sampler):
    """This slot's share of `sampler`: its items rank, rank + num_workers, rank + 2 * num_workers, ...

    Unlike torch's DistributedSampler it neither shuffles nor pads: it is one link of a chain, over a sampler
    of any kind (even one whose length changes).
    """

    def __init__(self, sampler: Any, num_workers: int, rank: int) -> None:
        _check_shard(num_workers, rank)
        self._sampler = sampler
        self._num_workers = num_workers
        self._rank = rank

    def __len__(self) -> int:
        return _shard_len(len(self._sampler), self._num_workers, self._rank)

    def __iter__(self) -> Iterator[Any]:
        for position, item in enumerate(self._sampler):
            if position % self._num_workers == self._rank:
                yield item


class DistributedBatchSampler(torch.utils.data.BatchSampler):
    """This slot's share of the batches of `batch_sampler`: batches rank, rank + num_workers, ...

    With a batch sampler that does not repeat and whose length is not a multiple of num_workers, the slots
    get different numbers of batches; training always repeats its sampler, so only validation sees it.
    """

    def __init__(self, batch_sampler: Any, num_workers: int, rank: int) -> None:
        _check_shard(num_workers, rank)
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.rank = rank

    def __len__(self) -> int:
        return _shard_len(len(self.batch_sampler), self.num_workers, self.rank)

    def __iter__(self) -> Iterator[List[int]]:
        return DistributedSampler(self.batch_sampler, self.num_workers, self.rank).__iter__()


class SkipSampler(torch.utils.data.Sampler):
    """`sampler` without its first `skip` items (the records already trained). Skip before repeating, or every
    epoch is cut. Prefer SkipBatchSampler: Determined counts batches, so records can be skipped exactly only
    when every batch has the same size. Its length stays that of `sampler`."""

    def __init__(self, sampler: Any, skip: int) -> None:
        if skip < 0:
            raise errors.DeterminedError(f"SkipSampler: skip must be >= 0, got {skip}")
        self._sampler = sampler
        self._skip = skip

    def __len__(self) -> int:
        return len(self._sampler)

    def __iter__(self) -> Iterator[Any]:
        for position, item in enumerate(self._sampler):
            if position >= self._skip:
                yield item


class SkipBatchSampler(torch.utils.data.BatchSampler):
    """`batch_sampler` without its first `skip` batches (``context.get_initial_batch()``). Skip before
    repeating, or every epoch is cut. Its length stays that of `batch_sampler`."""

    def __init__(self, batch_sampler: Any, skip: int) -> None:
        if skip < 0:
            raise errors.DeterminedError(f"SkipBatchSampler: skip must be >= 0, got {skip}")
        self.batch_sampler = batch_sampler
        self.skip = skip

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def __iter__(self) -> Iterator[List[int]]:
        return SkipSampler(self.batch_sampler, self.skip).__iter__()


class ReproducibleShuffleSampler(torch.utils.data.Sampler):
    """The items of `sampler` in an order drawn from `seed`: the same seed gives the same sequence of epochs
    (each epoch a new permutation). Shuffle before skipping and before repeating."""

    def __init__(self, sampler: Any, seed: int) -> None:
        self._sampler = sampler
        self._rng = np.random.RandomState(seed)

    def __len__(self) -> int:
        return len(self._sampler)

    def __iter__(self) -> Iterator[Any]:
        items = list(self._sampler)
        order = self._rng.permutation(len(items))
        return iter([items[i] for i in order])


class ReproducibleShuffleBatchSampler(torch.utils.data.BatchSampler):
    """The batches of `batch_sampler` in an order drawn from `seed` (the contents of each batch stay; prefer
    ReproducibleShuffleSampler under the batch sampler, which varies them). Shuffle before skipping and repeating."""

    def __init__(self, batch_sampler: Any, seed: int) -> None:
        self.batch_sampler = batch_sampler
        self._shuffle = ReproducibleShuffleSampler(batch_sampler, seed)

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def __iter__(self) -> Iterator[List[int]]:
        return self._shuffle.__iter__()


def adapt_batch_sampler(
    batch_sampler: Any, repeat: bool = False, skip: int = 0, num_replicas: int = 1, rank: int = 0
) -> Any:
    """`batch_sampler` as det.pytorch.DataLoader uses it: repeated forever when `repeat`, sharded for
    `num_replicas` slots (this one is `rank`: batches rank, rank + num_replicas, ...), then without the first
    `skip` batches of this slot (those trained before a resume)."""
    if repeat:
        batch_sampler = RepeatBatchSampler(batch_sampler)
    if num_replicas > 1:
        batch_sampler = DistributedBatchSampler(batch_sampler, num_replicas, rank)
    if skip:
        batch_sampler = SkipBatchSampler(batch_sampler, skip)
    return batch_sampler


__all__ = [
    "DistributedBatchSampler",
    "DistributedSampler",
    "RepeatBatchSampler",
    "RepeatSampler",
    "ReproducibleShuffleBatchSampler",
    "ReproducibleShuffleSampler",
    "SkipBatchSampler",
    "SkipSampler",
    "adapt_batch_sampler",
]
