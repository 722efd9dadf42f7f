"""The PyTorch names of Determined 0.12.4-0.38 beyond callbacks, reducers and AMP: reset_parameters,
get_last_lr, the context's where-am-I queries, get_batch_length, samplers with the trial's own loader,
disable_auto_to_device, load_trial_from_checkpoint_path and CheckpointLoadContext, trial constructors."""
import logging
import pathlib
import warnings
from typing import Any, Dict, List

import numpy as np
import pytest
import torch
from torch import nn

import determined.pytorch as det_torch
from determined import errors
from determined._trial import construct_trial
from determined.pytorch import samplers
from _pytorch_runs import make_config, run_trial
from _hook_trials import HookTrial
from _trials import DropoutTrial, random_dataset


def test_reset_parameters_reinitializes_every_layer_that_can() -> None:
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 2)))
    for parameter in model.parameters():
        nn.init.constant_(parameter, 7.0)
    det_torch.reset_parameters(model)
    for parameter in model.parameters():
        assert not torch.all(parameter == 7.0)
    with pytest.raises(TypeError, match="takes a torch.nn.Module"):
        det_torch.reset_parameters("model")  # type: ignore[arg-type]


def test_lr_scheduler_get_last_lr() -> None:
    optimizer = torch.optim.SGD(nn.Linear(2, 1).parameters(), lr=1.0)
    scheduler = det_torch.LRScheduler(torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5),
                                      det_torch.LRScheduler.StepMode.STEP_EVERY_BATCH)
    optimizer.step()
    scheduler.step()
    assert scheduler.get_last_lr() == [0.5] == scheduler.get_lr()


@pytest.mark.parametrize("mode, frequency, aggregation, expected", [
    ("STEP_EVERY_BATCH", 3, 1, [2, 5, 8]),
    ("STEP_EVERY_OPTIMIZER_STEP", 2, 2, [3, 7]),  # optimizer steps after batches 1, 3, 5, 7, 9: every 2nd
    ("STEP_EVERY_EPOCH", 2, 1, [7]),  # epochs of 4 batches: after the 2nd epoch
])
def test_lr_scheduler_frequency(mode: str, frequency: int, aggregation: int, expected: List[int]) -> None:
    optimizer = torch.optim.SGD(nn.Linear(2, 1).parameters(), lr=1.0)
    scheduler = det_torch.LRScheduler(torch.optim.lr_scheduler.StepLR(optimizer, step_size=1),
                                      det_torch.LRScheduler.StepMode[mode], frequency=frequency)
    update_batches = [b for b in range(10) if (b + 1) % aggregation == 0]
    assert [b for b in update_batches if scheduler.should_step_after_batch(b, 4, aggregation)] == expected


class QueryTrial(DropoutTrial):
    """Records the context's answers in __init__ (before training) and during train_batch."""

    seen: List[Any] = []

    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        super().__init__(context)
        QueryTrial.seen.append(("initial_batch", context.get_initial_batch()))
        with pytest.raises(errors.DeterminedError, match="only meaningful while training"):
            context.current_train_batch()

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        c = self.context
        QueryTrial.seen.append((c.current_train_batch(), c.current_train_epoch(), c.is_epoch_start(), c.is_epoch_end()))
        return super().train_batch(batch, epoch_idx, batch_idx)

    def get_batch_length(self, batch: Any) -> int:
        return 1000  # records per batch, for the throughput line


def test_where_the_trial_is_and_its_throughput(ckpt_dir: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    QueryTrial.seen = []
    first = run_trial(QueryTrial, ckpt_dir, [6])
    with caplog.at_level(logging.INFO, logger="determined.pytorch"):
        run_trial(QueryTrial, ckpt_dir, [7], latest_checkpoint=first.checkpoint.reported[-1]["uuid"],
                  steps_completed=6)
    # Epochs of 5 batches.
    assert QueryTrial.seen == [
        ("initial_batch", 0), (0, 0, True, False), (1, 0, False, False), (2, 0, False, False),
        (3, 0, False, False), (4, 0, False, True), (5, 1, True, False),
        ("initial_batch", 6), (6, 1, False, False),
    ]
    assert any("trained 1 batches up to batch 7" in r.message and "records/s (1000 records per slot)" in r.message
               for r in caplog.records)


def test_data_length_of_nested_batches() -> None:
    assert det_torch.data_length({"x": torch.zeros(5, 2), "y": torch.zeros(5)}) == 5
    assert det_torch.data_length((np.zeros((3, 4)), [1, 2, 3])) == 3
    with pytest.raises(errors.InvalidTrialError, match="override get_batch_length"):
        det_torch.data_length("text")


class IndexDataset(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 12

    def __getitem__(self, index: int) -> Any:
        return torch.tensor([float(index)] * 4), index % 2


SEEN_BATCHES: List[List[int]] = []


class OwnLoaderTrial(DropoutTrial):
    """A torch DataLoader built by the trial with det's samplers, resumable through get_initial_batch()."""

    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        super().__init__(context)
        context.experimental.disable_dataset_reproducibility_checks()

    def build_training_data_loader(self) -> Any:
        sampler: Any = samplers.ReproducibleShuffleSampler(torch.utils.data.SequentialSampler(range(12)), seed=7)
        batches: Any = torch.utils.data.BatchSampler(sampler, batch_size=4, drop_last=False)
        batches = samplers.SkipBatchSampler(samplers.RepeatBatchSampler(batches), self.context.get_initial_batch())
        return torch.utils.data.DataLoader(IndexDataset(), batch_sampler=batches)

    def build_validation_data_loader(self) -> Any:
        return torch.utils.data.DataLoader(IndexDataset(), batch_size=6)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        SEEN_BATCHES.append([int(v) for v in batch[0][:, 0]])
        return super().train_batch(batch, epoch_idx, batch_idx)


def test_the_trials_own_loader_with_samplers_resumes_at_the_same_batch(ckpt_dir: pathlib.Path) -> None:
    SEEN_BATCHES.clear()
    run_trial(OwnLoaderTrial, ckpt_dir / "whole", [7])
    whole = list(SEEN_BATCHES)
    SEEN_BATCHES.clear()
    first = run_trial(OwnLoaderTrial, ckpt_dir / "split", [4])
    run_trial(OwnLoaderTrial, ckpt_dir / "split", [7], latest_checkpoint=first.checkpoint.reported[-1]["uuid"],
              steps_completed=4)
    assert SEEN_BATCHES == whole
    epochs = [sorted(sum(whole[i:i + 3], [])) for i in (0, 3)]
    assert epochs == [list(range(12))] * 2 and whole[:3] != whole[3:6]  # each epoch shuffled anew


def test_samplers_shard_skip_repeat_and_shuffle() -> None:
    base = torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(range(10)), batch_size=2, drop_last=False)
    assert list(samplers.DistributedBatchSampler(base, num_workers=2, rank=1)) == [[2, 3], [6, 7]]
    assert len(samplers.DistributedBatchSampler(base, num_workers=2, rank=0)) == 3
    assert list(samplers.DistributedSampler(range(5), num_workers=2, rank=0)) == [0, 2, 4]
    assert list(samplers.SkipSampler(range(5), 3)) == [3, 4]
    assert list(samplers.SkipBatchSampler(base, 4)) == [[8, 9]]
    repeated = iter(samplers.RepeatSampler(range(2)))
    assert [next(repeated) for _ in range(5)] == [0, 1, 0, 1, 0]
    shuffled = samplers.ReproducibleShuffleSampler(range(10), seed=3)
    again = samplers.ReproducibleShuffleSampler(range(10), seed=3)
    assert list(shuffled) == list(again) and sorted(shuffled) == list(range(10))
    assert sorted(sum(samplers.ReproducibleShuffleBatchSampler(base, seed=1), [])) == list(range(10))
    adapted = iter(samplers.adapt_batch_sampler(base, repeat=True, skip=2, num_replicas=2, rank=0))
    assert [next(adapted) for _ in range(3)] == [[8, 9], [2, 3], [6, 7]]  # rank 0: batches 0,2,4,6,8,..., after 2
    with pytest.raises(errors.DeterminedError, match="rank must be in"):
        samplers.DistributedSampler(range(3), num_workers=2, rank=2)


class NumpyBatches(DropoutTrial):
    """Batches of numpy arrays; with auto_to_device off they reach train_batch as they are."""

    kinds: List[str] = []

    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        super().__init__(context)
        context.experimental.disable_auto_to_device()

    def build_training_data_loader(self) -> det_torch.DataLoader:
        data = random_dataset()
        pairs = [(x.numpy(), int(y)) for x, y in data]
        return det_torch.DataLoader(pairs, batch_size=4, collate_fn=lambda b: (np.stack([x for x, _ in b]),
                                                                               np.array([y for _, y in b])))

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        NumpyBatches.kinds.append(type(batch[0]).__name__)
        return super().train_batch(self.context.to_device(batch), epoch_idx, batch_idx)

    def evaluate_batch(self, batch: Any) -> Dict[str, Any]:
        return super().evaluate_batch(self.context.to_device(batch))  # the trial moves its batches itself


def test_disable_auto_to_device(ckpt_dir: pathlib.Path) -> None:
    NumpyBatches.kinds = []
    run_trial(NumpyBatches, ckpt_dir, [2])
    assert NumpyBatches.kinds == ["ndarray", "ndarray"]


def test_load_trial_from_checkpoint_path_with_a_class_kwargs_and_torch_load_kwargs(ckpt_dir: pathlib.Path) -> None:
    config = make_config(hyperparameters={"global_batch_size": 4, "lr": 0.1})
    context = run_trial(HookTrial, ckpt_dir, [3], config=config)
    path = str(ckpt_dir / context.checkpoint.reported[-1]["uuid"])
    saved = torch.load(pathlib.Path(path) / "state_dict.pth", weights_only=False)["models_state_dict"][0]

    # The class recorded in the checkpoint, built with the checkpoint's hparams (its __init__ requires them).
    loaded = det_torch.load_trial_from_checkpoint_path(path, torch_load_kwargs={"map_location": "cpu"})
    assert isinstance(loaded, HookTrial) and loaded.hparams == {"global_batch_size": 4, "lr": 0.1}
    for name, value in loaded.model.state_dict().items():
        assert torch.equal(value, saved[name])

    class Inference(HookTrial):
        def __init__(self, context: det_torch.PyTorchTrialContext, hparams: Dict[str, Any], note: str) -> None:
            super().__init__(context, hparams)
            self.note = note

    other = det_torch.load_trial_from_checkpoint_path(path, trial_class=Inference, trial_kwargs={"note": "mine"})
    assert isinstance(other, Inference) and other.note == "mine"
    with pytest.warns(FutureWarning, match="torch_load_kwargs"):
        det_torch.load_trial_from_checkpoint_path(path, map_location="cpu")
    with pytest.raises(errors.DeterminedError, match="either as torch_load_kwargs"):
        det_torch.load_trial_from_checkpoint_path(path, torch_load_kwargs={"map_location": "cpu"}, map_location="cpu")


def test_checkpoint_load_context_builds_a_trial_outside_training() -> None:
    context = det_torch.CheckpointLoadContext({"global_batch_size": 8, "lr": 0.5})
    trial = HookTrial(context, context.get_hparams())
    assert context.get_per_slot_batch_size() == 8 and trial.optimizer.param_groups[0]["lr"] == 0.5
    assert context.models == [trial.model]


def test_a_type_error_in_a_trial_constructor_is_a_trial_api_error() -> None:
    class TakesTwo(DropoutTrial):
        def __init__(self, context: det_torch.PyTorchTrialContext, required: int) -> None:
            super().__init__(context)

    context = det_torch.CheckpointLoadContext({"global_batch_size": 4})
    with pytest.raises(errors.InvalidTrialError, match=r"TakesTwo\(context\) raised TypeError: .*required"):
        construct_trial(TakesTwo, context)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert isinstance(construct_trial(TakesTwo, context, required=1), TakesTwo)


class _MasterInfo:
    """The one request the trial's TensorBoard files make: where the master keeps its data dir."""

    def __init__(self, data_dir: pathlib.Path) -> None:
        self.data_dir = data_dir

    def get(self, path: str) -> Dict[str, Any]:
        assert path == "/master/info"
        return {"data_dir": str(self.data_dir)}


def _scalars(directory: pathlib.Path) -> Dict[str, List[Any]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(directory), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]}


def test_the_trials_writers_share_its_one_event_file(tmp_path: pathlib.Path) -> None:
    from determined.core import _tensorboard
    from determined.tensorboard.metric_writers.pytorch import trial_summary_writer

    files = _tensorboard.TrialMetricsWriter(_MasterInfo(tmp_path), trial_id=3, experiment_id=2)
    directory = tmp_path / "tensorboard" / "experiment_2" / "trial_3"
    assert files.directory() == directory and files.served  # where `det tensorboard start 2` looks
    files.write("training", 5, {"loss": 0.5})
    writer = trial_summary_writer(files)
    writer.add_scalar("mine", 1.5, 5)
    files.enabled = False  # set_enable_tensorboard_logging(False): the platform's metrics stop, the trial's go on
    files.write("training", 10, {"loss": 0.25})
    writer.add_scalar("mine", 2.5, 10)
    writer.close()
    assert [p.name.startswith("events.out.tfevents.") for p in directory.iterdir()] == [True]
    assert _scalars(directory) == {"training/loss": [(5, 0.5)], "mine": [(5, 1.5), (10, 2.5)]}

    other_rank = _tensorboard.TrialMetricsWriter(_MasterInfo(tmp_path), trial_id=3, experiment_id=2, rank=1)
    assert not other_rank.served and other_rank.directory() != directory  # only the chief's files are served


def test_a_context_without_a_master_does_not_take_over_the_trials_files(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import determined.tensorboard as det_tensorboard
    from determined.core import _tensorboard

    files = _tensorboard.TrialMetricsWriter(_MasterInfo(tmp_path), trial_id=3, experiment_id=2)
    monkeypatch.setattr(_tensorboard, "_current", files)
    det_torch.CheckpointLoadContext({"global_batch_size": 4})  # e.g. a backbone loaded in the trial's __init__
    assert det_tensorboard.get_base_path({}) == tmp_path / "tensorboard" / "experiment_2" / "trial_3"


def test_tensorboard_names_of_a_running_trial(ckpt_dir: pathlib.Path) -> None:
    import determined.tensorboard as det_tensorboard
    from determined.tensorboard.metric_writers.pytorch import TorchWriter

    class WriterTrial(DropoutTrial):
        def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
            super().__init__(context)
            context.set_enable_tensorboard_logging(False)
            assert context.get_enable_tensorboard_logging() is False
            self.path = context.get_tensorboard_path()
            assert det_tensorboard.get_base_path({}) == self.path
            self.legacy = TorchWriter()
            assert isinstance(self.legacy, det_tensorboard.MetricWriter)

        def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
            self.context.get_tensorboard_writer().add_scalar("new", float(batch_idx), batch_idx)
            self.legacy.add_scalar("old", -float(batch_idx), batch_idx)
            self.legacy.reset()
            return super().train_batch(batch, epoch_idx, batch_idx)

    seen: List[Any] = []

    class Keep(WriterTrial):
        def build_callbacks(self) -> Dict[str, det_torch.PyTorchCallback]:
            seen.append(self.path)
            return super().build_callbacks()

    run_trial(Keep, ckpt_dir, [3])
    # No master here: a local directory, with the trial's scalars in one file.
    assert _scalars(seen[0]) == {"new": [(0, 0.0), (1, 1.0), (2, 2.0)], "old": [(0, -0.0), (1, -1.0), (2, -2.0)]}


def test_batch_metric_writer() -> None:
    import determined.tensorboard as det_tensorboard

    class Recorder(det_tensorboard.MetricWriter):
        def __init__(self) -> None:
            self.points: List[Any] = []

        def add_scalar(self, name: str, value: Any, step: int) -> None:
            self.points.append((name, value, step))

        def reset(self) -> None:
            self.points.append("flush")

    recorder = Recorder()
    writer = det_tensorboard.BatchMetricWriter(recorder)
    writer.on_train_step_end(10, {"loss": 1.5, "reduced": 3}, [{"loss": 1.0, "text": "x"}, {"loss": 2.0}])
    writer.on_validation_step_end(10, {"accuracy": np.float32(0.5), "val_loss": 1.0})
    assert recorder.points == [
        ("Determined/loss", 1.0, 8), ("Determined/loss", 2.0, 9), ("Determined/reduced", 3, 10), "flush",
        ("Determined/val_accuracy", np.float32(0.5), 10), ("Determined/val_loss", 1.0, 10), "flush",
    ]


class ConstrainedTrial(DropoutTrial):
    """HP search constraints (0.13+): det.InvalidHP from __init__ or train_batch."""

    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        import determined as det

        if context.get_hparams().get("hidden") == 1:
            raise det.InvalidHP("hidden must be more than 1")
        super().__init__(context)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        import determined as det

        metrics = super().train_batch(batch, epoch_idx, batch_idx)
        if batch_idx == 2:
            raise det.InvalidHP("the loss says these hyperparameters are hopeless")
        return metrics


@pytest.mark.parametrize("hidden", [1, 8])  # raised in __init__, raised in train_batch
def test_invalid_hp_ends_the_trial_without_error(ckpt_dir: pathlib.Path, hidden: int) -> None:
    config = make_config(hyperparameters={"global_batch_size": 4, "hidden": hidden})
    context = run_trial(ConstrainedTrial, ckpt_dir, [10], config=config)
    assert context.train.early_exit_reason == "INVALID_HP"
    assert sum(len(r["batch_metrics"]) for r in context.train.training_history) == 0
    assert context.searcher.completed_operations == []


def test_invalid_hp_in_test_mode_is_a_clear_error() -> None:
    from determined import _execution

    config = {"hyperparameters": {"global_batch_size": 4, "hidden": 1},
              "searcher": {"name": "single", "metric": "val_loss", "max_length": {"batches": 2}}}
    with pytest.raises(errors.DeterminedError, match="test mode: the trial raised det.InvalidHP"):
        _execution.test_one_batch(ConstrainedTrial, config)
