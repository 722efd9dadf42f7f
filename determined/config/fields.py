"""A small declarative validator: specs that check one value, report problems, and return its canonical form.

Every ``Spec.check(value, path, problems)`` returns the canonical value, or ``INVALID`` after reporting a problem.
A ``null`` value means "not given", as in Determined's own config parser, so the field's default applies.
"""
import copy
import difflib
import math
import re
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from determined.config.errors import Problems, join_path, key_path
from determined.config.suggest import closest


class _Invalid:
    def __repr__(self) -> str:
        return "INVALID"


INVALID: Any = _Invalid()
REQUIRED: Any = object()


def is_int(value: Any) -> bool:
    """True for ints and integral floats, never for bools."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _bounds_text(noun: str, minimum: Any, maximum: Any, exclusive_min: bool) -> str:
    if minimum is not None and maximum is not None:
        low = f"> {minimum}" if exclusive_min else f"from {minimum}"
        return f"{noun} {low} to {maximum}" if not exclusive_min else f"{noun} {low} and <= {maximum}"
    if minimum is not None:
        if minimum == 1 and noun == "an int" and not exclusive_min:
            return "a positive int"
        return f"{noun} {'>' if exclusive_min else '>='} {minimum}"
    if maximum is not None:
        return f"{noun} <= {maximum}"
    return noun


class Spec:
    """Checks one value. ``allowed`` says, for error messages, what the value may be."""

    allowed = "a value"

    def check(self, value: Any, path: str, problems: Problems) -> Any:
        raise TypeError(f"{type(self).__name__} must define check()")  # programming error, never user-reachable


class Int(Spec):
    def __init__(self, minimum: Optional[int] = None, maximum: Optional[int] = None) -> None:
        self.minimum, self.maximum = minimum, maximum
        self.allowed = _bounds_text("an int", minimum, maximum, False)

    def check(self, value: Any, path: str, problems: Problems) -> Any:
        if not is_int(value):
            problems.wrong_value(path, value, self.allowed)
            return INVALID
        value = int(value)
        if (self.minimum is not None and value < self.minimum) or (self.maximum is not None and value > self.maximum):
            problems.wrong_value(path, value, self.allowed)
            return INVALID
        return value


class Number(Spec):
    """An int or a float; ints stay ints (``divisor: 4`` stays 4), unless ``as_float``."""

    def __init__(
        self,
        minimum: Optional[float] = None,
        maximum: Optional[float] = None,
        exclusive_min: bool = False,
        as_float: bool = False,
    ) -> None:
        self.minimum, self.maximum, self.exclusive_min, self.as_float = minimum, maximum, exclusive_min, as_float
        self.allowed = _bounds_text("a number", minimum, maximum, exclusive_min)

    def check(self, value: Any, path: str, problems: Problems) -> Any:
        if not is_number(value) or not math.isfinite(value):
            problems.wrong_value(path, value, self.allowed)
            return INVALID
        too_low = self.minimum is not None and (value <= self.minimum if self.exclusive_min else value < self.minimum)
        too_high = self.maximum is not None and value > self.maximum
        if too_low or too_high:
            problems.wrong_value(path, value, self.allowed)
            return INVALID
        return float(value) if self.as_float else value


# The YAML 1.1 booleans. Configs are read as YAML 1.2 (where these are strings), as Determined's CLI read them; but
# its master read the YAML text it was sent with YAML 1.1, so a field that must be a bool accepts them as it did.
_YAML11_BOOLS = {word: True for word in ("y", "Y", "yes", "Yes", "YES", "on", "On", "ON")}
_YAML11_BOOLS.update({word: False for word in ("n", "N", "no", "No", "NO", "off", "Off", "OFF")})


class Bool(Spec):
    allowed = "true or false"

    def check(self, value: Any, path: str, problems: Problems) -> Any:
        if isinstance(value, str) and value in _YAML11_BOOLS:
            return _YAML11_BOOLS[value]
        if not isinstance(value, bool):
            problems.wrong_value(path, value, self.allowed)
            return INVALID
        return value


class MemorySize(Spec):
    """A size in bytes: an int, or a string like ``4.5G``, ``512Mi``, ``100 KB`` (binary multiples, as Docker)."""

    allowed = "a size in bytes: a positive int, or a string like 4G, 512M, 1.5Gi"
    _PATTERN = re.compile(r"([0-9]*\.?[0-9]+) ?(?:([kmgtpKMGTP])(?:[iI]?[bB])?|[bB])?")

    def check(self, value: Any, path: str, problems: Problems) -> Any:
        if is_int(value) and value >= 1:
            return int(value)
        match = self._PATTERN.fullmatch(value) if isinstance(value, str) else None
        if match is None:
            problems.wrong_value(path, value, self.allowed)
            return INVALID
        number, unit = match.groups()
        size = int(float(number) * 1024 ** ("kmgtp".index(unit.lower()) + 1 if unit else 0))
        if size < 1:
            problems.wrong_value(path, value, self.allowed)
            return INVALID
        return size


class Str(Spec):
    def __init__(self, pattern: Optional[str] = None, allowed: str = "a string", nonempty: bool = False) -> None:
        self.pattern = re.compile(pattern) if pattern else None
        self.allowed = allowed
        self.nonempty = nonempty

    def check(self, value: Any, path: str, problems: Problems) -> Any:
        if not isinstance(value, str):
            problems.wrong_value(path, value, self.allowed)
            return INVALID
        if (self.nonempty and not value) or (self.pattern is not None and not self.pattern.fullmatch(value)):
            problems.wrong_value(path, value, self.allowed)
            return INVALID
        return value


class Enum(Spec):
    def __init__(self, *choices: str) -> None:
        self.choices = choices
        self.allowed = "one of " + ", ".join(choices)

    def check(self, value: Any, path: str, problems: Problems) -> Any:
        if not isinstance(value, str) or value not in self.choices:
            allowed = self.allowed
            if isinstance(value, str):
                close = closest(value, self.choices)
                if close:
                    allowed = f"did you mean {close!r}? {allowed}"
            problems.wrong_value(path, value, allowed)
            return INVALID
        return value


class ListOf(Spec):
    def __init__(self, item: Spec, nonempty: bool = False, max_items: Optional[int] = None) -> None:
        self.item = item
        self.nonempty = nonempty
        self.max_items = max_items
        self.allowed = ("a non-empty list" if nonempty else "a list") + f" of {_plural(item.allowed)}"
        if max_items is not None:
            self.allowed += f", at most {max_items} of them"

    def check(self, value: Any, path: str, problems: Problems) -> Any:
        if not isinstance(value, (list, tuple)) or (self.nonempty and not value):
            problems.wrong_value(path, value, self.allowed)
            return INVALID
        if self.max_items is not None and len(value) > self.max_items:
            problems.wrong_value(path, value, self.allowed)
            return INVALID
        out = [self.item.check(item, join_path(path, i), problems) for i, item in enumerate(value)]
        return INVALID if any(item is INVALID for item in out) else out


class MapOf(Spec):
    """A mapping from string keys to values of one spec (e.g. ``ports``)."""

    def __init__(self, item: Spec) -> None:
        self.item = item
        self.allowed = f"a mapping of names to {_plural(item.allowed)}"

    def check(self, value: Any, path: str, problems: Problems) -> Any:
        if not isinstance(value, Mapping):
            problems.wrong_value(path, value, self.allowed)
            return INVALID
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                problems.wrong_value(key_path(path, key), key, "names must be strings")
                continue
            out[key] = self.item.check(item, join_path(path, key), problems)
        return out


class JSONValue(Spec):
    """Any JSON value: null, bool, number, string, list, mapping with string keys (tuples become lists)."""

    allowed = "a JSON value (null, true/false, number, string, list, or mapping with string keys)"

    def check(self, value: Any, path: str, problems: Problems) -> Any:
        if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
            value = value.item()  # a numpy scalar, as configs built in code often hold
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, (list, tuple)):
            return [JSONValue.check(self, item, join_path(path, i), problems) for i, item in enumerate(value)]
        if isinstance(value, Mapping):
            out = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    problems.wrong_value(key_path(path, key), key, "keys must be strings (quote the key in YAML)")
                    continue
                out[key] = JSONValue.check(self, item, join_path(path, key), problems)
            return out
        problems.wrong_value(path, value, JSONValue.allowed)
        return INVALID


class JSONMapping(JSONValue):
    allowed = "a mapping"

    def check(self, value: Any, path: str, problems: Problems) -> Any:
        if not isinstance(value, Mapping):
            problems.wrong_value(path, value, self.allowed)
            return INVALID
        return super().check(value, path, problems)


class Field:
    """A named field of a section: its spec, and its default (a value, a zero-argument callable, or ``REQUIRED``)."""

    def __init__(self, spec: Spec, default: Any = None, hint: Optional[str] = None, factory: bool = False) -> None:
        self.spec = spec
        self.default = default
        self.factory = factory
        self.hint = hint

    def default_value(self) -> Any:
        return self.default() if self.factory else copy.deepcopy(self.default)


def unknown_key(problems: Problems, path: str, key: Any, allowed_keys: Sequence[str], what: str = "field") -> None:
    """Report an unknown key, suggesting the closest allowed name."""
    allowed_list = ", ".join(allowed_keys)
    suggestion = ""
    if isinstance(key, str):
        close = difflib.get_close_matches(key, allowed_keys, n=1, cutoff=0.6)
        if close:
            suggestion = f" (did you mean {close[0]!r}?)"
    problems.add(key_path(path, key), f"unknown {what}{suggestion}", f"allowed fields: {allowed_list}")


class Section(Spec):
    """A mapping with a fixed set of fields; unknown fields are errors that list the allowed ones."""

    def __init__(
        self,
        fields: Dict[str, Field],
        allowed: Optional[str] = None,
        extra_keys: Tuple[str, ...] = (),
        unknown_what: str = "field",
    ) -> None:
        self.fields = fields
        self.extra_keys = extra_keys
        self.unknown_what = unknown_what
        self.allowed = allowed or "a mapping with fields " + ", ".join(fields)

    def check(self, value: Any, path: str, problems: Problems) -> Any:
        if not isinstance(value, Mapping):
            problems.wrong_value(path, value, self.allowed)
            return INVALID
        for key in value:
            if key not in self.fields and key not in self.extra_keys:
                unknown_key(problems, path, key, list(self.extra_keys) + list(self.fields), self.unknown_what)
        out: Dict[str, Any] = {}
        for name, field in self.fields.items():
            sub = join_path(path, name)
            given = value.get(name)
            if given is not None:
                out[name] = field.spec.check(given, sub, problems)
            elif field.default is REQUIRED:
                problems.missing(sub, field.hint or field.spec.allowed)
                out[name] = INVALID
            else:
                out[name] = field.default_value()
        return out


class Union(Spec):
    """A mapping whose ``type`` (or another tag field) selects one of several sections."""

    def __init__(self, variants: Dict[str, Section], tag: str = "type", default_tag: Optional[str] = None) -> None:
        self.variants = variants
        self.tag = tag
        self.default_tag = default_tag
        for section in variants.values():
            if tag not in section.extra_keys:
                section.extra_keys = (tag,) + section.extra_keys
        self.allowed = f"a mapping with {tag}: one of " + ", ".join(variants)

    def check(self, value: Any, path: str, problems: Problems) -> Any:
        if not isinstance(value, Mapping):
            problems.wrong_value(path, value, self.allowed)
            return INVALID
        tag = value.get(self.tag, self.default_tag)
        tag_path = join_path(path, self.tag)
        if tag is None:
            problems.missing(tag_path, "one of " + ", ".join(self.variants))
            return INVALID
        if Enum(*self.variants).check(tag, tag_path, problems) is INVALID:
            return INVALID
        out = {self.tag: tag}
        checked = self.variants[tag].check(value, path, problems)
        if checked is INVALID:
            return INVALID
        out.update(checked)
        return out


def _plural(allowed: str) -> str:
    for article in ("an ", "a "):
        if allowed.startswith(article):
            rest = allowed[len(article):]
            first, _, tail = rest.partition(" ")
            return f"{first}s {tail}".strip()
    return allowed
