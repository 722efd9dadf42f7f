"""`die_with_parent`: the `preexec_fn` that makes a child process get SIGKILL when the process that started it
dies (Linux; elsewhere it does nothing)."""
import ctypes
import signal
import sys
from typing import Any

_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Any:
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None


# Looked up here, in the parent: a dlopen between fork and exec can deadlock when another thread held the
# loader's lock at the fork.
_PRCTL = _load_prctl() if sys.platform.startswith("linux") else None


def die_with_parent() -> None:
    """Runs in the child between fork and exec: SIGKILL this process when its parent thread ends."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)
