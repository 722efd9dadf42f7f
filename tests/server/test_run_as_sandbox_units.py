"""The sandbox of a run (rm/sandbox.py) without a master: the bind mounts it refuses, the notice when none can be
made, and a sandboxed script that gets its SIGTERM (the time to checkpoint) although bwrap dies of one."""
import logging
import os
import pathlib
import signal
import subprocess
import time
import types

import pytest

from determined.master import master as master_mod
from determined.master.rm import local
from determined.master.rm.sandbox import RunRequest, Sandbox, SandboxRefused, account_of, sandbox_problem
from determined.master.rm.trial_env import TrialUser


def test_bind_mounts_that_would_expose_the_master_or_cover_the_run_are_refused(tmp_path: pathlib.Path) -> None:
    data, root, outside = tmp_path / "data", tmp_path / "roots" / "ck", tmp_path / "outside"
    for path in (data / "work" / "run", root, outside):
        path.mkdir(parents=True)
    sandbox = Sandbox(str(data), storage_roots=[str(root)])
    run_dir = str(data / "work" / "run")
    refused = [({"host_path": str(data), "container_path": "/mnt/x"}, "data dir or a checkpoint storage root"),
               ({"host_path": str(tmp_path), "container_path": "/mnt/x"}, "data dir or a checkpoint storage root"),
               ({"host_path": str(root / "sub"), "container_path": "/mnt/x"}, "does not exist"),
               ({"host_path": str(root), "container_path": "/mnt/x"}, "data dir or a checkpoint storage root"),
               ({"host_path": "relative/dir", "container_path": "/mnt/x"}, "must be an absolute path"),
               ({"host_path": str(outside), "container_path": "data"}, "is relative"),
               ({"host_path": str(outside), "container_path": "/"}, "other than / and ."),
               ({"host_path": str(outside), "container_path": "/proc/1"}, "/proc"),
               ({"host_path": str(outside), "container_path": str(data / "work")}, "the trial's own directory"),
               ({"host_path": str(outside), "container_path": "/mnt/x", "propagation": "bogus"}, "propagation")]
    for i, (mount, named) in enumerate(refused):
        with pytest.raises(SandboxRefused, match="bind_mounts\\[0\\]") as caught:
            sandbox.check_bind_mounts([mount], run_dir)
        assert named in str(caught.value), (i, str(caught.value))
    ok = sandbox.check_bind_mounts([{"host_path": str(outside), "container_path": "/mnt/x", "read_only": True}],
                                   run_dir)
    assert ok == [(str(outside), "/mnt/x", True)]


def test_a_server_that_cannot_sandbox_says_so_once(monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(master_mod, "sandbox_problem", lambda: "bubblewrap is not installed")
    with caplog.at_level(logging.WARNING, logger="determined.master"):
        assert master_mod.Master._sandbox(types.SimpleNamespace()) is None  # type: ignore[arg-type]
    [warning] = [r.getMessage() for r in caplog.records if "NOT SANDBOXED" in r.getMessage()]
    assert "bubblewrap is not installed" in warning and "/proc" in warning and "docs/auth.md" in warning


TRAPS = r'''
import os, signal, subprocess, sys, time
subprocess.run(["setsid", "sh", "-c", f"sleep {sys.argv[2]} </dev/null >/dev/null 2>&1 &"], check=True)
def checkpoint(*_):
    open(os.path.join(sys.argv[1], "checkpointed"), "w").write(str(os.getuid()))
    sys.exit(0)
signal.signal(signal.SIGTERM, checkpoint)
print(len([p for p in os.listdir("/proc") if p.isdigit()]), flush=True)
time.sleep(120)
'''


# A Python any account may run (the suite's own may live in root's home): the script needs only the standard library.
PUBLIC_PYTHON = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.access(p, os.X_OK)), None)


@pytest.mark.skipif(os.geteuid() != 0 or sandbox_problem() is not None or PUBLIC_PYTHON is None,
                    reason="needs root, bubblewrap and a system Python")
def test_a_sandboxed_script_gets_sigterm_and_its_setsid_child_dies_with_it(tmp_path: pathlib.Path) -> None:
    data = tmp_path / "data"
    run_dir = data / "work" / "run"
    run_dir.mkdir(parents=True)
    for path in (tmp_path, data, data / "work"):
        os.chmod(path, 0o711)
    nobody = account_of({"agent_uid": 65534, "agent_gid": 65534, "agent_user": "nobody", "agent_group": "nogroup"},
                        TrialUser("unused", 1, 1, (1,), "/"))
    os.chown(run_dir, nobody.uid, nobody.gid)
    (run_dir / "traps.py").write_text(TRAPS)
    sleep_arg = f"765.{os.getpid()}"  # this run's: a process left by another run is not this one's
    argv = Sandbox(str(data)).argv([str(PUBLIC_PYTHON), "traps.py", str(run_dir), sleep_arg], run_dir=str(run_dir),
                                   home=str(run_dir), account=nobody, request=RunRequest())
    popen = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True, umask=0o022,
                             env={"PATH": os.environ["PATH"]})
    try:
        visible = int(popen.stdout.readline())  # type: ignore[union-attr]
        assert visible <= 5, "its /proc shows its own few processes"
        proc = local.TrialProcess(1, "run", popen, [], str(run_dir), [], script=True, sandboxed=True)
        local.LocalResourceManager._kill_group(proc, signal.SIGTERM)
        assert popen.wait(timeout=60) == 0
        assert (run_dir / "checkpointed").read_text() == "65534"
        # The kernel kills what is left in the PID namespace once its init is gone; on a busy machine that can
        # land a moment after bwrap's own exit, so wait for it (a survivor stays: the loop then ends with it).
        deadline = time.monotonic() + 30
        while True:
            leftovers = subprocess.run(["pgrep", "-f", f"sleep {sleep_arg}"], capture_output=True,
                                       text=True).stdout.split()
            if not leftovers or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert leftovers == []
    finally:
        if popen.poll() is None:
            os.killpg(popen.pid, signal.SIGKILL)
            popen.wait()


def test_a_platform_installed_under_tmp_stays_reachable_in_the_private_tmp(tmp_path: pathlib.Path) -> None:
    """A checkout (and its .venv) under /tmp, as a CI clone may be: the run's private /tmp would hide the Python and
    the `determined` package, and the mount point's directories bwrap makes with the run's umask (077) would keep the
    account out. They are bound back read-only, through directories made passable (0755)."""
    import determined

    data = tmp_path / "data"
    (data / "work" / "run").mkdir(parents=True)
    sandbox = Sandbox(str(data))
    package = os.path.realpath(os.path.dirname(determined.__file__))
    assert package in sandbox.platform, "the package's own directory is bound, whatever the install"
    sandbox.platform = ["/tmp/ci/main/.venv"]
    nobody = TrialUser("nobody", 65534, 65534, (65534,), "/")
    argv = sandbox.argv(["true"], run_dir=str(data / "work" / "run"), home="", account=nobody, request=RunRequest())
    bind = argv.index("/tmp/ci/main/.venv")
    assert argv[bind - 1] == "--ro-bind"
    made = [argv[i + 1] for i in range(bind) if argv[i] == "--dir"]
    assert made[-2:] == ["/tmp/ci", "/tmp/ci/main"]
    for path in made[-2:]:
        i = argv.index(path)
        assert argv[i - 3:i] == ["--perms", "0755", "--dir"]
