"""Whether an entrypoint names a Trial class (`module:Class`) rather than a command: Determined's rule (0.18+)."""
import re
from typing import Any

# A string that fully matches this names a Trial class (the legacy entrypoint); any other string is a shell command.
TRIAL_CLASS_PATTERN = re.compile(r"[a-zA-Z0-9_.]+:[a-zA-Z0-9_]+")


def is_trial_class(entrypoint: Any) -> bool:
    """Whether `entrypoint` names a Trial class (`module:Class`) rather than a command."""
    return isinstance(entrypoint, str) and TRIAL_CLASS_PATTERN.fullmatch(entrypoint) is not None
