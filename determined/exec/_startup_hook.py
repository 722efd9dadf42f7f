"""``startup-hook.sh``: a shell script in the model directory that runs before the trial, as in Determined.

Determined sourced it (``set -e``, then ``source startup-hook.sh``) in the trial's working directory before it
started the harness, once per container. Here it runs the same way, once per run of a trial on each machine (the
first local rank runs it, the other local ranks wait for it), with the trial's environment, in the unpacked model
directory:

* its output goes to the trial's logs (each command echoed, as Determined's ``set -x`` did);
* variables it exports reach the trial (a hook may extend ``PYTHONPATH``);
* ``pip install`` in it installs into the trial's own interpreter (its directory is first on ``PATH``), and the
  trial imports what it installed; it may not replace a package the platform itself runs on (``_pip_guard``:
  ``PIP_CONSTRAINT`` pins them while the hook runs), since trials share the platform's environment;
* a failing command fails the run with an error naming the hook and the exit status (the trial restarts, up to
  ``max_restarts``, as a failing container did).

``det experiment create --local --test`` does not run it (Determined's local test mode did not either).
"""
import importlib
import json
import logging
import os
import pathlib
import shutil
import site
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Mapping, Optional, Set, Tuple

from determined import errors
from determined.exec import _pip_guard

logger = logging.getLogger("determined.harness")

HOOK_NAME = "startup-hook.sh"
# Variables of the shell itself, not of the hook.
_SHELL_VARIABLES = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "DET_STARTUP_HOOK_ENV"})
WAIT_POLL_S = 0.1


class StartupHookError(errors.DeterminedError):
    """The model directory's startup-hook.sh failed."""


def _local_rank() -> Tuple[int, int]:
    try:
        return int(os.environ.get("LOCAL_RANK") or 0), int(os.environ.get("LOCAL_WORLD_SIZE") or 1)
    except ValueError:
        return 0, 1


def _status_file() -> pathlib.Path:
    run = os.environ.get("DET_ALLOCATION_ID") or f"pid{os.getppid()}"
    return pathlib.Path(tempfile.gettempdir()) / f"det-startup-hook-{run}.status"


def _site_dirs() -> List[str]:
    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return dirs


def _pth_files() -> Set[Tuple[str, str]]:
    found = set()
    for directory in _site_dirs():
        try:
            found.update((directory, name) for name in os.listdir(directory) if name.endswith(".pth"))
        except OSError:
            pass
    return found


# Like Determined's container entrypoint: stop at the first failing command and echo each one; on success, write the
# environment the hook leaves (as JSON) for the harness to take on.
_WRAPPER = r"""__det_hook_exit() {
  { set +x; } 2>/dev/null
  if [ "$1" -eq 0 ]; then
    "$DET_PYTHON" -c 'import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], "w"))' "$DET_STARTUP_HOOK_ENV"
  fi
  exit "$1"
}
trap '__det_hook_exit $?' EXIT
set -e
set -x
. ./startup-hook.sh
"""


def _run_hook(work_dir: pathlib.Path) -> Tuple[int, Optional[Dict[str, str]]]:
    """Run the hook; its exit status and, on success, the environment it left."""
    bin_dir = os.path.dirname(sys.executable)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")]) if env.get("PATH") else bin_dir
    env["DET_PYTHON"] = sys.executable
    fd, env_file = tempfile.mkstemp(prefix="det-hook-env-", suffix=".json")
    os.close(fd)
    env["DET_STARTUP_HOOK_ENV"] = env_file
    pins_file = _pip_guard.write_constraints(_pip_guard.platform_pins())
    env["PIP_CONSTRAINT"] = _pip_guard.constraint_variable(env.get("PIP_CONSTRAINT"), pins_file)
    shell = shutil.which("bash") or "sh"
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        code = subprocess.run([shell, "-c", _WRAPPER], cwd=str(work_dir), env=env,
                              stdin=subprocess.DEVNULL).returncode
        if code != 0:
            return code, None
        try:
            with open(env_file, encoding="utf-8") as f:
                after = json.load(f)
        except (OSError, ValueError):
            return code, None
        before = {**env}
        # The pins are the hook's alone: the trial keeps the PIP_CONSTRAINT it had, plus what the hook added.
        before.pop("PIP_CONSTRAINT")
        if "PIP_CONSTRAINT" in os.environ:
            before["PIP_CONSTRAINT"] = os.environ["PIP_CONSTRAINT"]
        if "PIP_CONSTRAINT" in after:
            rest = " ".join(p for p in after.pop("PIP_CONSTRAINT").split() if p != pins_file)
            if rest or "PIP_CONSTRAINT" in before:
                after["PIP_CONSTRAINT"] = rest
        changed = {k: v for k, v in after.items() if k not in _SHELL_VARIABLES and before.get(k) != v}
        removed = [k for k in before if k not in after and k not in _SHELL_VARIABLES]
        changed.update({k: None for k in removed})  # type: ignore[misc]
        return code, changed
    finally:
        for path in (env_file, pins_file):
            try:
                os.unlink(path)
            except OSError:
                pass


def _apply(changes: Mapping[str, Optional[str]]) -> None:
    """Take on the variables the hook exported (or unset), as a sourced hook's would have been."""
    for name, value in changes.items():
        if name in ("DET_PYTHON",):
            continue
        if value is None:
            os.environ.pop(name, None)
            continue
        previous = os.environ.get(name, "")
        os.environ[name] = value
        if name == "PYTHONPATH":
            old = set(filter(None, previous.split(os.pathsep)))
            for entry in reversed([p for p in value.split(os.pathsep) if p and p not in old]):
                if entry not in sys.path:
                    sys.path.insert(0, entry)
        elif name.startswith("PYTHON") or name.startswith("LD_"):
            logger.info("%s: %s changed; it takes effect in the processes the trial starts", HOOK_NAME, name)


def _refresh_imports(pth_before: Set[Tuple[str, str]]) -> None:
    """Make what the hook installed importable in this process: new site dirs and .pth files, fresh finders."""
    for directory in _site_dirs():
        if os.path.isdir(directory) and directory not in sys.path:
            site.addsitedir(directory)
    for directory, name in sorted(_pth_files() - pth_before):
        site.addpackage(directory, name, None)  # type: ignore[attr-defined]
    importlib.invalidate_caches()


def run_startup_hook(work_dir: "os.PathLike[str] | str") -> bool:
    """Run ``startup-hook.sh`` of the unpacked model directory, if it has one; True when it ran here.

    Raises StartupHookError when the hook fails (on every local rank, so that the whole run fails).
    """
    work = pathlib.Path(work_dir)
    if not (work / HOOK_NAME).is_file():
        return False
    local_rank, local_size = _local_rank()
    status_file = _status_file()
    pth_before = _pth_files()
    if local_rank != 0:
        logger.info("waiting for local rank 0 to run %s", HOOK_NAME)
        while not status_file.exists():
            time.sleep(WAIT_POLL_S)
        status = json.loads(status_file.read_text() or "{}")
        code, changes = int(status.get("code", 1)), status.get("changes")
        if code != 0:
            raise StartupHookError(f"{HOOK_NAME} failed on local rank 0 (exit status {code}); see its output there")
    else:
        logger.info("running %s of the model directory", HOOK_NAME)
        started = time.monotonic()
        code, changes = _run_hook(work)
        if local_size > 1:  # what the other local ranks wait for: how it went, and the variables it exported
            partial = status_file.with_suffix(".tmp")
            partial.write_text(json.dumps({"code": code, "changes": changes}))
            partial.replace(status_file)
        if code != 0:
            raise StartupHookError(
                f"{HOOK_NAME} failed with exit status {code} (the command echoed last above failed); fix the hook, "
                "or remove it from the model directory (a pip install that conflicts with a 'constraint' would have "
                "replaced a package the platform runs on: docs/config.md, startup-hook.sh)"
            )
        logger.info("%s finished in %.1f s", HOOK_NAME, time.monotonic() - started)
    if changes:
        _apply(changes)
    _refresh_imports(pth_before)
    return local_rank == 0


def forget_status() -> None:
    """Remove the file that told the other local ranks how the hook went (at the end of the run)."""
    try:
        _status_file().unlink()
    except OSError:
        pass
