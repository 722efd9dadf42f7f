"""An on-disk cache of `tf.data.Dataset`s, shared by every trial and experiment on one data dir.

The first call of a decorated dataset function materialises its dataset under
`<data dir>/dataset_cache/<dataset_id>/<dataset_version>/<split>`; every later call, in any process, loads
it from there without calling the function. The dataset is written to a temporary directory beside its
final place and renamed into place only when complete, so a crash or two trials racing never leave a
half-written cache. Elements are stored as TFRecords of serialized tensors with the element spec beside
them, so any dataset of dense tensors (tuples, dicts) can be cached.
"""
import functools
import json
import os
import pickle
import pathlib
import re
import shutil
import uuid
from typing import TYPE_CHECKING, Any, Callable, List, Tuple

from determined import common

if TYPE_CHECKING:
    import tensorflow as tf

SPLITS = ("train", "validation")
# Elements held in the shuffle buffer at most; a cache up to this size is shuffled completely.
MAX_SHUFFLE_BUFFER = 100_000
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_META_FILE = "det_cache_meta.json"


def cache_root() -> pathlib.Path:
    """The directory that holds every cached dataset of this data dir."""
    return common.data_dir() / "dataset_cache"


def cache_path(dataset_id: str, dataset_version: str, split: str) -> pathlib.Path:
    """Where the dataset `dataset_id` / `dataset_version` / `split` is (or will be) cached."""
    for what, value in (("dataset_id", dataset_id), ("dataset_version", dataset_version)):
        if not isinstance(value, str) or not _SAFE_NAME.match(value):
            raise ValueError(
                f"{what} {value!r} cannot name a dataset cache: use a non-empty string of letters, digits, "
                "'_', '-' and '.', not starting with '.' (for example 'mnist' and 'v1')"
            )
    if split not in SPLITS:
        raise ValueError(f"split {split!r} is not one of {', '.join(SPLITS)}")
    return cache_root() / dataset_id / dataset_version / split


def _is_complete(path: pathlib.Path) -> bool:
    return (path / _META_FILE).is_file()


DATA_FILE = "elements.tfrecord"
_SPEC_FILE = "element_spec.pkl"


def _check_spec(spec: Any, where: str) -> List[Any]:
    import tensorflow as tf

    flat = tf.nest.flatten(spec)
    for component in flat:
        if not isinstance(component, tf.TensorSpec):
            raise TypeError(
                f"{where}: the dataset cache stores dense tensors only, but the dataset's elements hold a "
                f"{type(component).__name__}; convert it to dense tensors before caching"
            )
    return flat


def _materialise(make_dataset: Callable[[], "tf.data.Dataset"], path: pathlib.Path) -> None:
    """Write every element as one TFRecord (its tensors serialized) into a temporary directory, then rename it.

    The dataset is read in Python, so an error in it surfaces here (and leaves nothing behind).
    """
    import tensorflow as tf

    where = getattr(make_dataset, "__qualname__", repr(make_dataset))
    dataset = make_dataset()
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(
            f"the function decorated by a dataset cache must return a tf.data.Dataset, but {where!r} returned "
            f"{type(dataset).__name__}"
        )
    _check_spec(dataset.element_spec, where)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".tmp-{path.name}-{uuid.uuid4().hex}"
    tmp.mkdir()
    try:
        count = 0
        with tf.io.TFRecordWriter(str(tmp / DATA_FILE)) as writer:
            for element in dataset:
                tensors = [tf.io.serialize_tensor(t).numpy() for t in tf.nest.flatten(element)]
                example = tf.train.Example(features=tf.train.Features(
                    feature={"tensors": tf.train.Feature(bytes_list=tf.train.BytesList(value=tensors))}
                ))
                writer.write(example.SerializeToString())
                count += 1
        with open(tmp / _SPEC_FILE, "wb") as f:
            pickle.dump(dataset.element_spec, f)
        (tmp / _META_FILE).write_text(json.dumps({"count": count}))
        try:
            os.rename(tmp, path)
        except OSError:
            # Another trial finished the same cache first; its copy is as good as ours.
            if not _is_complete(path):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _load(path: pathlib.Path) -> "Tuple[tf.data.Dataset, int]":
    import tensorflow as tf

    meta = json.loads((path / _META_FILE).read_text())
    with open(path / _SPEC_FILE, "rb") as f:
        spec = pickle.load(f)
    flat_spec = _check_spec(spec, str(path))
    feature = {"tensors": tf.io.FixedLenFeature([len(flat_spec)], tf.string)}

    def decode(record: "tf.Tensor") -> Any:
        serialized = tf.io.parse_single_example(record, feature)["tensors"]
        tensors = []
        for i, component in enumerate(flat_spec):
            tensor = tf.io.parse_tensor(serialized[i], component.dtype)
            tensor.set_shape(component.shape)
            tensors.append(tensor)
        return tf.nest.pack_sequence_as(spec, tensors)

    dataset = tf.data.TFRecordDataset(str(path / DATA_FILE)).map(decode)
    return dataset, int(meta["count"])


def cache_dataset(
    dataset_id: str,
    dataset_version: str,
    *,
    split: str,
    shuffle: bool,
    skip_shuffle_at_epoch_end: bool,
    seed: int,
    shard_index: int = 0,
    num_shards: int = 1,
) -> Callable[[Callable[[], "tf.data.Dataset"]], Callable[[], "tf.data.Dataset"]]:
    """A decorator that caches the `tf.data.Dataset` its function builds, on disk, keyed by id and version.

    The decorated function takes no arguments. The dataset it returns comes back sharded
    (`shard_index` of `num_shards`) and, when `shuffle`, shuffled with `seed`: reshuffled at each pass
    through the data unless `skip_shuffle_at_epoch_end`. Batch and augment after the cache, not before.
    """
    path = cache_path(dataset_id, dataset_version, split)
    if not isinstance(num_shards, int) or num_shards < 1:
        raise ValueError(f"num_shards must be a positive integer, not {num_shards!r}")
    if not isinstance(shard_index, int) or not 0 <= shard_index < num_shards:
        raise ValueError(f"shard_index must be an integer in [0, {num_shards}), not {shard_index!r}")

    def decorator(make_dataset: Callable[[], "tf.data.Dataset"]) -> Callable[[], "tf.data.Dataset"]:
        @functools.wraps(make_dataset)
        def cached() -> "tf.data.Dataset":
            if not _is_complete(path):
                _materialise(make_dataset, path)
            dataset, count = _load(path)
            if num_shards > 1:
                dataset = dataset.shard(num_shards, shard_index)
                count = len(range(shard_index, count, num_shards))
            if shuffle and count > 1:
                dataset = dataset.shuffle(
                    buffer_size=min(count, MAX_SHUFFLE_BUFFER),
                    seed=seed,
                    reshuffle_each_iteration=not skip_shuffle_at_epoch_end,
                )
            return dataset

        return cached

    return decorator
