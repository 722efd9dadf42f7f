"""det.pytorch.DataLoader (drop-in, resumable, sharded) and moving batches of every structure to the device."""
import collections
import pathlib
from typing import Any, Dict, List

import numpy as np
import pytest
import torch
from torch import nn

from _pytorch_runs import make_config, run_trial
import determined.pytorch as det_torch
from determined.pytorch import to_device


def _ids(loader: Any, count: int) -> List[List[int]]:
    iterator = iter(loader)
    return [next(iterator).flatten().tolist() for _ in range(count)]


def test_drop_in_for_torch_data_loader() -> None:
    data = torch.arange(10)
    ours = det_torch.DataLoader(data, batch_size=3, drop_last=True)
    theirs = torch.utils.data.DataLoader(data, batch_size=3, drop_last=True)
    assert len(ours) == len(theirs) == 3
    assert [b.tolist() for b in ours] == [b.tolist() for b in theirs]
    assert len(det_torch.DataLoader(data)) == 10  # batch_size defaults to 1
    with pytest.raises(ValueError):  # the same argument checks as torch
        det_torch.DataLoader(data, batch_size=2, batch_sampler=[[0, 1]])


@pytest.mark.parametrize("shuffle", [False, True])
def test_skip_continues_at_the_next_batch_across_epochs(shuffle: bool) -> None:
    loader = det_torch.DataLoader(torch.arange(10), batch_size=3, shuffle=shuffle)
    whole = _ids(loader.get_data_loader(repeat=True, seed=11), 14)
    for skip in (1, 4, 9):
        assert _ids(loader.get_data_loader(repeat=True, skip=skip, seed=11), 14 - skip) == whole[skip:]
    epochs = [sorted(sum(whole[i : i + 4], [])) for i in (0, 4, 8)]
    assert all(e == list(range(10)) for e in epochs)  # every epoch is a full pass over the data
    if shuffle:
        assert whole[:4] != whole[4:8]  # each epoch has its own order
        assert _ids(loader.get_data_loader(repeat=True, seed=12), 14) != whole


def test_sharding_gives_each_rank_every_nth_batch() -> None:
    loader = det_torch.DataLoader(torch.arange(12), batch_size=2)
    rank1 = loader.get_data_loader(repeat=False, num_replicas=2, rank=1)
    assert len(rank1) == 3
    assert [b.tolist() for b in rank1] == [[2, 3], [6, 7], [10, 11]]


def test_user_sampler_is_repeated_and_skipped() -> None:
    data = torch.arange(6)
    loader = det_torch.DataLoader(data, batch_size=2, sampler=torch.utils.data.SequentialSampler(data))
    assert _ids(loader.get_data_loader(repeat=True, skip=2), 3) == [[4, 5], [0, 1], [2, 3]]


def test_iterable_dataset_is_repeated_and_skipped() -> None:
    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self) -> Any:
            return iter(range(5))

    loader = det_torch.DataLoader(Stream(), batch_size=2)
    assert _ids(loader.get_data_loader(repeat=True, skip=2), 3) == [[4], [0, 1], [2, 3]]


def test_to_device_moves_every_structure() -> None:
    Pair = collections.namedtuple("Pair", ["a", "b"])
    meta = torch.device("meta")  # a real device other than the CPU that exists on every machine
    batch = {
        "data": [{"sub_data1": torch.zeros(2, 2)}, {"sub_data2": np.zeros(2)}],
        "label": (torch.zeros(2), np.ones((2, 2))),
        "pair": Pair(torch.ones(1), np.arange(3)),
        "ordered": collections.OrderedDict(x=torch.ones(1)),
        "name": "keep me",
    }
    moved = to_device(batch, meta)
    assert moved["data"][0]["sub_data1"].device == meta and moved["data"][1]["sub_data2"].device == meta
    assert isinstance(moved["label"], tuple) and all(t.device == meta for t in moved["label"])
    assert isinstance(moved["pair"], Pair) and moved["pair"].b.device == meta and moved["pair"].b.shape == (3,)
    assert isinstance(moved["ordered"], collections.OrderedDict) and moved["ordered"]["x"].device == meta
    assert moved["name"] == "keep me"
    assert to_device(np.ones(2), meta).device == meta
    assert to_device([torch.ones(1)], meta)[0].device == meta


SEEN: List[Any] = []


class StructureTrial(det_torch.PyTorchTrial):
    """Its loader yields raw nested numpy/tensor structures (collate_fn keeps them as they are)."""

    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        self.context = context
        self.model = context.wrap_model(nn.Linear(2, 1))
        self.optimizer = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.1))

    def _loader(self) -> det_torch.DataLoader:
        records = [
            np.ones((2, 2), dtype=np.float32),
            torch.ones(2, 2),
            (np.ones((2, 2), dtype=np.float32), torch.ones(2)),
            [torch.ones(2, 2), np.zeros(2)],
            {"data": np.ones((2, 2), dtype=np.float32), "label": torch.ones(2)},
            {"data": [{"sub_data1": np.ones((2, 2), dtype=np.float32)}, {"sub_data2": torch.ones(2)}],
             "label": (np.zeros(2), torch.zeros(2, 2))},
        ]
        return det_torch.DataLoader(records, batch_size=1, collate_fn=lambda items: items[0])

    def build_training_data_loader(self) -> det_torch.DataLoader:
        return self._loader()

    def build_validation_data_loader(self) -> det_torch.DataLoader:
        return self._loader()

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        SEEN.append(batch)
        first = batch
        while not isinstance(first, torch.Tensor):
            first = next(iter(first.values())) if isinstance(first, dict) else first[0]
        loss = self.model(first.float()).sum()
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        return {"loss": loss}

    def evaluate_batch(self, batch: Any) -> Dict[str, Any]:
        return {"val_loss": 0.0}


DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # where a 1-slot trial trains


def _leaves(structure: Any) -> List[Any]:
    if isinstance(structure, dict):
        return [leaf for value in structure.values() for leaf in _leaves(value)]
    if isinstance(structure, (list, tuple)):
        return [leaf for value in structure for leaf in _leaves(value)]
    return [structure]


def test_controller_moves_every_batch_structure_to_the_device(tmp_path: pathlib.Path) -> None:
    SEEN.clear()
    run_trial(StructureTrial, tmp_path, [6], make_config(hyperparameters={"global_batch_size": 1}))
    assert len(SEEN) == 6
    assert type(SEEN[2]) is tuple and type(SEEN[3]) is list and type(SEEN[5]["label"]) is tuple
    for batch in SEEN:
        assert all(isinstance(leaf, torch.Tensor) and leaf.device.type == DEVICE for leaf in _leaves(batch))
