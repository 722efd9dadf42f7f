"""Running a script entrypoint: the trial's command in the model directory, with the trial's environment.

A string entrypoint runs under `sh -c`, a list is run as is (Determined 0.18+). `python3` and `python` in the
command are the trial's interpreter, the one running the harness, so the script imports this platform: a list
that starts with one of them runs that interpreter, and a directory of `python`/`python3` wrappers comes first
on the PATH of the command (for `sh -c` strings and for the commands the script starts, such as the launcher's
workers).

The command runs in the harness's process group, which the resource manager signals as a whole (SIGTERM when
a script run is killed, then SIGKILL), so the harness only outlives it: it waits for the command and exits
with its status, keeping the run's slots until every process of the script is gone.
"""
import logging
import os
import pathlib
import shlex
import signal
import subprocess
import sys
from typing import Dict, List, Mapping, Sequence

logger = logging.getLogger("determined.harness")

PYTHON_NAMES = ("python", "python3")
# Signals the harness must survive while the command runs (their default action would end the harness first).
_OUTLIVED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


def write_python_shims(bin_dir: pathlib.Path) -> pathlib.Path:
    """`python` and `python3` in `bin_dir`, each running this interpreter; returns `bin_dir`."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    executable = sys.executable.replace("'", "'\\''")
    for name in PYTHON_NAMES:
        shim = bin_dir / name
        shim.write_text(f"#!/bin/sh\nexec '{executable}' \"$@\"\n")
        shim.chmod(0o755)
    return bin_dir


def command_argv(command: Sequence[str]) -> List[str]:
    """The argv to start: a leading `python`/`python3` is this interpreter."""
    argv = list(command)
    if argv and argv[0] in PYTHON_NAMES:
        argv[0] = sys.executable
    return argv


def script_environment(base: Mapping[str, str], trial_env: Mapping[str, str], bin_dir: pathlib.Path) -> Dict[str, str]:
    """The command's environment: `base` with the trial's variables, the python wrappers first on PATH."""
    env = dict(base)
    env.update(trial_env)
    env["PATH"] = os.pathsep.join([str(bin_dir), *[p for p in env.get("PATH", os.defpath).split(os.pathsep) if p]])
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def exit_status(returncode: int) -> int:
    """A process's status as a shell reports it: 128 + N after signal N."""
    return 128 - returncode if returncode < 0 else returncode


def run_command(command: Sequence[str], cwd: str, env: Mapping[str, str]) -> int:
    """Run the trial's command in `cwd` until it exits; its exit status (127 when it cannot be started)."""
    argv = command_argv(command)
    logger.info("running the entrypoint command %s", shlex.join(argv))
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    previous = {signum: signal.getsignal(signum) for signum in _OUTLIVED}
    try:
        for signum in _OUTLIVED:  # a handler, not SIG_IGN: the command must start with the default actions
            signal.signal(signum, _note_signal)
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL)
        except OSError as e:
            logger.error("cannot start the entrypoint command %r: %s", argv[0], e.strerror or e)
            return 127
        while True:
            try:
                code = proc.wait()
                break
            except InterruptedError:  # pragma: no cover -- wait() retries on EINTR since Python 3.5
                continue
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    status = exit_status(code)
    logger.info("the entrypoint command exited with status %d", status)
    return status


def _note_signal(signum: int, frame: object) -> None:
    logger.info("received %s; the entrypoint command, in the same process group, handles it",
                signal.Signals(signum).name)
