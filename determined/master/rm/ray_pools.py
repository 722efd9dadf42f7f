"""Resource pools and disabled nodes on the Ray resource manager: which Ray nodes each pool's trials may go to, how
many slots a pool has on a node, and the placement group bundle and label selector that keep a run there.

A pool's placement (scheduling/pools.py `RayPlacement`) names node labels (`ray start --labels pool=gpu`) and custom
resources (`ray start --resources '{"pool_gpu": 4}'`), each slot of the pool taking the given amount of each
resource. A pool without a placement gets the nodes no other pool's placement matches. A disabled node
(`det agent disable`) takes no new run of any pool. Nodes are the dicts `ray.nodes()` answers ("Resources",
"Labels"); placements are read by attribute (`node_labels`, `resources`: tuples of pairs), so this module imports
nothing of the scheduler.
"""
from typing import Any, Dict, Iterable, List, Mapping, Optional

NODE_ID_LABEL = "ray.io/node-id"  # the label Ray gives every node: its node id


def matches(node: Mapping[str, Any], placement: Any) -> bool:
    """Whether the node has every label and custom resource of the placement (enough of each for one slot)."""
    labels = node.get("Labels") or {}
    resources = node.get("Resources") or {}
    return (all(labels.get(key) == value for key, value in placement.node_labels)
            and all(float(resources.get(name, 0.0)) + 1e-9 >= amount for name, amount in placement.resources))


def pool_nodes(nodes: Mapping[str, Mapping[str, Any]], placements: Mapping[str, Any], pool: str) -> List[str]:
    """The ids of the nodes of `pool` among `nodes` (node id -> node): those its placement matches; for a pool
    without one (or one this manager does not know), those no other pool's placement matches."""
    placement = placements.get(pool)
    if placement is not None:
        return [node_id for node_id, node in nodes.items() if matches(node, placement)]
    others = [p for name, p in placements.items() if p is not None and name != pool]
    return [node_id for node_id, node in nodes.items() if not any(matches(node, p) for p in others)]


def node_pool_slots(node_slots: int, node: Mapping[str, Any], placement: Any) -> int:
    """The slots of a pool on a node that has `node_slots` slots: fewer when its custom resources run out first."""
    if placement is None:
        return node_slots
    resources = node.get("Resources") or {}
    for name, amount in placement.resources:
        node_slots = min(node_slots, int(float(resources.get(name, 0.0)) / amount + 1e-9))
    return max(0, node_slots)


def bundle(base: Mapping[str, float], placement: Any) -> Dict[str, float]:
    """One slot's placement group bundle: the slot's CPU (and GPU), and the pool's custom resources."""
    out = dict(base)
    if placement is not None:
        out.update({name: float(amount) for name, amount in placement.resources})
    return out


def label_selector(placement: Any, excluded: Iterable[str]) -> Optional[Dict[str, str]]:
    """The label selector of each bundle of a run of the pool: the pool's labels, and no node of `excluded` (disabled
    nodes; for a pool without a placement, the other pools' nodes too). None: any node."""
    selector: Dict[str, str] = dict(placement.node_labels) if placement is not None else {}
    skip = sorted(set(excluded))
    if skip:
        selector[NODE_ID_LABEL] = f"!in({', '.join(skip)})"
    return selector or None
