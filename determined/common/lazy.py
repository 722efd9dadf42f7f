"""Package attributes imported on first use, so that importing a package costs only what is used."""
import importlib
import sys
from typing import Any, Callable, Mapping


def lazy_attributes(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: attribute `name` is `names[name]`'s attribute of that name, imported
    when first asked for and then kept in the package; a name mapped to `package.name` is that submodule."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(names[name])
        value = module if names[name] == f"{package}.{name}" else getattr(module, name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
