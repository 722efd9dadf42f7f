"""The on-disk dataset cache: written once, reused by later trials, shuffled with the seed, sharded, atomic."""
import pathlib
import threading
from typing import Any, List

import numpy as np
import pytest
import tensorflow as tf

from determined import common
from determined.tensorflow import cache_dataset, cache_path
from tests.keras import _keras_trials as trials


def _counting(counter: pathlib.Path, n: int = 10) -> Any:
    def make() -> tf.data.Dataset:
        counter.write_text(str(int(counter.read_text() or 0) + 1) if counter.exists() else "1")
        return tf.data.Dataset.range(n)
    return make


def _values(ds: tf.data.Dataset) -> List[int]:
    return [int(v) for v in ds]


def _cached(shuffle: bool = False, skip: bool = False, seed: int = 1, shard: int = 0, shards: int = 1) -> Any:
    return cache_dataset("numbers", "v1", split="train", shuffle=shuffle, skip_shuffle_at_epoch_end=skip,
                         seed=seed, shard_index=shard, num_shards=shards)


def test_first_call_materialises_later_calls_load(tmp_path: pathlib.Path) -> None:
    counter = tmp_path / "calls"
    first = _cached()(_counting(counter))()
    second = _cached()(_counting(counter))()
    assert counter.read_text() == "1"
    assert _values(first) == _values(second) == list(range(10))
    path = cache_path("numbers", "v1", "train")
    assert path == common.data_dir() / "dataset_cache" / "numbers" / "v1" / "train" and path.is_dir()
    assert [p.name for p in path.parent.iterdir()] == ["train"], "no temporary directory is left behind"


def test_shuffle_seed_epochs_and_shards(tmp_path: pathlib.Path) -> None:
    make = _counting(tmp_path / "calls", 20)
    ds = _cached(shuffle=True, seed=1)(make)()
    epoch1, epoch2 = _values(ds), _values(ds)
    assert sorted(epoch1) == list(range(20)) and epoch1 != list(range(20))
    assert epoch1 != epoch2, "reshuffled at each epoch"
    assert _values(_cached(shuffle=True, seed=1)(make)()) == epoch1, "the same seed gives the same order"
    assert _values(_cached(shuffle=True, seed=2)(make)()) != epoch1
    fixed = _cached(shuffle=True, skip=True, seed=1)(make)()
    assert _values(fixed) == _values(fixed), "skip_shuffle_at_epoch_end keeps one order"
    shards = [_values(_cached(shard=i, shards=3)(make)()) for i in range(3)]
    assert shards == [list(range(0, 20, 3)), list(range(1, 20, 3)), list(range(2, 20, 3))]


def test_a_failed_write_leaves_no_cache(tmp_path: pathlib.Path) -> None:
    def broken() -> tf.data.Dataset:
        return tf.data.Dataset.range(10).map(lambda v: tf.debugging.assert_less(v, tf.constant(5, tf.int64)) and v)

    with pytest.raises(tf.errors.InvalidArgumentError):
        _cached()(broken)()
    parent = cache_path("numbers", "v1", "train").parent
    assert not parent.exists() or list(parent.iterdir()) == []
    assert _values(_cached()(_counting(tmp_path / "calls"))()) == list(range(10))


def test_concurrent_first_calls_give_one_complete_cache(tmp_path: pathlib.Path) -> None:
    results: List[List[int]] = []
    make = _counting(tmp_path / "calls", 50)
    threads = [threading.Thread(target=lambda: results.append(_values(_cached()(make)()))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [list(range(50))] * 3
    assert [p.name for p in cache_path("numbers", "v1", "train").parent.iterdir()] == ["train"]


def test_bad_names_and_non_datasets_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="dataset_id '../x' cannot name a dataset cache"):
        cache_dataset("../x", "v1", split="train", shuffle=False, skip_shuffle_at_epoch_end=False, seed=0)
    with pytest.raises(ValueError, match="split 'test' is not one of train, validation"):
        cache_dataset("x", "v1", split="test", shuffle=False, skip_shuffle_at_epoch_end=False, seed=0)
    with pytest.raises(TypeError, match="must return a tf.data.Dataset"):
        _cached()(lambda: [1, 2, 3])()


class CachedTrial(trials.ArrayTrial):
    """Both datasets through context.experimental's cache decorators; counts the builds in a file."""

    counter = pathlib.Path("builds")

    def _counted(self, x: np.ndarray, y: np.ndarray) -> tf.data.Dataset:
        counter = self.counter
        counter.write_text(str(int(counter.read_text()) + 1) if counter.exists() else "1")
        return tf.data.Dataset.from_tensor_slices((x, y))

    def build_training_data_loader(self) -> Any:
        @self.context.experimental.cache_train_dataset("toy", "v1", shuffle=True)
        def make() -> tf.data.Dataset:
            return self._counted(*trials.make_data(0))

        return make().batch(self.context.get_per_slot_batch_size())

    def build_validation_data_loader(self) -> Any:
        @self.context.experimental.cache_validation_dataset("toy", "v1")
        def make() -> tf.data.Dataset:
            return self._counted(*trials.make_data(1, 32))

        return make().batch(16)


def test_second_trial_hits_the_cache(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CachedTrial, "counter", tmp_path / "builds")
    first = trials.run_trial(CachedTrial, tmp_path / "a", [16])
    assert CachedTrial.counter.read_text() == "2"  # train + validation, once each
    second = trials.run_trial(CachedTrial, tmp_path / "b", [16], seed=4)
    assert CachedTrial.counter.read_text() == "2"
    assert (common.data_dir() / "dataset_cache" / "toy" / "v1" / "validation").is_dir()
    for ctx in (first, second):
        history = ctx.train.training_history
        assert history[-1]["metrics"]["loss"] < history[0]["metrics"]["loss"]
