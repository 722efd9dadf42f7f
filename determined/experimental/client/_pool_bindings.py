"""Workspace <-> resource pool bindings and workspace default pools (Determined 0.23.4+): what `det rp bindings ...`,
`det workspace list-pools` and `det workspace create|edit --default-compute-pool/--default-aux-pool` work through.
Determined's SDK had no class for them (its CLI called the API bindings); `PoolBindings` is that layer here. The
master's rules are in determined/master/scheduling/bindings.py: admins bind pools and set default pools, anyone
lists them; a pool bound to workspaces is usable only from them."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from determined.experimental.client._common import Connection, UsageError
from determined.experimental.client._names import check_name, workspace_by_name

_PATH = "/resource-pools/{}/workspace-bindings"
_METHODS = {"add": "POST", "remove": "DELETE", "replace": "PUT"}


class WorkspacePools:
    """The pools a workspace's jobs may use: `workspace_id`, `workspace_name`, `resource_pools` (unbound pools and
    those bound to it), `bound_resource_pools`, `default_compute_pool`, `default_aux_pool` (what a config that names
    no pool gets)."""

    def __init__(self, data: Dict[str, Any]) -> None:
        self._json = dict(data)
        self.workspace_id: int = data["workspace_id"]
        self.workspace_name: str = data["workspace_name"]
        self.resource_pools: List[str] = list(data["resource_pools"])
        self.bound_resource_pools: List[str] = list(data["bound_resource_pools"])
        self.default_compute_pool: str = data["default_compute_pool"]
        self.default_aux_pool: str = data["default_aux_pool"]

    def to_json(self) -> Dict[str, Any]:
        return dict(self._json)


def _pool_name(pool: Any) -> str:
    if not isinstance(pool, str) or not pool or "/" in pool or len(pool) > 256:
        raise UsageError(f"resource pool: expected a pool's name (`det resource-pool list`), got {pool!r}")
    return pool


class PoolBindings:
    """The bindings of pools to workspaces on a connection (a `Connection`, or a session)."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection if isinstance(connection, Connection) else Connection(session=connection)

    @property
    def _session(self) -> Any:
        return self._connection.session

    def list_workspaces(self, pool: str) -> List[str]:
        """The names of the workspaces the pool is bound to (empty: every workspace may use it)."""
        answer = self._session.get(_PATH.format(_pool_name(pool)))
        return [w["name"] for w in answer["workspaces"]]

    def change(self, verb: str, pool: str, workspace_names: Sequence[str]) -> List[str]:
        """`add` the workspaces to the pool's bindings, `remove` them, or `replace` the bindings with them (admins);
        returns the names of the workspaces bound to it afterwards."""
        if verb not in _METHODS:
            raise UsageError(f"expected one of {', '.join(_METHODS)}, got {verb!r}")
        names = [check_name(n, "workspace name") for n in workspace_names]
        answer = self._session.request(_METHODS[verb], _PATH.format(_pool_name(pool)),
                                       json={"resource_pool_name": pool, "workspace_names": names})
        return [w["name"] for w in answer["workspaces"]]

    def workspace_pools(self, workspace_name: str) -> WorkspacePools:
        """The pools the workspace may use, and its default pools."""
        workspace_id = int(workspace_by_name(self._session, check_name(workspace_name, "workspace name"))["id"])
        return WorkspacePools(self._session.get(f"/workspaces/{workspace_id}/available-resource-pools"))

    def set_default_pools(self, workspace_name: str, *, compute: Optional[str] = None,
                          aux: Optional[str] = None) -> WorkspacePools:
        """Set the workspace's default compute and/or aux pool (admins; "" to use the cluster's default again)."""
        body = {k: v for k, v in (("default_compute_pool", compute), ("default_aux_pool", aux)) if v is not None}
        if not body:
            raise UsageError("give a default compute pool, a default aux pool, or both")
        workspace_id = int(workspace_by_name(self._session, check_name(workspace_name, "workspace name"))["id"])
        self._session.patch(f"/workspaces/{workspace_id}", body)
        return WorkspacePools(self._session.get(f"/workspaces/{workspace_id}/available-resource-pools"))
