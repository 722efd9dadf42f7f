"""`exit_process` (determined/common/_exit.py): a process ends as the interpreter would end it, minus the teardown."""
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import atexit, gc, os, sys, threading, time
    from determined.common._exit import exit_process

    out = sys.argv[1]
    mode = sys.argv[2]
    if mode == "forked":  # as in a fork server's child: the parent's objects frozen, the child runs and exits
        gc.freeze()
        pid = os.fork()
        if pid:
            _, status = os.waitpid(pid, 0)
            os._exit(os.waitstatus_to_exitcode(status) + 100)
    left_open = open(os.path.join(out, "unclosed.txt"), "w")  # never closed, never flushed by the script
    left_open.write("written before exit")
    atexit.register(lambda: open(os.path.join(out, "atexit.txt"), "w").write("atexit ran"))

    def late() -> None:
        time.sleep(0.3)
        with open(os.path.join(out, "thread.txt"), "w") as f:
            f.write("non-daemon thread finished")

    threading.Thread(target=late).start()
    print("to stdout, buffered", end="")
    if mode == "forked":
        exit_process(7)
    exit_process(sys.argv[3] if mode == "message" else 3)
""")


def _run(tmp_path: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(__file__).resolve().parents[2]))
    return subprocess.run([sys.executable, str(script), str(tmp_path), *args], env=env, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("mode", ["plain", "forked"])
def test_exit_keeps_what_the_interpreter_does_at_exit(tmp_path: pathlib.Path, mode: str) -> None:
    proc = _run(tmp_path, mode)
    assert proc.returncode == (3 if mode == "plain" else 107), proc.stderr
    assert proc.stdout == "to stdout, buffered"
    assert (tmp_path / "unclosed.txt").read_text() == "written before exit"
    assert (tmp_path / "atexit.txt").read_text() == "atexit ran"
    assert (tmp_path / "thread.txt").read_text() == "non-daemon thread finished"


def test_a_message_exits_1_and_is_printed(tmp_path: pathlib.Path) -> None:
    proc = _run(tmp_path, "message", "bad things")
    assert proc.returncode == 1
    assert proc.stderr.strip() == "bad things"


def test_the_det_script_exits_with_mains_status(tmp_path: pathlib.Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(__file__).resolve().parents[2]))
    ok = subprocess.run([sys.executable, "-m", "determined", "--version"], env=env, capture_output=True, text=True,
                        timeout=60)
    assert ok.returncode == 0 and ok.stdout.startswith("det ")
    bad = subprocess.run([sys.executable, "-m", "determined", "experiment", "describe", "99999"], env=dict(
        env, DET_DATA_DIR=str(tmp_path / "data")), capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "Error" in bad.stderr
