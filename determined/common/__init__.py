"""Helpers shared by the client side and the master: data dir location, small utilities."""
import os
import pathlib


def data_dir() -> pathlib.Path:
    """The platform's data dir: $DET_DATA_DIR, else $XDG_DATA_HOME/determined, else ~/.local/share/determined."""
    explicit = os.environ.get("DET_DATA_DIR")
    if explicit:
        path = pathlib.Path(explicit).expanduser()
    else:
        xdg = os.environ.get("XDG_DATA_HOME")
        base = pathlib.Path(xdg).expanduser() if xdg else pathlib.Path.home() / ".local" / "share"
        path = base / "determined"
    return path.resolve()


def env_seconds(name: str, default: float) -> float:
    """A positive number of seconds from the environment variable `name`, else `default`."""
    from determined import errors

    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise errors.DeterminedError(f"{name}={raw!r} must be a positive number of seconds")
    return value
