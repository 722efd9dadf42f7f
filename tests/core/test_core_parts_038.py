"""The parts of Determined 0.38's Core API one by one, in this process: DistributedContext (its constructor connects
the ranks; local collectives), sharded checkpoints and shared downloads between ranks in threads, preemption modes
and acknowledgement, the searcher of 0.38, the train context's reports, core.init's local mode, the profiler."""
import concurrent.futures
import json
import os
import pathlib
import socket
import time
from typing import Any, Callable, Dict, List, Optional

import pytest

import determined as det
from determined import core, errors, storage
from determined.core._checkpoint import CheckpointContext


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_ranks(size: int, work: Callable[[int], Any], local_size: Optional[int] = None) -> List[Any]:
    """`work(rank)` on `size` threads; each builds its own DistributedContext (a real TCP connection)."""
    with concurrent.futures.ThreadPoolExecutor(size) as pool:
        return [f.result(timeout=60) for f in [pool.submit(work, r) for r in range(size)]]


def context(rank: int, size: int, port: int, local_size: Optional[int] = None) -> core.DistributedContext:
    local_size = local_size or size
    return core.DistributedContext(rank=rank, size=size, local_rank=rank % local_size, local_size=local_size,
                                   cross_rank=rank // local_size, cross_size=size // local_size,
                                   chief_ip="127.0.0.1", pub_port=port, timeout=30)


def test_constructing_with_several_ranks_connects_them_and_local_collectives_stay_on_the_machine() -> None:
    port = free_port()

    def work(rank: int) -> Dict[str, Any]:
        d = context(rank, 4, port, local_size=2)  # two "machines" of two ranks
        try:
            return {"all": d.allgather(rank), "local": d.allgather_local(rank * 10), "gather": d.gather(rank),
                    "gather_local": d.gather_local(rank), "bcast": d.broadcast(f"chief{rank}"),
                    "bcast_local": d.broadcast_local(f"local chief {rank}")}
        finally:
            d.close()

    out = run_ranks(4, work)
    assert all(o["all"] == [0, 1, 2, 3] and o["bcast"] == "chief0" for o in out)
    assert [o["local"] for o in out] == [[0, 10], [0, 10], [20, 30], [20, 30]]
    assert [o["gather"] for o in out] == [[0, 1, 2, 3], None, None, None]
    assert [o["gather_local"] for o in out] == [[0, 1], None, [2, 3], None]
    assert [o["bcast_local"] for o in out] == ["local chief 0", "local chief 0", "local chief 2", "local chief 2"]


def test_machines_of_different_sizes() -> None:
    """Ranks 0-1 on one machine, rank 2 alone on another: every rank takes part in connecting the local groups."""
    port = free_port()
    layout = [(0, 2, 0), (1, 2, 0), (0, 1, 1)]  # (local_rank, local_size, cross_rank) of ranks 0, 1, 2

    def work(rank: int) -> Any:
        local_rank, local_size, cross_rank = layout[rank]
        d = core.DistributedContext(rank=rank, size=3, local_rank=local_rank, local_size=local_size,
                                    cross_rank=cross_rank, cross_size=2, chief_ip="127.0.0.1", pub_port=port,
                                    timeout=30)
        try:
            return d.allgather(rank), d.allgather_local(rank), d.broadcast_local(f"from {rank}")
        finally:
            d.close()

    assert run_ranks(3, work) == [([0, 1, 2], [0, 1], "from 0"), ([0, 1, 2], [0, 1], "from 0"),
                                  ([0, 1, 2], [2], "from 2")]


def test_launcher_constructors(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE"):
        monkeypatch.setenv(name, "1" if "SIZE" in name else "0")
    d = core.DistributedContext.from_torch_distributed()
    assert (d.rank, d.size, d.local_size, d.cross_size) == (0, 1, 1, 1)
    with pytest.raises(errors.DeterminedError, match="LOCAL_SIZE is not set"):
        core.DistributedContext.from_deepspeed()
    with pytest.raises(errors.DeterminedError, match="torch_distributed"):
        core.DistributedContext.from_horovod(object())


def sharded(tmp_path: pathlib.Path, d: core.DistributedContext) -> CheckpointContext:
    return CheckpointContext(storage.SharedFSStorageManager(str(tmp_path / "ckpts")), None, 0, d)


def test_sharded_checkpoints_merge_dedupe_and_refuse_conflicts(tmp_path: pathlib.Path) -> None:
    port = free_port()

    def work(rank: int) -> Any:
        d = context(rank, 2, port)
        ckpt = sharded(tmp_path, d)
        try:
            with ckpt.store_path({"steps_completed": 3, "who": {f"r{rank}": rank}}, shard=True) as (path, uuid):
                (path / "same.txt").write_text("identical")
                (path / f"only{rank}.txt").write_text(str(rank))
            conflicts = []
            for meta, name in (({"steps_completed": rank}, f"x{rank}"), ({"steps_completed": 1}, "differs")):
                try:
                    with ckpt.store_path(meta, shard=True) as (path, _):
                        (path / name).write_text(f"{rank}")
                except errors.DeterminedError as e:
                    conflicts.append(str(e))
            src = tmp_path / f"src{rank}"
            (src / "sub").mkdir(parents=True)
            (src / "sub" / f"keep{rank}").write_text("k")
            (src / f"drop{rank}").write_text("d")
            uploaded = ckpt.upload(str(src) if rank else None, {"steps_completed": 5}, shard=True,
                                   selector=lambda rel: rel.startswith("sub/"))
            with ckpt.restore_path(uploaded) as restored:  # shared by the machine's ranks
                files = sorted(p.relative_to(restored).as_posix() for p in restored.rglob("*") if p.is_file())
            return uuid, conflicts, files, ckpt.reported
        finally:
            d.close()

    (uuid0, conflicts0, files0, reported0), (uuid1, conflicts1, files1, _) = run_ranks(2, work)
    assert uuid0 == uuid1
    stored = tmp_path / "ckpts" / uuid0
    assert sorted(p.name for p in stored.iterdir()) == ["metadata.json", "only0.txt", "only1.txt", "same.txt"]
    assert reported0[0]["metadata"] == {"steps_completed": 3, "who": {"r0": 0, "r1": 1}}
    assert len(conflicts0) == 2 and conflicts0 == conflicts1
    assert "disagree at 'steps_completed'" in conflicts0[0] and "'differs' with different contents" in conflicts0[1]
    assert files0 == files1 == ["metadata.json", "sub/keep1"]
    assert len(reported0) == 2  # the two conflicts stored and reported nothing


def test_a_rank_failing_inside_a_sharded_store_fails_every_rank(tmp_path: pathlib.Path) -> None:
    port = free_port()

    def work(rank: int) -> str:
        d = context(rank, 2, port)
        try:
            with sharded(tmp_path, d).store_path({"steps_completed": 1}, shard=True) as (path, _):
                if rank == 1:
                    raise ValueError("disk full")
                (path / "a").write_text("a")
        except Exception as e:
            return f"{type(e).__name__}: {e}"
        finally:
            d.close()
        return "stored"

    out = run_ranks(2, work)
    assert out[1] == "ValueError: disk full" and "rank(s) [1] failed" in out[0]
    assert not list((tmp_path / "ckpts").glob("*-*-*"))


class FakeSession:
    """Records what a context sends to the master; answers the preemption signal with `preempt`."""

    def __init__(self, preempt: bool = False) -> None:
        self.preempt = preempt
        self.posts: List[Any] = []

    def get(self, path: str, params: Any = None) -> Any:
        if path.endswith("/signals/preemption"):
            return {"preempt": self.preempt}
        if path.endswith("/searcher/best_validation"):
            raise errors.APIError(404, "none yet")
        return {}

    def post(self, path: str, json: Any = None) -> Any:
        self.posts.append((path, json))
        return {}

    def close(self) -> None:
        pass


def test_should_preempt_acknowledges_once_and_its_modes() -> None:
    session = FakeSession(preempt=True)
    preempt = core.PreemptContext(session, "alloc", poll_interval=0)  # type: ignore[arg-type]
    assert preempt.should_preempt(auto_ack=False) and session.posts == []
    assert preempt.should_preempt() and preempt.should_preempt()
    assert session.posts == [("/allocations/alloc/signals/ack_preemption", {})]
    assert not core.PreemptContext(None, "x").should_preempt()  # off the platform: never
    worker = core.DistributedContext(rank=1, size=2, local_size=2, collectives=object())  # type: ignore[arg-type]
    chief_only = core.PreemptContext(session, "a", worker, mode=core.PreemptMode.ChiefOnly)  # type: ignore[arg-type]
    with pytest.raises(errors.DeterminedError, match="ChiefOnly"):
        chief_only.should_preempt()


def own_loop_searcher(session: Any, max_length: Any) -> core.SearcherContext:
    config = {"searcher": {"name": "adaptive_asha", "time_metric": "batches", "max_time": 9, "max_length": max_length},
              "records_per_epoch": 40}
    return core.SearcherContext(session, 3, core.DistributedContext(), core.PreemptContext(session, "a"),
                                config=config, hparams={"global_batch_size": 8})


def test_searcher_operations_of_0_38() -> None:
    session = FakeSession()
    searcher = own_loop_searcher(session, {"epochs": 2})
    ops = []
    for op in searcher.operations():
        assert op.length == 2 and op._batches == 10  # the unit is dropped; the platform's loops count batches
        op.report_progress(1)
        op.report_progress(1.001)  # moved less than 1%: not sent again
        op.report_completed(0.5)
        ops.append(op)
    assert len(ops) == 1 and searcher.get_configured_units() == core.Unit.EPOCHS
    assert session.posts == [("/trials/3/progress", {"progress": 0.5})]  # report_completed sends nothing
    with pytest.raises(errors.DeterminedError, match="not reported completed"):
        for _ in own_loop_searcher(session, {"batches": 4}).operations():
            pass
    missing = core.SearcherContextMissing()
    for call in (lambda: next(iter(missing.operations())), missing.get_configured_units):
        with pytest.raises(ValueError, match="no searcher.max_length"):
            call()


def test_only_the_chief_reports_operations_completed_and_every_rank_gets_every_operation() -> None:
    """WorkersAskChief, as Determined 0.26's core_api/4_distributed.py uses it: the chief alone calls
    report_completed; the workers still get each operation and then the end (they hung or stopped early)."""
    port = free_port()

    def work(rank: int) -> List[int]:
        d = context(rank, 2, port)
        try:
            searcher = core.SearcherContext(None, 1, d, core.PreemptContext(None, "a", d), local_lengths=[4, 8])
            lengths = []
            for op in searcher.operations():
                lengths.append(op.length)
                d.allgather(rank)  # the training steps' collectives
                if rank == 0:
                    op.report_completed(1.0)
            return lengths
        finally:
            d.close()

    assert run_ranks(2, work) == [[4, 8], [4, 8]]


def test_only_the_chief_reports_operations_and_every_rank_gets_them_all() -> None:
    """As in Determined (and its core_api 4_distributed tutorial): the workers never report an operation
    completed; they get every operation the chief gets, then the end, and a preemption ends them all."""
    port = free_port()

    def work(rank: int) -> Dict[str, Any]:
        with core.init(distributed=context(rank, 2, port), lengths=[3, 7, 9]) as ctx:
            seen = []
            for op in ctx.searcher.operations():
                seen.append(op.length)
                if rank == 0 and op.length == 7:
                    ctx.preempt._preempted = True  # the master asks the trial to stop in the middle
                    continue
                if rank == 0:
                    op.report_completed(1.0)
            return {"seen": seen, "after": ctx.distributed.allgather(rank)}

    out = run_ranks(2, work)
    assert [o["seen"] for o in out] == [[3, 7], [3, 7]]
    assert all(o["after"] == [0, 1] for o in out)  # still in step after the loop


def test_train_context_reports_of_0_38(tmp_path: pathlib.Path) -> None:
    ctx = core._make_local_context(str(tmp_path), [], {"searcher": {"metric": "loss"}}, {})
    ctx.train.report_metrics("inference", 3, {"latency": 0.25})
    ctx.train.report_metrics("validation", 3, {"loss": 1.0, "raw": b"bytes"})  # bytes are dropped
    assert ctx.train.group_history == {"inference": [{"group": "inference", "steps_completed": 3,
                                                     "metrics": {"latency": 0.25}}]}
    assert ctx.train.validation_history[-1]["metrics"] == {"loss": 1.0}
    assert ctx.train.get_experiment_best_validation() == 1.0
    with pytest.raises(RuntimeError, match="is None"):
        ctx.train.report_validation_metrics(4, {"loss": None})
    for bad in ("", "a.b", 3):
        with pytest.raises(ValueError, match="group"):
            ctx.train.report_metrics(bad, 1, {})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="from 0 to 1"):
        ctx.train.report_progress(1.5)
    ctx.train.report_progress(0.25)
    ctx.train.set_status("warming up")
    ctx.train.set_metadata({"a": 1})
    assert (ctx.train.progress, ctx.train.status, ctx.train.get_metadata()) == (0.25, "warming up", {"a": 1})
    with pytest.raises(RuntimeError, match="MANUAL"):
        ctx.train.upload_tensorboard_files()
    session = FakeSession()
    remote = core.TrainContext(session, 7, core.DistributedContext())  # type: ignore[arg-type]
    assert remote.get_experiment_best_validation() is None  # 404: none yet
    remote.report_early_exit(core.EarlyExitReason.INVALID_HP)
    remote.report_early_exit(core.EarlyExitReason.INVALID_HP)  # a repeat is not sent
    assert session.posts == [("/trials/7/early_exit", {"reason": "INVALID_HP"})]


def test_init_off_the_platform(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
                               caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv("DET_TRIAL_ID", raising=False)
    caplog.set_level("INFO", logger="determined.core")
    for where in (str(tmp_path / "a"), f"file://{tmp_path / 'b'}", {"type": "directory",
                                                                   "container_path": str(tmp_path / "c")}):
        with core.init(checkpoint_storage=where, tensorboard_mode=core.TensorboardMode.MANUAL) as ctx:
            assert not ctx.preempt.should_preempt()
            ctx.train.report_training_metrics(1, {"loss": 0.5})
            with ctx.checkpoint.store_path({"steps_completed": 1}) as (path, uuid):
                (path / "w").write_text("1")
            ctx.train.upload_tensorboard_files()  # MANUAL: allowed
        name = where if isinstance(where, str) else where["container_path"]
        assert (pathlib.Path(name.replace("file://", "")) / uuid / "w").is_file()
    assert "training metrics after 1 batches: {'loss': 0.5}" in caplog.text  # metrics go to the log
    with pytest.raises(errors.DeterminedError, match="gs:// storage is not supported"):
        core.init(checkpoint_storage="gs://bucket/x")
    with pytest.raises(SystemExit) as exit_info:  # det.InvalidHP escaping the `with`: exit 0, INVALID_HP
        with core.init(checkpoint_storage=str(tmp_path)) as ctx:
            raise det.InvalidHP("lr too large")
    assert exit_info.value.code == 0 and ctx.train.early_exit_reason == "INVALID_HP"


def test_the_profiler_reports_system_metric_groups(tmp_path: pathlib.Path) -> None:
    ctx = core._make_local_context(str(tmp_path), [], {}, {})
    with pytest.raises(ValueError, match="at least 0.1"):
        ctx.profiler.on(sampling_interval=0.01)
    ctx.profiler.on(sampling_interval=0.1, samples_per_report=2)
    ctx.profiler.on()  # idempotent
    deadline = time.monotonic() + 10
    while "cpu" not in ctx.train.group_history and time.monotonic() < deadline:
        time.sleep(0.05)
    ctx.close()  # turns it off
    cpu = ctx.train.group_history["cpu"][0]["metrics"]["cpu_util_simple"]
    assert 0 <= cpu <= 100 * 64
    assert {"cpu", "memory", "disk", "network"} <= set(ctx.train.group_history)
    assert ctx.train.group_history["memory"][0]["metrics"]["memory_free"] > 0


def test_gpu_samples_come_from_nvidia_smi(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPU here: a stand-in nvidia-smi prints what the real one prints for two GPUs."""
    from determined.core import _profiler

    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\nprintf '0, 35, 1024, 81920\\n1, 0, 10, 81920\\n'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert _profiler._gpu_sample() == {"gpu0_util": 35.0, "gpu0_memory_used_mb": 1024.0,
                                       "gpu0_free_memory_mb": 80896.0, "gpu1_util": 0.0,
                                       "gpu1_memory_used_mb": 10.0, "gpu1_free_memory_mb": 81910.0}


def test_from_tf_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """TF_CONFIG as determined.launch.tensorflow writes it: this worker's index and the workers; other task types and
    indexes outside the cluster are refused; without TF_CONFIG the context has size 1 with TensorFlow's default
    strategy (no GPU here)."""
    from determined.core import _tf_config

    cluster = {"worker": ["10.0.0.1:2222", "10.0.0.2:2222"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 1}}))
    assert _tf_config.parse_tf_config() == (1, cluster["worker"])
    for task, problem in (({"type": "ps", "index": 0}, "only 'worker'"), ({"type": "worker", "index": 2}, "index 2")):
        monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": task}))
        with pytest.raises(errors.DeterminedError, match=problem):
            core.DistributedContext.from_tf_config()
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(errors.DeterminedError, match="not a JSON object"):
        core.DistributedContext.from_tf_config()
    monkeypatch.delenv("TF_CONFIG")
    tf = pytest.importorskip("tensorflow")
    context, strategy = core.DistributedContext.from_tf_config()
    assert context.size == 1 and strategy is tf.distribute.get_strategy()
