"""``entrypoint``: a Trial class (``module:Class``), a command run by ``sh -c``, or an argument list run as is.

Determined's rule (0.18+): a string that fully matches ``[a-zA-Z0-9_.]+:[a-zA-Z0-9_]+`` names a Trial class
(the legacy entrypoint); any other string is a shell command; a list is the command's arguments.
"""
import shlex
from typing import Any, List, Mapping, Optional

from determined.common.trial_class_entrypoint import is_trial_class
from determined.config.errors import Problems, describe
from determined.config.fields import INVALID, Spec

ENTRYPOINT_HINT = ("a Trial class `module:ClassName` (e.g. `model_def:MNistTrial`), a command (e.g. `python3 "
                   "train.py`), or a list of arguments (e.g. [python3, train.py, --epochs, '3'])")
MAX_ENTRYPOINT_CHARS = 64 * 1024
# Launchers of Determined that cannot run here, and what to use instead (the launcher itself says the same).
UNAVAILABLE_LAUNCHERS = {
    "determined.launch.horovod": "Horovod is not available here (Determined deprecated it in 0.38); use "
                                 "`python3 -m determined.launch.torch_distributed` with torch.distributed, or a "
                                 "Trial class entrypoint, which runs on every slot by itself",
}


def runs_native(config: Mapping[str, Any]) -> bool:
    """Whether a canonical config's trials run a Native API script (`internal.native.command`), whatever its
    entrypoint says (Determined's native experiments kept a placeholder entrypoint)."""
    internal = config.get("internal")
    return isinstance(internal, Mapping) and internal.get("native") is not None


def runs_a_script(config: Mapping[str, Any]) -> bool:
    """Whether a canonical config's trials run a command (a script) rather than a Trial class or a Native API
    script (whose command is `internal.native.command`)."""
    internal = config.get("internal")
    if isinstance(internal, Mapping) and internal.get("native") is not None:
        return False
    entrypoint = config.get("entrypoint")
    return isinstance(entrypoint, list) or (isinstance(entrypoint, str) and not is_trial_class(entrypoint))


def command_of(entrypoint: Any) -> List[str]:
    """The program and arguments of a script entrypoint: a list as is, a string under `sh -c`."""
    if isinstance(entrypoint, list):
        return [str(arg) for arg in entrypoint]
    if isinstance(entrypoint, str) and not is_trial_class(entrypoint):
        return ["sh", "-c", entrypoint]
    raise ValueError(f"entrypoint {entrypoint!r} is not a command")


def launched_trial_class(entrypoint: Any) -> Optional[str]:
    """The Trial class `module:Class` that a launcher command (`python3 -m determined.launch.X ... --trial
    module:Class`) runs on every slot; None for any other entrypoint."""
    if isinstance(entrypoint, list):
        words = [str(arg) for arg in entrypoint]
    elif isinstance(entrypoint, str) and not is_trial_class(entrypoint):
        try:
            words = shlex.split(entrypoint)
        except ValueError:
            return None
    else:
        return None
    launcher = next((i for i, w in enumerate(words[:-1]) if w == "-m" and words[i + 1].startswith(
        "determined.launch.")), None)
    if launcher is None:
        return None
    rest = words[launcher + 2:]
    for i, word in enumerate(rest):
        value = rest[i + 1] if word == "--trial" and i + 1 < len(rest) else word.partition("--trial=")[2]
        if is_trial_class(value):
            return value
    return None


def _unavailable_launcher(words: List[str], path: str, problems: Problems) -> bool:
    for launcher, instead in UNAVAILABLE_LAUNCHERS.items():
        if any(launcher in word for word in words):
            problems.add(path, f"runs {launcher}", instead)
            return True
    return False


class Entrypoint(Spec):
    allowed = ENTRYPOINT_HINT

    def check(self, value: Any, path: str, problems: Problems) -> Any:
        checked = self._check(value, path, problems)
        if checked is not INVALID and not is_trial_class(checked):
            words = checked if isinstance(checked, list) else checked.split()
            if _unavailable_launcher(words, path, problems):
                return INVALID
        return checked

    def _check(self, value: Any, path: str, problems: Problems) -> Any:
        if isinstance(value, str):
            text = value.strip()
            if not text:
                problems.add(path, "is empty", self.allowed)
                return INVALID
            if len(text) > MAX_ENTRYPOINT_CHARS:
                problems.add(path, f"is {len(text)} characters long", f"at most {MAX_ENTRYPOINT_CHARS} characters")
                return INVALID
            if ":" in text and not any(c.isspace() for c in text) and not is_trial_class(text):
                problems.add(path, f"{value!r} looks like a Trial class but is not `module:ClassName`",
                             "the class must be defined at the top level of its module (`package.module:ClassName`, "
                             "no dots after the colon), or give a command such as `python3 train.py`")
                return INVALID
            return value if is_trial_class(value) else text
        if isinstance(value, list):
            if not value:
                problems.add(path, "is an empty list", self.allowed)
                return INVALID
            bad = [i for i, arg in enumerate(value) if isinstance(arg, bool) or not isinstance(arg, (str, int, float))]
            if bad:
                problems.add(f"{path}[{bad[0]}]", f"got {describe(value[bad[0]])}",
                             "every argument of an entrypoint list is a string (quote numbers: '3')")
                return INVALID
            args = [str(arg) for arg in value]
            if not args[0].strip():
                problems.add(f"{path}[0]", "is empty", "the program to run, e.g. python3")
                return INVALID
            if sum(len(a) for a in args) > MAX_ENTRYPOINT_CHARS:
                problems.add(path, "is too long", f"at most {MAX_ENTRYPOINT_CHARS} characters in all")
                return INVALID
            return args
        problems.wrong_value(path, value, self.allowed)
        return INVALID
