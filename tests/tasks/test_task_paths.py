"""A task's `work_dir` and `bind_mounts` checked at submit where tasks are not sandboxed (tasks/config.py's
`check_on_host`; the sandboxed server's checks are in tests/server/test_task_sandbox.py): each refusal names the
problem and the fix, and the note on bind_mounts says exactly what happens without a sandbox."""
import os
import pathlib
from typing import Any, Dict, List

import pytest

from determined.master.problems import RequestProblem
from determined.master.rm.trial_env import TrialUser
from determined.master.tasks import config, states


def _problems(raw: Dict[str, Any], host: config.Host) -> List[str]:
    with pytest.raises(RequestProblem) as refusal:
        config.check_on_host(config.check(raw, states.COMMAND, total_slots=1, default_pool="default"), host, None)
    assert refusal.value.status == 400
    return list(refusal.value.problems)


def test_work_dir_must_be_a_directory_the_tasks_account_can_enter(tmp_path: pathlib.Path) -> None:
    plain = config.Host()  # tasks run as the master's own account
    [missing] = _problems({"entrypoint": "true", "work_dir": str(tmp_path / "nowhere")}, plain)
    assert "does not exist on the master's machine" in missing and "create it first" in missing, missing
    (tmp_path / "file").write_text("")
    [not_dir] = _problems({"entrypoint": "true", "work_dir": str(tmp_path / "file")}, plain)
    assert "is not a directory" in not_dir, not_dir
    # A container_path named as work_dir: nothing is mounted here, and the problem says so.
    [unmounted] = _problems({"entrypoint": "true", "work_dir": "/mnt/det-unmounted/data",
                             "bind_mounts": [{"host_path": str(tmp_path), "container_path": "/mnt/det-unmounted"}]},
                            plain)
    assert "does not sandbox tasks" in unmounted and "use the host path" in unmounted, unmounted

    # On a run-as server the task's account is checked, by its ids: a directory only root may enter is refused
    # for it (the master, root, could enter it), with the directory that stops it.
    private = tmp_path / "root-only"
    (private / "inner").mkdir(parents=True)
    os.chmod(private, 0o700)
    account = TrialUser("dettrialprobe", 54321, 54321, (54321,), "")
    [denied] = _problems({"entrypoint": "true", "work_dir": str(private / "inner")}, config.Host(account))
    assert "cannot be entered by dettrialprobe (uid 54321, gid 54321)" in denied and "chmod" in denied, denied
    checked = config.check({"entrypoint": "true", "work_dir": str(tmp_path)}, states.COMMAND, total_slots=1,
                           default_pool="default")
    config.check_on_host(checked, config.Host(TrialUser("root", 0, 0, (0,), "")), None)  # root enters everything


def test_bind_mounts_are_checked_as_an_experiments_and_noted_without_a_sandbox(tmp_path: pathlib.Path) -> None:
    with pytest.raises(RequestProblem) as refusal:
        config.check({"entrypoint": "true", "bind_mounts": [{"host_path": "data", "container_path": ".",
                                                             "mode": "rw"}]},
                     states.COMMAND, total_slots=1, default_pool="default")
    problems = "\n".join(refusal.value.problems)
    for field in ("bind_mounts[0].host_path", "bind_mounts[0].container_path", "bind_mounts[0].mode"):
        assert field in problems, problems
    checked = config.check({"entrypoint": "true", "bind_mounts": [
        {"host_path": str(tmp_path), "container_path": "/mnt/data", "read_only": True}]},
        states.COMMAND, total_slots=1, default_pool="default")
    assert checked.raw["bind_mounts"] == [{"host_path": str(tmp_path), "container_path": "/mnt/data",
                                           "read_only": True, "propagation": "rprivate"}]
    config.check_on_host(checked, config.Host(), None)
    [note] = [n for n in checked.notes if n.startswith("bind_mounts:")]
    assert "visible as-is" in note and "does not exist in the task" in note, note
