"""Read an experiment config file: YAML in, a raw mapping out (validation is ``load_experiment_config``)."""
import os
from typing import Any, Dict, Union

import yaml

from determined.config.errors import ConfigFileError


class _StrictLoader(yaml.SafeLoader):
    """A safe loader that rejects a key given twice in the same mapping (PyYAML would keep the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> Dict[Any, Any]:
        seen: Dict[Any, Any] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                first = seen.get(key)
            except TypeError:
                first = None
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"found duplicate key {key!r} (first given on line {first.line + 1})",
                    key_node.start_mark,
                )
            try:
                seen[key] = key_node.start_mark
            except TypeError:
                pass
        return super().construct_mapping(node, deep=deep)


def _fail(path: str, where: str, what: str, fix: str) -> ConfigFileError:
    return ConfigFileError([f"{path}{where}: {what}; {fix}"], header="cannot read the experiment config file")


def load_config_file(path: Union[str, "os.PathLike[str]"]) -> Dict[str, Any]:
    """Read a YAML experiment config file and return the raw mapping.

    Raises ConfigFileError (an InvalidExperimentConfig) naming the file, and the line for a YAML syntax error,
    a duplicate key, or a document that is not a mapping.
    """
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise _fail(name, "", "no such file", "give the path of an existing YAML experiment config") from None
    except (OSError, UnicodeDecodeError) as e:
        raise _fail(name, "", f"cannot be read ({e})", "give a readable UTF-8 YAML file") from None
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        what = " ".join(str(part) for part in (e.context, e.problem) if part)
        raise _fail(name, where, f"YAML error: {what}", "fix the YAML at that line") from None
    except yaml.YAMLError as e:
        raise _fail(name, "", f"YAML error: {e}", "fix the YAML") from None
    finally:
        loader.dispose()
    if data is None:
        raise _fail(name, "", "the file is empty", "an experiment config is a YAML mapping of fields (entrypoint, ...)")
    if not isinstance(data, dict):
        line = f":{node.start_mark.line + 1}" if node is not None else ""
        kind = "a list" if isinstance(data, list) else f"a single value {data!r}"
        raise _fail(name, line, f"the document is {kind}", "an experiment config is a YAML mapping of `field: value`")
    return data
