"""The local RM runs a multi-slot trial as N workers; one dying restarts the trial from its checkpoint."""
import os
import pathlib
import signal
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

from determined import master
from determined.common.api import Session
from determined.master.rm import LocalResourceManager, Slots
from tests import _patience

HERE = pathlib.Path(__file__).resolve().parent

sys.path.insert(0, str(HERE.parent / "master"))
from _helpers import model_def  # noqa: E402


def wait_for(what: Callable[[], Any], timeout: float, message: str) -> Any:
    return _patience.wait_for(what, timeout, message, interval=0.1)  # timeout x the load factor


def test_rm_starts_one_worker_per_slot(tmp_path: pathlib.Path) -> None:
    script = tmp_path / "show_env.py"
    script.write_text(
        "import os\n"
        "print(' '.join(f'{k}={os.environ.get(k)}' for k in ('RANK', 'WORLD_SIZE', 'DET_ALLOCATION_ID', "
        "'CUDA_VISIBLE_DEVICES', 'OMP_NUM_THREADS')))\n"
    )
    logs: List[Tuple[int, str, str]] = []
    rm = LocalResourceManager(str(tmp_path / "work"), lambda t, ts, stream, line: logs.append((t, stream, line)),
                              slots=Slots(gpus=[], cpu_count=4), trial_command=[sys.executable, str(script)])
    assert rm.command_for(1) == [sys.executable, str(script)]
    rm.launch(trial_id=7, experiment_id=1, allocation_id="a1", token="t", slots_needed=2, master_url="http://x")
    assert rm.free_slots() == 2 and list(rm.running()) == ["a1"]
    exited = wait_for(rm.poll_exited, 30, "the workers to exit")
    assert exited == [(7, "a1", 0)] and rm.free_slots() == 4
    lines = sorted(line for _, stream, line in logs if "RANK=" in line)
    threads = max(1, (os.cpu_count() or 1) // 4) * 2 // 2
    assert lines == [f"[rank {r}] RANK={r} WORLD_SIZE=2 DET_ALLOCATION_ID=a1 CUDA_VISIBLE_DEVICES= "
                     f"OMP_NUM_THREADS={threads}" for r in (0, 1)]


TRIAL_CONFIG: Dict[str, Any] = {
    "entrypoint": "_ddp_trials:LinearTrial",
    "hyperparameters": {"global_batch_size": 8, "lr": 0.1, "sleep": 0.15},
    "searcher": {"name": "single", "metric": "val_loss", "max_length": {"batches": 30}},
    "min_checkpoint_period": {"batches": 5},
    "resources": {"slots_per_trial": 2},
    "max_restarts": 2,
}


def _worker_pids(trial_id: int, rank: int) -> List[int]:
    pids = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if b"determined.exec.harness" not in (entry / "cmdline").read_bytes():
                continue
            environ = set((entry / "environ").read_bytes().split(b"\0"))
        except OSError:
            continue
        if {f"DET_TRIAL_ID={trial_id}".encode(), f"RANK={rank}".encode(),
            f"DET_DATA_DIR={os.environ['DET_DATA_DIR']}".encode()} <= environ:
            pids.append(int(entry.name))
    return pids


@pytest.mark.slow
def test_killing_one_worker_restarts_the_trial_from_its_checkpoint(det_data_dir: pathlib.Path) -> None:
    files = {"_ddp_trials.py": (HERE / "_ddp_trials.py").read_text()}
    embedded = master.start(det_data_dir, slots=Slots(gpus=[], cpu_count=2), preemption_timeout=30)
    try:
        session = Session(embedded.url)
        exp_id = int(session.post("/experiments", {"config": TRIAL_CONFIG, "model_definition": model_def(files)})
                     ["experiment"]["id"])
        trial_id = wait_for(lambda: session.get(f"/experiments/{exp_id}")["trials"], 30, "the trial")[0]["id"]

        def checkpointed() -> Optional[int]:
            checkpoints = session.get(f"/trials/{trial_id}")["checkpoints"]
            return max((c["steps_completed"] for c in checkpoints), default=None)

        steps_at_kill = wait_for(checkpointed, 90, "a first checkpoint")
        victim = _worker_pids(trial_id, 1)
        assert len(victim) == 1, victim
        killed_at = time.monotonic()
        os.kill(victim[0], signal.SIGKILL)

        def restarted() -> bool:
            return session.get(f"/trials/{trial_id}")["trial"]["restarts"] == 1
        wait_for(restarted, 30, "the master to see the run fail")
        # 15 s on a quiet machine (a surviving rank that kept the run alive would hold it far longer)
        assert time.monotonic() - killed_at < _patience.scaled(15), "the surviving rank kept the run alive"

        def finished() -> Optional[str]:
            state = session.get(f"/experiments/{exp_id}")["experiment"]["state"]
            return state if state in ("COMPLETED", "ERROR", "CANCELED") else None
        assert wait_for(finished, 120, "the experiment to end") == "COMPLETED"
        detail = session.get(f"/trials/{trial_id}")
        assert detail["trial"]["restarts"] == 1 and detail["trial"]["total_batches"] == 30
        steps = sorted(c["steps_completed"] for c in detail["checkpoints"])
        assert steps[-1] == 30 and steps_at_kill in steps
        logs = session.get(f"/trials/{trial_id}/logs", params={"limit": 10000})["logs"]
        text = "\n".join(entry["message"] for entry in logs)
        assert "rank 1 exited with status 137; stopping rank(s) [0]" in text
        assert "restored checkpoint" in text
    finally:
        embedded.stop(timeout=10)
