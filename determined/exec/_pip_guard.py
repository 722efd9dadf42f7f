"""Keep a startup hook's ``pip install`` from replacing the platform's own packages.

In Determined a ``startup-hook.sh`` ran in a fresh container of a fixed image: ``pip install pandas`` could pull
a newer NumPy into that container and the next trial started from the image again. Here trials run in the
platform's own Python environment, which the embedded master shares, so such an upgrade would stay and could break
every later trial and the master (TensorFlow 2.15 does not import beside NumPy 2, say).

While the hook runs, ``PIP_CONSTRAINT`` names a constraints file that pins every installed package the platform
itself needs (the requirements of the master, the CLI and the harness, and theirs, transitively: NumPy, pydantic,
SQLAlchemy, ...) at its installed version. pip then picks releases of the new packages that fit the environment
(an older pandas that works with the installed NumPy) or says which pin conflicts (``pydantic<2``), instead of
replacing a package the platform runs on. The frameworks of the extras (PyTorch, TensorFlow, transformers) are not
pinned: choosing their versions in a hook is the user's call, as choosing an image was. A ``PIP_CONSTRAINT`` the
trial's environment already sets is kept next to the pins.
"""
import importlib.metadata as metadata
import os
import re
import tempfile
from typing import Dict, Iterable, List, Optional

from packaging.requirements import InvalidRequirement, Requirement

PLATFORM_DISTRIBUTION = "determined-revived"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(dist: metadata.Distribution) -> Iterable[Requirement]:
    """The requirements of ``dist`` that hold here without any extra."""
    for line in dist.requires or []:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            yield req


def platform_pins(root: str = PLATFORM_DISTRIBUTION) -> Dict[str, str]:
    """``{canonical name: installed version}`` of the installed packages ``root`` depends on, transitively.

    Requirements behind an extra do not count. Empty when ``root`` is not installed.
    """
    try:
        start = metadata.distribution(root)
    except metadata.PackageNotFoundError:
        return {}
    pins: Dict[str, str] = {}
    todo = [start]
    seen = {_canonical(root)}
    while todo:
        dist = todo.pop()
        for req in _requirements(dist):
            name = _canonical(req.name)
            if name in seen:
                continue
            seen.add(name)
            try:
                found = metadata.distribution(req.name)
            except metadata.PackageNotFoundError:
                continue
            pins[name] = found.version
            todo.append(found)
    return pins


def write_constraints(pins: Dict[str, str], directory: Optional[str] = None) -> str:
    """A pip constraints file with ``name==version`` per pin; returns its path (the caller removes it)."""
    fd, path = tempfile.mkstemp(prefix="det-platform-pins-", suffix=".txt", dir=directory)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("# the platform's packages at their installed versions (determined.exec._pip_guard)\n")
        for name in sorted(pins):
            f.write(f"{name}=={pins[name]}\n")
    return path


def constraint_variable(existing: Optional[str], path: str) -> str:
    """The value of ``PIP_CONSTRAINT`` with the pins file added to what the environment already named."""
    parts: List[str] = [p for p in (existing or "").split() if p]
    return " ".join(parts + [path])
