"""The client SDK objects a command works on: every command reads and changes the master through them
(determined.experimental.client), never through routes of its own. Imported when a command runs."""
import argparse
from typing import Any, Dict, Optional


def client(args: argparse.Namespace) -> Any:
    """The `Determined` of the command's master (`-m`, else $DET_MASTER, else the local data dir's)."""
    from determined.experimental.client import Determined

    return Determined(args.master)


def connection(args: argparse.Namespace) -> Any:
    """One connection to the command's master, for the objects of a command that reads several."""
    from determined.experimental import _connect

    return _connect.Connection(args.master)


def experiment(args: argparse.Namespace, experiment_id: Optional[int] = None, shared: Any = None) -> Any:
    """The experiment `experiment_id` (default `args.experiment_id`): an ExperimentReference, read when a method
    asks for it; on the connection `shared` when given."""
    from determined.experimental.client import ExperimentReference

    eid = args.experiment_id if experiment_id is None else experiment_id
    return ExperimentReference(eid, args.master, _session=shared)


def trial(args: argparse.Namespace, trial_id: Optional[int] = None, shared: Any = None) -> Any:
    """The trial `trial_id` (default `args.trial_id`): a TrialReference, read when a method asks for it; on the
    connection `shared` when given."""
    from determined.experimental.client import TrialReference

    return TrialReference(args.trial_id if trial_id is None else trial_id, args.master, _session=shared)


def templates(args: argparse.Namespace) -> Any:
    """The config templates of the command's master (client/_template.py's Templates: list, get, create, set,
    delete)."""
    from determined.experimental.client._template import Templates

    return Templates(connection(args))


def master_info(owner: Any) -> Dict[str, Any]:
    """What the master of `owner` (a Determined, or an object it returned) says of itself: version, URL, data dir,
    whether it runs the scheduler."""
    if hasattr(owner, "get_master_info"):  # a Determined
        return owner.get_master_info()  # type: ignore[no-any-return]
    from determined.experimental.client._info import get_master_info

    return get_master_info(owner)
