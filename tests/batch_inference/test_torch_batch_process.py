"""Determined 0.38's batch inference API (`determined.pytorch.experimental.torch_batch_process`) in real
experiments on an embedded master: script entrypoints (one slot, and two through
`determined.launch.torch_distributed`) whose processor logs every item it processes (scripts/infer.py)."""
import json
import pathlib
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from determined import errors, master, storage
from determined.common.api import Session
from determined.master.rm import Slots
from determined.pytorch.experimental import _torch_batch_process
from tests.e2e._helpers import wait_for
from tests.master._helpers import model_def

SCRIPT = (pathlib.Path(__file__).with_name("scripts") / "infer.py").read_text()
TERMINAL = ("COMPLETED", "CANCELED", "ERROR")
TWO_SLOTS = "python3 -m determined.launch.torch_distributed python3 infer.py"


def _records(out: pathlib.Path) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]


def _state(session: Session, exp_id: int) -> str:
    return str(session.get(f"/experiments/{exp_id}")["experiment"]["state"])


def _logs(session: Session, trial_id: int) -> str:
    return "\n".join(e["message"] for e in session.get(f"/trials/{trial_id}/logs", params={"limit": 10000})["logs"])


def _ended(session: Session, exp_id: int, timeout: float = 240) -> Dict[str, Any]:
    wait_for(lambda: _state(session, exp_id) in TERMINAL, timeout, 0.2, what=f"experiment {exp_id} to end")
    return dict(session.get(f"/experiments/{exp_id}"))


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[Session, Dict[str, Tuple[int, pathlib.Path]]]]:
    """An embedded master with the three experiments of this module submitted at once."""
    root = tmp_path_factory.mktemp("batch")
    embedded = master.start(root / "data", slots=Slots(gpus=[], cpu_count=5), preemption_timeout=20)
    session = embedded.session()
    runs: Dict[str, Tuple[int, pathlib.Path]] = {}
    for name, entrypoint, slots, hparams, restarts in (
        # 50 items in batches of 4: 13 batches, 7 for rank 0 and 6 (and an empty turn) for rank 1.
        ("sharded", TWO_SLOTS, 2, {"records": 50, "batch_size": 4, "interval": 3}, 0),
        # rank 1 dies before its batch 5 in the first run; the position was checkpointed after batch 3.
        ("killed", TWO_SLOTS, 2, {"records": 40, "batch_size": 2, "interval": 2, "die_at": 5}, 1),
        # one slot, paused after batch 4 completes: it stops at the checkpoint after batch 5.
        ("paused", "python3 infer.py", 1, {"records": 24, "batch_size": 2, "interval": 3, "hold_at": 4}, 0),
    ):
        out = root / name
        out.mkdir()
        config = {"entrypoint": entrypoint, "resources": {"slots_per_trial": slots}, "max_restarts": restarts,
                  "searcher": {"name": "single", "metric": "items", "smaller_is_better": False},
                  "hyperparameters": {"out": str(out), **hparams},
                  "checkpoint_storage": {"type": "shared_fs", "host_path": str(root / "ckpts")}}
        exp_id = session.post("/experiments", {"config": config, "model_definition": model_def({"infer.py": SCRIPT})})
        runs[name] = (int(exp_id["experiment"]["id"]), out)
    try:
        yield session, runs
    finally:
        embedded.stop(timeout=10)


@pytest.mark.slow
def test_two_ranks_process_their_shards_every_item_exactly_once(
        platform: Tuple[Session, Dict[str, Tuple[int, pathlib.Path]]]) -> None:
    session, runs = platform
    exp_id, out = runs["sharded"]
    desc = _ended(session, exp_id)
    [trial] = desc["trials"]
    assert desc["experiment"]["state"] == "COMPLETED", _logs(session, trial["id"])[-3000:]
    records = _records(out)
    items = sorted(i for r in records for i in r["items"])
    assert items == list(range(50))  # every item, none twice
    for rank in (0, 1):
        mine = sorted((r["batch_idx"], r["items"]) for r in records if r["rank"] == rank)
        # rank r gets the global batches r, r+2, r+4, ... (batch_idx counts its own batches)
        assert mine == [(i, list(range(4 * (2 * i + rank), min(50, 4 * (2 * i + rank) + 4))))
                        for i in range(7 if rank == 0 else 6)]
        # on_finish on every rank, after on_checkpoint_start at batches 3 and 6 and at the end (7)
        assert (out / f"finished_rank_{rank}_run_1").read_text() == "3"
    detail = session.get(f"/trials/{trial['id']}")
    assert [c["steps_completed"] for c in detail["checkpoints"]] == [3, 6, 7]
    assert [m["metrics"]["items"] for m in detail["validation_metrics"]] == [50]  # a reducer over both ranks
    # upload_path(): the files of both ranks under one output uuid in the checkpoint storage
    output_uuid = detail["checkpoints"][0]["metadata"]["default_output_uuid"]
    stored = out.parent / "ckpts" / output_uuid
    assert sorted(p.name for p in (stored / "rank_0").iterdir()) == sorted(f"batch_{i}.json" for i in range(7))
    assert json.loads((stored / "rank_1" / "batch_5.json").read_text()) == [44, 45, 46, 47]


@pytest.mark.slow
def test_a_rank_killed_mid_way_resumes_from_the_checkpointed_position(
        platform: Tuple[Session, Dict[str, Tuple[int, pathlib.Path]]]) -> None:
    session, runs = platform
    exp_id, out = runs["killed"]
    desc = _ended(session, exp_id)
    [trial] = desc["trials"]
    logs = _logs(session, trial["id"])
    assert desc["experiment"]["state"] == "COMPLETED" and trial["restarts"] == 1, logs[-3000:]
    assert "infer: rank 1 dies before batch 5" in logs
    assert "resuming after 4 batches per rank" in logs
    records = _records(out)
    first = [r for r in records if r["run"] == 1]
    second = [r for r in records if r["run"] == 2]
    # the second run starts exactly at the checkpointed position, on both ranks
    assert sorted({r["batch_idx"] for r in second}) == list(range(4, 10))
    done_before_checkpoint = {i for r in first if r["batch_idx"] < 4 for i in r["items"]}
    after = [i for r in second for i in r["items"]]
    assert len(after) == len(set(after)) and not done_before_checkpoint & set(after)  # nothing done twice
    assert done_before_checkpoint | set(after) == set(range(40))  # nothing lost
    # the outputs of both runs went to the same output uuid
    uuids = {c["metadata"]["default_output_uuid"] for c in session.get(f"/trials/{trial['id']}")["checkpoints"]}
    assert len(uuids) == 1


@pytest.mark.slow
def test_a_paused_run_stops_at_a_checkpoint_and_resumes_there(
        platform: Tuple[Session, Dict[str, Tuple[int, pathlib.Path]]]) -> None:
    session, runs = platform
    exp_id, out = runs["paused"]
    wait_for(lambda: (out / "ready").exists(), 180, 0.1, what="the run to reach batch 4")
    session.post(f"/experiments/{exp_id}/pause")
    wait_for(lambda: session.get(f"/experiments/{exp_id}")["trials"][0].get("status") == "PAUSED", 60, 0.2,
             what="the paused run to checkpoint and exit")
    trial_id = session.get(f"/experiments/{exp_id}")["trials"][0]["id"]
    assert [r["batch_idx"] for r in _records(out)] == [0, 1, 2, 3, 4, 5], _logs(session, trial_id)
    assert [c["steps_completed"] for c in session.get(f"/trials/{trial_id}")["checkpoints"]] == [3, 6]
    assert not list(out.glob("finished_*"))  # a preempted run does not finish
    assert session.get(f"/experiments/{exp_id}")["experiment"]["progress"] == 0.5  # 12 of 24 items
    session.post(f"/experiments/{exp_id}/activate")
    desc = _ended(session, exp_id)
    assert desc["experiment"]["state"] == "COMPLETED", _logs(session, trial_id)[-3000:]
    records = _records(out)
    assert [r["batch_idx"] for r in records] == list(range(12))  # resumed at batch 6, nothing twice
    assert sorted(i for r in records for i in r["items"]) == list(range(24))
    assert (out / "finished_rank_0_run_2").exists()


def test_off_the_platform_it_says_to_submit_the_script(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DET_TRIAL_ID", raising=False)
    with pytest.raises(errors.DeterminedError, match="only runs inside a trial.*det experiment create"):
        _torch_batch_process.torch_batch_process(object, [1, 2, 3])  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs, batch_size, message", [
    ({"shuffle": True}, None, "'shuffle' must be false"),
    ({"sampler": object()}, None, "remove 'sampler'"),
    ({"batch_size": 3}, 2, "given both"),
    ({}, 0, "positive integer"),
])
def test_bad_arguments_are_named(kwargs: Dict[str, Any], batch_size: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _torch_batch_process._batch_size(dict(kwargs), batch_size)


def test_batch_size_defaults_to_one_or_comes_from_the_loader_kwargs() -> None:
    kwargs = {"batch_size": 5, "num_workers": 0, "shuffle": False}
    assert _torch_batch_process._batch_size(kwargs, None) == 5 and kwargs == {"num_workers": 0}
    assert _torch_batch_process._batch_size({}, None) == 1


def test_max_batches_caps_each_rank_and_a_bad_value_is_ignored_with_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    assert _torch_batch_process._batches_per_rank(None, 7) == 7
    assert _torch_batch_process._batches_per_rank(3, 7) == 3
    assert _torch_batch_process._batches_per_rank(0, 7) == 7 and _torch_batch_process._batches_per_rank(8, 7) == 7
    assert "not positive" in caplog.text and "beyond the shard" in caplog.text


def test_shared_fs_add_files_merges_into_one_directory_again_and_again(tmp_path: pathlib.Path) -> None:
    manager = storage.SharedFSStorageManager(str(tmp_path / "store"))
    for i in range(2):
        src = tmp_path / f"src{i}" / "rank_0"
        src.mkdir(parents=True)
        (src / f"out_{i}.txt").write_text(str(i))
        (src / "same.txt").write_text(f"version {i}")
        manager.add_files(str(src.parent), "outputs")
    stored = tmp_path / "store" / "outputs" / "rank_0"
    assert sorted(p.name for p in stored.iterdir()) == ["out_0.txt", "out_1.txt", "same.txt"]
    assert (stored / "same.txt").read_text() == "version 1"
