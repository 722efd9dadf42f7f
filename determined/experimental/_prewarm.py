"""Start the experiment's fork server as early as a command knows it will run the experiment on the embedded master.

The framework's import (seconds) then runs beside everything else the command does before its first trial: its
own imports, the master's start. The master's resource manager adopts the server when its environment is the one
it would start it with (determined/exec/forkserver.py). This module imports nothing of the client or the master's
web stack, so that a command can call it before it imports those.
"""
import os
from typing import Any, Dict

from determined import common


def prewarm(raw: Dict[str, Any], model_dir: str) -> None:
    """Start the fork server that the experiment's trials will start in, unless warm starts are off: the one of
    the framework that `model_dir`'s entrypoint imports (which also imports the model's modules from outside its
    directory), else the harness-only one (a Native API command, a script, a framework without a server)."""
    from determined.common.framework_scan import scan_directory
    from determined.master.rm.local import PRESTART_ENV, WARM_ENV

    off = any(os.environ.get(name, "").strip() == "0" for name in (PRESTART_ENV, WARM_ENV))
    if off:
        return
    native = bool(((raw.get("internal") or {}).get("native") or {}).get("command"))
    imports = None if native else scan_directory(model_dir, raw.get("entrypoint"))
    from determined.exec import forkserver
    from determined.master.rm.local import warm_environment
    from determined.master.rm.slots import detect_slots
    from determined.master.rm.trial_env import inherited_environment

    try:
        env = warm_environment(inherited_environment(os.environ), detect_slots())
        # the model's other imports too, unless the experiment sets variables of its own (not set in the server)
        server = forkserver.server_for(imports.framework if imports is not None else None)
        preload = () if (imports is None or server == forkserver.HARNESS_ONLY
                         or (raw.get("environment") or {}).get("environment_variables")) else imports.modules
        forkserver.prewarm(server, str(common.data_dir() / "work"), env, preload)
    except (OSError, ValueError):  # the master reports a bad DET_CPU_SLOTS or data dir itself
        pass
