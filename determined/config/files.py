"""Read configs: YAML 1.2 text in, a raw mapping out (validation is ``load_experiment_config``).

Every place that reads a config (``det experiment create``, ``det preview-search``, ``det master up --config``,
the SDK's ``create(config=path)``, the master given a config as text) reads it here, the way Determined's CLI did
(ruamel.yaml, YAML 1.2 core schema):

* numbers: ``1e-4``, ``1E5``, ``.5``, ``-.5e3`` are floats; ``010`` is the int 10; ``0o10`` and ``0x10`` are octal
  and hex; ``.inf``/``.nan`` are floats;
* booleans are only ``true``/``false`` (any case of the first letter or all caps): ``yes``, ``no``, ``on``,
  ``off``, ``y``, ``n`` stay strings; nulls are ``null``, ``~`` and an empty value; dates stay strings;
* a key given twice in one mapping is an error naming both lines; merge keys (``<<: *base``) work;
* hostile input is bounded before it can cost memory or time: the text's size, the nesting depth, the number of
  aliases (``*name``) and the size of the document once every alias is expanded (a "billion laughs" file fails
  at once with an error naming the line).
"""
import os
import re
from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Set, Tuple, Union

import yaml
from yaml.composer import Composer
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import BaseResolver
from yaml.scanner import Scanner

from determined.config.errors import ConfigFileError

# Bounds on one config document. Real configs are a few kilobytes, a few levels deep, with a handful of aliases.
MAX_CONFIG_BYTES = 1024 * 1024
MAX_DEPTH = 64
MAX_ALIASES = 1000
MAX_EXPANDED_NODES = 100_000
MAX_EXPANDED_CHARS = 4 * 1024 * 1024

_INT = re.compile(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)")


class _LimitError(yaml.MarkedYAMLError):
    """A bound of this module was exceeded at a place in the text; ``fix`` says what to do."""

    def __init__(self, problem: str, mark: Any, fix: str) -> None:
        super().__init__(None, None, problem, mark)
        self.fix = fix


_FEWER_ALIASES = "write the values out, or refer to fewer of them with aliases"
_FLATTER = f"nest values at most {MAX_DEPTH} levels deep"


class _Resolver(BaseResolver):
    """The implicit tags of YAML 1.2's core schema (PyYAML's own resolver is YAML 1.1's)."""


_Resolver.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
_Resolver.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(rf"^(?:{_INT.pattern})$"), list("-+0123456789"))
_Resolver.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(rf"^(?:{_FLOAT.pattern})$"), list("-+.0123456789"))
_Resolver.add_implicit_resolver("tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""])
_Resolver.add_implicit_resolver("tag:yaml.org,2002:merge", re.compile(r"^(?:<<)$"), ["<"])


class _Constructor(SafeConstructor):
    """PyYAML's safe constructor with YAML 1.2 ints and floats, and duplicate keys refused."""

    def construct_yaml_int(self, node: ScalarNode) -> int:
        text = str(self.construct_scalar(node))
        if _INT.fullmatch(text) is None:  # an explicit `!!int` tag on something else
            raise ConstructorError(None, None, f"{text!r} is not an integer", node.start_mark)
        if text.startswith("0o"):
            return int(text[2:], 8)
        if text.startswith("0x"):
            return int(text[2:], 16)
        return int(text, 10)

    def construct_yaml_float(self, node: ScalarNode) -> float:
        text = str(self.construct_scalar(node))
        lowered = text.lower()
        if lowered.endswith(".inf"):
            return float("-inf") if text.startswith("-") else float("inf")
        if lowered == ".nan":
            return float("nan")
        try:
            return float(text)
        except ValueError:
            raise ConstructorError(None, None, f"{text!r} is not a number", node.start_mark) from None

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> Dict[Any, Any]:
        seen: Dict[Any, Any] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: PyYAML reports it below
                first = None
            if first is not None:
                raise ConstructorError(
                    None, None, f"found duplicate key {key!r} (first given on line {first.line + 1})", key_node.start_mark
                )
            try:
                seen[key] = key_node.start_mark
            except TypeError:
                pass
        return super().construct_mapping(node, deep=deep)


_Constructor.add_constructor("tag:yaml.org,2002:int", _Constructor.construct_yaml_int)
_Constructor.add_constructor("tag:yaml.org,2002:float", _Constructor.construct_yaml_float)


class _Loader(Reader, Scanner, Parser, Composer, _Constructor, _Resolver):
    """A safe YAML 1.2 loader whose composer counts nesting depth and aliases as it goes."""

    def __init__(self, text: str) -> None:
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        _Constructor.__init__(self)
        _Resolver.__init__(self)
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent: Optional[Node], index: Any) -> Node:
        if self.check_event(AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _LimitError(f"more than {MAX_ALIASES} aliases (*name) in one config",
                                  self.peek_event().start_mark, _FEWER_ALIASES)
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _LimitError(f"values nested more than {MAX_DEPTH} levels deep", self.peek_event().start_mark,
                                  _FLATTER)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _children(node: Node) -> List[Node]:
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []


def _check_expansion(root: Node) -> None:
    """Refuse a document whose aliases expand it past the bounds (or refer to themselves).

    The sizes are those of the document with every alias replaced by a copy of what it names, computed once per
    node (so a billion laughs costs a few hundred steps here, not a billion).
    """
    measured: Dict[int, Tuple[int, int, int]] = {}  # id(node) -> (nodes, characters, height) once expanded
    open_nodes: Set[int] = set()

    def measure(node: Node, level: int) -> Tuple[int, int, int]:
        key = id(node)
        if key in measured:
            nodes, chars, height = measured[key]
        else:
            if key in open_nodes:
                raise _LimitError("an alias refers to a value that contains it", node.start_mark,
                                  "an alias may only name a value outside itself")
            if level > MAX_DEPTH:
                raise _LimitError(f"aliases nest values more than {MAX_DEPTH} levels deep", node.start_mark, _FLATTER)
            open_nodes.add(key)
            nodes, chars, height = 1, len(node.value) if isinstance(node, ScalarNode) else 0, 1
            for child in _children(node):
                sub_nodes, sub_chars, sub_height = measure(child, level + 1)
                nodes, chars, height = nodes + sub_nodes, chars + sub_chars, max(height, sub_height + 1)
                if nodes > MAX_EXPANDED_NODES or chars > MAX_EXPANDED_CHARS:
                    raise _LimitError(
                        f"the aliases (*name) here expand the config past {MAX_EXPANDED_NODES} values or "
                        f"{MAX_EXPANDED_CHARS // (1024 * 1024)} MiB of text",
                        node.start_mark, _FEWER_ALIASES,
                    )
            open_nodes.discard(key)
            measured[key] = (nodes, chars, height)
        if level + height - 1 > MAX_DEPTH:
            raise _LimitError(f"aliases nest values more than {MAX_DEPTH} levels deep", node.start_mark, _FLATTER)
        return nodes, chars, height

    measure(root, 1)


def parse_yaml(text: str, source: str = "<config>", header: str = "cannot read the experiment config file") -> Any:
    """Parse one YAML 1.2 document within the bounds of this module; ``None`` for an empty document.

    Raises ConfigFileError naming ``source`` and, where it applies, the line and column.
    """
    size = len(text.encode("utf-8", errors="replace"))
    if size > MAX_CONFIG_BYTES:
        raise _fail(source, "", f"it is {size} bytes, more than the {MAX_CONFIG_BYTES // 1024} KiB a config may have",
                    "a config holds settings, not data: load large data in the trial's code", header)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node)
        return loader.construct_document(node)
    except _LimitError as e:
        raise _fail(source, _where(e), str(e.problem), e.fix, header) from None
    except yaml.MarkedYAMLError as e:
        what = " ".join(str(part) for part in (e.context, e.problem) if part)
        raise _fail(source, _where(e), f"YAML error: {what}", "fix the YAML at that line", header) from None
    except yaml.YAMLError as e:
        raise _fail(source, "", f"YAML error: {e}", "fix the YAML", header) from None
    except RecursionError:
        raise _fail(source, "", f"values nested too deeply", f"nest at most {MAX_DEPTH} levels", header) from None
    finally:
        loader.dispose()


def _where(e: yaml.MarkedYAMLError) -> str:
    mark = e.problem_mark or e.context_mark
    return f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""


def _fail(source: str, where: str, what: str, fix: str, header: str) -> ConfigFileError:
    return ConfigFileError([f"{source}{where}: {what}; {fix}"], header=header)


def load_config_text(
    text: str, source: str = "<config>", header: str = "cannot read the experiment config file", empty: str = "the config"
) -> Dict[str, Any]:
    """Parse YAML text that must hold one mapping (an experiment or master config) and return it."""
    data = parse_yaml(text, source, header)
    if data is None:
        raise _fail(source, "", f"{empty} is empty", "a config is a YAML mapping of fields (entrypoint, ...)", header)
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a single value {data!r}"[:80]
        raise _fail(source, "", f"the document is {kind}", "a config is a YAML mapping of `field: value`", header)
    return data


def read_config_file(path: Union[str, "os.PathLike[str]"], header: str = "cannot read the experiment config file") -> str:
    """The text of a config file, refusing a missing, unreadable or oversized one with a clear error."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise _fail(name, "", "no such file", "give the path of an existing YAML config file", header) from None
    except IsADirectoryError:
        raise _fail(name, "", "is a directory", "give the path of a YAML config file", header) from None
    except OSError as e:
        raise _fail(name, "", f"cannot be read ({e.strerror or e})", "give a readable YAML file", header) from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise _fail(name, "", f"it is more than the {MAX_CONFIG_BYTES // 1024} KiB a config may have",
                    "a config holds settings, not data: load large data in the trial's code", header)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _fail(name, "", f"is not UTF-8 text ({e.reason} at byte {e.start})", "save it as UTF-8", header) from None


def load_config_file(path: Union[str, "os.PathLike[str]"], header: str = "cannot read the experiment config file") -> Dict[str, Any]:
    """Read a YAML config file and return the raw mapping.

    Raises ConfigFileError (an InvalidExperimentConfig) naming the file, and the line for a YAML syntax error, a
    duplicate key, a bound exceeded, or a document that is not a mapping.
    """
    name = os.fspath(path)
    return load_config_text(read_config_file(name, header), name, header, empty="the file")


def config_from(config: Any) -> Dict[str, Any]:
    """A raw config from what an API was given: a mapping (as is), a path to a YAML file, or YAML text.

    A ``str`` is a path when such a file exists, else YAML text when it has a newline or a ``key: value``;
    anything else is refused with a clear error.
    """
    if isinstance(config, dict):
        return config
    if isinstance(config, os.PathLike):
        return load_config_file(config)
    if isinstance(config, str):
        if "\n" not in config and os.path.isfile(config):
            return load_config_file(config)
        if "\n" in config or ": " in config or config.lstrip().startswith("{"):
            return load_config_text(config, "config")
        raise ConfigFileError(
            [f"config: {config[:80]!r} is neither an existing file nor YAML text; give a dict, the path of a YAML "
             "config file, or the YAML text of a config"],
            header="cannot read the experiment config",
        )
    if isinstance(config, Mapping):
        return dict(config)
    raise ConfigFileError(
        [f"config: got a {type(config).__name__}; give a dict, the path of a YAML config file, or YAML text"],
        header="cannot read the experiment config",
    )
