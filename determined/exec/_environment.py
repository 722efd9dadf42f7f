"""The experiment's ``environment.environment_variables`` in the trial's process.

Determined set them in the trial's container; here the harness sets them in its own process as soon as it has
the trial's config, before the startup hook and the user's code run. The list for the trial's kind of slot is
used (``cpu``, or ``cuda`` when the trial has GPUs). Variables the platform sets for each run (``DET_*``, the
ranks, ``CUDA_VISIBLE_DEVICES``) keep the platform's value. Variables the interpreter reads only when it starts
(``PYTHON*``, ``LD_*``) restart the harness process once with the new environment, so that they take effect.
"""
import logging
import os
import sys
from typing import Any, Dict, List, Mapping, Optional, Tuple

from determined.config import environment_variables
from determined.exec._import_time_variables import IMPORT_TIME_PREFIXES, PER_TRIAL_NAMES

logger = logging.getLogger("determined.harness")

PLATFORM_VARIABLES = frozenset({
    "CUDA_VISIBLE_DEVICES", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
    "MASTER_PORT",
})
RESTART_GUARD = "DET_HARNESS_ENVIRONMENT_APPLIED"
# Names a file that holds the run's context, handed over by the resource manager that started the run (the local
# one): the harness reads it instead of asking the master (see `take_run_context`).
RUN_CONTEXT_ENV = "DET_RUN_CONTEXT_FILE"
RUN_CONTEXT_FILE = ".det-run-context.json"


def write_run_context(directory: str, context: Mapping[str, Any], owner: Optional[Tuple[int, int]] = None) -> str:
    """Write the run's context into its run directory, readable by the run's user only (it holds the config's
    secrets, as the run's own `GET /trials/{id}/context` answer does; `owner`: that user's (uid, gid) when it is not
    this process's); its path, for RUN_CONTEXT_ENV."""
    import json

    path = os.path.join(directory, RUN_CONTEXT_FILE)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        json.dump(context, f)
    if owner is not None:
        os.chown(path, *owner)
    return path


def take_run_context(trial_id: int) -> Optional[Dict[str, Any]]:
    """The context handed over in RUN_CONTEXT_ENV's file, when it is this trial's (else None: ask the master). The
    variable is removed from the environment: the trial's code and the processes it starts never see it."""
    path = os.environ.pop(RUN_CONTEXT_ENV, None)
    if not path:
        return None
    try:
        import json

        with open(path) as f:
            context = json.load(f)
    except (OSError, ValueError) as e:
        logger.warning("could not read the run's context from %s (%s); asking the master", path, e)
        return None
    if not isinstance(context, dict) or context.get("trial_id") != trial_id:
        return None
    return context


def trial_device() -> str:
    """The kind of slot this trial process runs on: ``cuda`` when it was given GPUs, else ``cpu``."""
    return "cuda" if os.environ.get("CUDA_VISIBLE_DEVICES", "").strip() else "cpu"


def _platform_owned(name: str) -> bool:
    return name in PLATFORM_VARIABLES or name.startswith("DET_")


# The framework a warm process (determined/exec/forkserver.py) imported before it became this trial's: variables
# read when a framework is imported need a fresh process there too.
PRELOADED_FRAMEWORK: Optional[str] = None


def _read_at_start(name: str) -> bool:
    if PRELOADED_FRAMEWORK is not None:
        return name.startswith(IMPORT_TIME_PREFIXES) and name not in PER_TRIAL_NAMES
    return name.startswith("PYTHON") or name.startswith("LD_")


def wanted_changes(config: Mapping[str, Any], environ: Mapping[str, str]) -> Dict[str, str]:
    """The config's variables for this trial that differ from ``environ``, without the platform's own."""
    wanted = environment_variables(config, trial_device())
    for name in sorted(n for n in wanted if _platform_owned(n)):
        logger.warning("environment.environment_variables: %s is set by the platform for each trial; the "
                       "config's value is not used", name)
    return {n: v for n, v in wanted.items() if not _platform_owned(n) and environ.get(n) != v}


def apply_environment_variables(config: Mapping[str, Any]) -> List[str]:
    """Set the config's environment variables in this process; returns the names set.

    When one of them is read only at interpreter start, the harness is started again in this process (exec) with
    the new environment, once.
    """
    changes = wanted_changes(config, os.environ)
    if not changes:
        return []
    os.environ.update(changes)
    at_start = sorted(n for n in changes if _read_at_start(n))
    if at_start and not os.environ.get(RESTART_GUARD):
        os.environ[RESTART_GUARD] = "1"
        logger.info("restarting the trial's process so that %s take effect (environment_variables)", ", ".join(at_start))
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, "-m", "determined.exec.harness"])
    logger.info("environment.environment_variables: set %s", ", ".join(sorted(changes)))
    return sorted(changes)
