"""tf.distribute for the TensorFlow frameworks on several slots: TF_CONFIG from the launcher's ranks, and
the process's one MultiWorkerMirroredStrategy.

Each rank picks a free port for its TensorFlow gRPC server and announces it with the framework-free
`allgather` of `determined.core`; TF_CONFIG then lists one worker per rank, in rank order (rank 0 is the
chief). A process can join only one TensorFlow cluster (collective ops are configured once, before
TensorFlow runs anything), so the strategy is created once per process and reused.
"""
import json
import logging
import os
import socket
from typing import Any, Callable, Dict, List, Optional

from determined import core, errors
from determined.core._distributed import collective_timeout

logger = logging.getLogger("determined.tensorflow")

_strategy: Any = None
_strategy_ranks: Optional[tuple] = None


def worker_host(distributed: core.DistributedContext) -> str:
    """The address the other ranks reach this rank's TensorFlow server at: 127.0.0.1 on one machine, else
    the chief's address on the chief and, elsewhere, this machine's address on the route to the chief."""
    chief = distributed.chief_ip or "127.0.0.1"
    if distributed.get_num_machines() == 1:
        return "127.0.0.1"
    if distributed.rank == 0:
        return chief
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((chief, 9))  # UDP: no packet is sent, only the route is chosen
        return str(probe.getsockname()[0])


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def tf_config(distributed: core.DistributedContext) -> Dict[str, Any]:
    """The TF_CONFIG of this rank: one worker per rank (each at the port it picked), this rank's index.

    Every rank must call it at the same time (it is a collective)."""
    host = worker_host(distributed)
    bind_host = "0.0.0.0" if host != "127.0.0.1" else host
    workers: List[str] = [f"{h}:{p}" for h, p in distributed.allgather((host, _free_port(bind_host)))]
    return {"cluster": {"worker": workers}, "task": {"type": "worker", "index": distributed.rank}}


def _join_cluster(distributed: core.DistributedContext, kind: str, create: Callable[[Dict[str, Any]], Any]) -> Any:
    """The strategy of this process: made once by `create(tf_config)`, by every rank at once, before any other
    TensorFlow work (TensorFlow allows one cluster per process); later calls of the same kind get it back."""
    global _strategy, _strategy_ranks
    ranks = (distributed.rank, distributed.size, kind)
    if _strategy is not None:
        if _strategy_ranks != ranks:
            raise errors.DeterminedError(
                f"this process already joined a TensorFlow cluster ({_strategy_ranks}); it cannot join another "
                f"as {ranks}"
            )
        return _strategy
    from tensorflow.python.eager import context as tf_context

    config = tf_config(distributed)
    if tf_context.context()._context_handle is not None:
        raise errors.DeterminedError(
            "TensorFlow already ran operations in this process before the trial's distribution strategy was "
            "created, so it cannot join the trial's TensorFlow cluster: do not run TensorFlow code when the "
            "model definition is imported (move it into the trial's __init__, build_model or build_estimator)"
        )
    _strategy = create(config)
    _strategy_ranks = ranks
    logger.info("rank %d of %d joined the TensorFlow cluster %s", ranks[0], ranks[1], config["cluster"]["worker"])
    return _strategy


def multi_worker_strategy(distributed: core.DistributedContext) -> Any:
    """This process's MultiWorkerMirroredStrategy over the ranks of `distributed` (created on the first call,
    before any other TensorFlow work, by every rank at once). Collectives give up after
    DET_COLLECTIVE_TIMEOUT_S seconds, so a rank whose peer hangs fails instead of waiting for ever."""
    import tensorflow as tf

    def create(config: Dict[str, Any]) -> Any:
        os.environ["TF_CONFIG"] = json.dumps(config)
        options = tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING,
            timeout_seconds=collective_timeout(),
        )
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)

    return _join_cluster(distributed, "v2", create)


def current_strategy() -> Any:
    """The strategy multi_worker_strategy() created in this process, or None."""
    return _strategy


def collective_strategy_v1(distributed: core.DistributedContext) -> Any:
    """This process's graph-mode CollectiveAllReduceStrategy (tf.compat.v1's MultiWorkerMirroredStrategy)
    for tf.estimator, over the ranks of `distributed`, with the cluster given directly rather than
    through TF_CONFIG (with TF_CONFIG, Estimator.train() refuses it: it wants its distribute
    coordinator). Created on the first call, before any other TensorFlow work, by every rank at once.
    `session_target(strategy)` is the gRPC address the Estimator's training sessions must use."""
    import tensorflow as tf

    def create(config: Dict[str, Any]) -> Any:
        workers = config["cluster"]["worker"]
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec(config["cluster"]), task_type="worker", task_id=distributed.rank, rpc_layer="grpc"
        )
        strategy = tf.compat.v1.distribute.experimental.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
        strategy._det_session_target = "grpc://" + workers[distributed.rank]
        return strategy

    return _join_cluster(distributed, "v1", create)


def session_target(strategy: Any) -> str:
    """The gRPC target of this rank's TensorFlow server, for graph-mode sessions of `strategy`."""
    return str(strategy._det_session_target)
