"""The local resource manager's runs of scripts: one process holding all the run's slots; a kill is SIGTERM first."""
import pathlib
import sys
from typing import Any, List, Tuple

from determined.master.rm import LocalResourceManager, Slots, local
from tests.e2e._helpers import wait_for


def test_a_script_run_is_one_process_with_every_slot(tmp_path: pathlib.Path) -> None:
    script = tmp_path / "show.py"
    script.write_text("import os\nprint(*(f'{k}={os.environ.get(k)}' for k in ('DET_SLOT_IDS', 'RANK', "
                      "'WORLD_SIZE', 'DET_ALLOCATION_ID')))\n")
    logs: List[Tuple[str, str]] = []
    rm = LocalResourceManager(str(tmp_path / "work"), lambda t, ts, stream, line: logs.append((stream, line)),
                              slots=Slots(gpus=[], cpu_count=4), trial_command=[sys.executable, str(script)])
    rm.launch(trial_id=1, experiment_id=1, allocation_id="a1", token="t", slots_needed=3, master_url="http://x",
              script=True)
    assert rm.free_slots() == 1
    assert wait_for(rm.poll_exited, 30, 0.05, what="the run to end") == [(1, "a1", 0)]
    assert logs == [("stdout", "DET_SLOT_IDS=[0, 1, 2] RANK=None WORLD_SIZE=None DET_ALLOCATION_ID=a1")]


def test_killing_a_script_run_sends_sigterm_then_sigkill(tmp_path: pathlib.Path, monkeypatch: Any) -> None:
    script = tmp_path / "stubborn.py"
    script.write_text("import signal, sys, time\n"
                      "signal.signal(signal.SIGTERM, lambda *_: print('SIGTERM, ignored', flush=True))\n"
                      "print('ready', flush=True)\ntime.sleep(60)\n")
    monkeypatch.setattr(local, "TERM_GRACE_S", 0.5)
    logs: List[str] = []
    rm = LocalResourceManager(str(tmp_path / "work"), lambda t, ts, stream, line: logs.append(line),
                              slots=Slots(gpus=[], cpu_count=1), trial_command=[sys.executable, str(script)])
    rm.launch(trial_id=1, experiment_id=1, allocation_id="a1", token="t", slots_needed=1, master_url="http://x",
              script=True)
    wait_for(lambda: "ready" in logs, 30, 0.05, what="the script to start")
    rm.kill("a1")
    wait_for(lambda: "SIGTERM, ignored" in logs, 10, 0.05, what="SIGTERM")
    assert not rm.poll_exited()  # it ignored SIGTERM: still running until the grace ends

    def killed() -> List[Tuple[int, str, int]]:
        rm.enforce_deadlines()
        return rm.poll_exited()
    assert wait_for(killed, 10, 0.05, what="SIGKILL after the grace") == [(1, "a1", -9)]
