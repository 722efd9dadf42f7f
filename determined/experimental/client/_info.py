"""What the master says of itself (Determined 0.38: `Determined.get_master_info()`)."""
from typing import Any, Dict


def master_info(session: Any) -> Dict[str, Any]:
    """The master's `GET /master/info`: its version, URL, data dir, and whether it runs the scheduler (false when
    the data dir's API is opened in this process, with nothing running its experiments)."""
    return dict(session.get("/master/info"))


def get_master_info(owner: Any) -> Dict[str, Any]:
    """`master_info` of the master of `owner`: a Determined, or an object bound to a master (Experiment, Trial,
    ...)."""
    return master_info(owner._session)
