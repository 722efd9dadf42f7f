"""What several `det` commands share to read their input: the yes/no question, boolean and id-list flags.

The lowest module of the command modules (it imports none of them), so that they import it and never each other
in a circle.
"""
import sys
from typing import List, Optional

from determined import errors


def confirm(question: str) -> bool:
    """Ask `question` on stdout; True when the answer read from stdin is y or yes."""
    print(question + " [y/N] ", end="", flush=True)
    try:
        answer = sys.stdin.readline()
    except (OSError, ValueError):
        answer = ""
    if not answer:
        print()
    return answer.strip().lower() in ("y", "yes")


def smaller_is_better(text: Optional[str]) -> Optional[bool]:
    """`--smaller-is-better true|false`."""
    if text is None:
        return None
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise errors.DeterminedError(f"--smaller-is-better takes true or false, not {text!r}")


def experiment_ids(values: List[str]) -> List[int]:
    """`det experiment describe 1 2` or, as Determined 0.38 takes them, `1,2`."""
    ids = []
    for value in values:
        for part in str(value).split(","):
            if not part.strip().isdigit():
                raise errors.DeterminedError(f"experiment ids are numbers (`1 2` or `1,2`), not {part.strip()!r}")
            ids.append(int(part))
    return ids
