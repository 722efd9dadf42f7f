"""The error raised for a bad experiment config, and the collector that gathers every problem in one pass."""
from typing import Any, Iterable, List, Sequence


class InvalidExperimentConfig(ValueError):
    """An experiment config that cannot be used.

    ``problems`` lists every problem found, each ``"<dotted.path>: <what is wrong>; <what is allowed>"``.
    """

    def __init__(self, problems: Sequence[str], header: str = "invalid experiment config") -> None:
        self.problems: List[str] = list(problems)
        self.header = header
        super().__init__(str(self))

    def __str__(self) -> str:
        count = len(self.problems)
        noun = "problem" if count == 1 else "problems"
        lines = [f"{self.header} ({count} {noun}):"]
        lines.extend(f"  - {problem}" for problem in self.problems)
        return "\n".join(lines)

    def __reduce__(self) -> Any:
        return (type(self), (self.problems, self.header))


class ConfigFileError(InvalidExperimentConfig):
    """A config file that cannot be read as a YAML mapping (missing file, syntax error, not a mapping)."""


def describe(value: Any) -> str:
    """Say what a value is, for error messages: ``'abc' (a string)``, ``3.5 (a float)``, ``[1, 2] (a list)``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{str(value).lower()} (a bool)"
    kinds = [(int, "an int"), (float, "a float"), (str, "a string"), (list, "a list"), (tuple, "a list"), (dict, "a mapping")]
    name = type(value).__name__
    kind = next((text for cls, text in kinds if isinstance(value, cls)), f"{'an' if name[0] in 'aeiou' else 'a'} {name}")
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({kind})"


def join_path(path: str, key: Any) -> str:
    """The dotted path of ``key`` inside ``path`` (list indices as ``[i]``)."""
    if isinstance(key, int) and not isinstance(key, bool):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def key_path(path: str, key: Any) -> str:
    """The dotted path of a mapping key, whatever its type (``data.1`` for an int key)."""
    return f"{path}.{key}" if path else str(key)


class Problems:
    """Collects problems while a config is checked, so that the user sees all of them at once."""

    def __init__(self) -> None:
        self.items: List[str] = []
        self._handled: set = set()

    def add(self, path: str, wrong: str, allowed: str) -> None:
        """Record that the value at ``path`` is wrong, and what would be allowed."""
        self.items.append(f"{path or 'config'}: {wrong}; {allowed}")

    def wrong_value(self, path: str, value: Any, allowed: str) -> None:
        """Record a value of the wrong type or out of range, saying what was given."""
        self.add(path, f"got {describe(value)}", allowed)

    def missing(self, path: str, allowed: str) -> None:
        if path not in self._handled:
            self.add(path, "missing", allowed)

    def mark_handled(self, path: str) -> None:
        """A problem about ``path`` was already reported under another name (a legacy field): do not report it missing."""
        self._handled.add(path)

    def is_handled(self, path: str) -> bool:
        """Whether a problem about ``path`` was already reported under another name (see ``mark_handled``)."""
        return path in self._handled

    def extend(self, items: Iterable[str]) -> None:
        self.items.extend(items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def raise_if_any(self, header: str = "invalid experiment config") -> None:
        if self.items:
            raise InvalidExperimentConfig(self.items, header)
