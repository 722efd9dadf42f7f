"""Ranks and collectives of the processes of one trial.

The collectives here are framework-free: Python objects are pickled and exchanged over TCP through the
chief (rank 0), so every framework package (PyTorch, tf.keras, tf.estimator) and a plain training script
share them. Frameworks keep their own fast path for tensors (torch.distributed, tf.distribute).
"""
import logging
import os
import pickle
import socket
import struct
import time
from typing import Any, Dict, List, Optional, Protocol, Tuple

from determined import errors
from determined.common import env_seconds
from determined.core import _tf_config

logger = logging.getLogger("determined.core")

DEFAULT_TIMEOUT_S = 1800.0
TIMEOUT_ENV = "DET_COLLECTIVE_TIMEOUT_S"
_HEADER = struct.Struct("!Q")


class Collectives(Protocol):
    """How the processes of a multi-process trial exchange Python objects (set by the distributed launcher).

    `allgather` is required; a backend may also provide `gather(obj)` and `broadcast(obj)` (used when
    present, else built from `allgather`).
    """

    def allgather(self, obj: Any) -> List[Any]: ...

    def close(self) -> None: ...


def collective_timeout() -> float:
    """Seconds a collective waits for the other ranks: DET_COLLECTIVE_TIMEOUT_S, default 1800."""
    return env_seconds(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)


class TCPCollectives:
    """Collectives over TCP in a star around the chief.

    The chief listens on `(chief_host, port)`; every other rank connects and says its rank. In each
    collective the other ranks send their object to the chief and/or receive the result from it. A peer
    that dies closes its connection, so the others fail at once instead of waiting; a peer that hangs
    fails the others after `timeout` seconds.
    """

    def __init__(self, rank: int, size: int, chief_host: str, port: int, timeout: Optional[float] = None,
                 *, listener: Optional[socket.socket] = None) -> None:
        self.rank = rank
        self.size = size
        self.timeout = collective_timeout() if timeout is None else float(timeout)
        self._peers: Dict[int, socket.socket] = {}
        self._chief: Optional[socket.socket] = None
        if rank == 0:
            self._accept_peers(listener or self.listen(chief_host, port))
        else:
            self._chief = self._connect(chief_host, port)

    # -- set-up --------------------------------------------------------------------------------------

    @staticmethod
    def listen(host: str, port: int) -> socket.socket:
        """The chief's listening socket (port 0: any free port, see `getsockname()`)."""
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            server.bind((host, port))
        except OSError as e:
            server.close()
            raise errors.DeterminedError(
                f"the chief could not listen on {host}:{port} for the other ranks ({e}); the launcher must pass a "
                "free port in DET_CHIEF_PORT (or give DistributedContext a free pub_port)"
            ) from None
        server.listen(128)
        return server

    def _accept_peers(self, server: socket.socket) -> None:
        deadline = time.monotonic() + self.timeout
        try:
            while len(self._peers) < self.size - 1:
                server.settimeout(max(0.01, deadline - time.monotonic()))
                try:
                    conn, _ = server.accept()
                except socket.timeout:
                    missing = sorted(set(range(1, self.size)) - set(self._peers))
                    raise errors.DeterminedError(
                        f"rank(s) {missing} did not connect to the chief within {self.timeout:.0f} s "
                        f"({TIMEOUT_ENV}); did every process of the trial start?"
                    ) from None
                self._configure(conn)
                peer_rank = self._recv_obj(conn, "a connecting rank")
                if not isinstance(peer_rank, int) or not 0 < peer_rank < self.size or peer_rank in self._peers:
                    conn.close()
                    raise errors.DeterminedError(f"a process connected to the chief as rank {peer_rank!r}, "
                                                 f"which is not a free rank of 1..{self.size - 1}")
                self._peers[peer_rank] = conn
        finally:
            server.close()

    def _connect(self, host: str, port: int) -> socket.socket:
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                conn = socket.create_connection((host, port), timeout=5.0)
                break
            except OSError as e:
                if time.monotonic() > deadline:
                    raise errors.DeterminedError(
                        f"rank {self.rank} could not reach the chief at {host}:{port} within {self.timeout:.0f} s: {e}"
                    ) from None
                time.sleep(0.05)
        self._configure(conn)
        self._send_obj(conn, self.rank, "the chief")
        return conn

    def _configure(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.settimeout(self.timeout)

    # -- wire format: 8-byte length, then a pickle ----------------------------------------------------

    def _send_bytes(self, conn: socket.socket, data: bytes, whom: str) -> None:
        try:
            conn.sendall(_HEADER.pack(len(data)) + data)
        except socket.timeout:
            raise self._timeout_error(whom) from None
        except OSError as e:
            raise self._lost_error(whom, e) from None

    def _send_obj(self, conn: socket.socket, obj: Any, whom: str) -> None:
        self._send_bytes(conn, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), whom)

    def _recv_exact(self, conn: socket.socket, count: int, whom: str) -> bytes:
        chunks = []
        while count:
            try:
                chunk = conn.recv(min(count, 1 << 20))
            except socket.timeout:
                raise self._timeout_error(whom) from None
            except OSError as e:
                raise self._lost_error(whom, e) from None
            if not chunk:
                raise self._lost_error(whom, None)
            chunks.append(chunk)
            count -= len(chunk)
        return b"".join(chunks)

    def _recv_obj(self, conn: socket.socket, whom: str) -> Any:
        (length,) = _HEADER.unpack(self._recv_exact(conn, _HEADER.size, whom))
        return pickle.loads(self._recv_exact(conn, length, whom))

    def _timeout_error(self, whom: str) -> errors.DeterminedError:
        return errors.DeterminedError(
            f"rank {self.rank}: {whom} did not answer within {self.timeout:.0f} s ({TIMEOUT_ENV}); "
            "the ranks of the trial are out of step or one of them hangs"
        )

    def _lost_error(self, whom: str, cause: Optional[BaseException]) -> errors.DeterminedError:
        detail = f" ({cause})" if cause else ""
        return errors.DeterminedError(
            f"rank {self.rank}: the connection to {whom} closed{detail}: another process of this trial died"
        )

    # -- collectives ---------------------------------------------------------------------------------

    def gather(self, obj: Any) -> Optional[List[Any]]:
        if self.rank != 0:
            assert self._chief is not None
            self._send_obj(self._chief, obj, "the chief")
            return None
        return [obj] + [self._recv_obj(self._peers[r], f"rank {r}") for r in range(1, self.size)]

    def broadcast(self, obj: Any) -> Any:
        if self.rank != 0:
            assert self._chief is not None
            return self._recv_obj(self._chief, "the chief")
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        for r in range(1, self.size):
            self._send_bytes(self._peers[r], data, f"rank {r}")
        return obj

    def allgather(self, obj: Any) -> List[Any]:
        return self.broadcast(self.gather(obj))

    def close(self) -> None:
        for conn in list(self._peers.values()) + ([self._chief] if self._chief is not None else []):
            try:
                conn.close()
            except OSError:
                pass
        self._peers.clear()
        self._chief = None


DEFAULT_PUB_PORT = 12360
DEFAULT_PULL_PORT = 12376


class DistributedContext:
    """The position of this process among the processes of one trial, and collectives between them.

    `rank`/`size` count all processes; `local_*` the processes on this machine; `cross_*` the machines.
    With `size == 1` the collectives are trivial. As in Determined 0.38, constructing a context with
    `size > 1` is collective: every rank must construct it at once; the chief listens on `chief_ip:pub_port`
    (`chief_ip` is required when the ranks span machines, else 127.0.0.1) and the others connect (`pull_port`,
    `port_offset` and `force_tcp` are accepted: one TCP port serves every collective here). A launcher that
    connected the ranks already passes `collectives`, an object with `allgather(obj) -> list` over all ranks,
    from which `gather` and `broadcast` are built. The `*_local` collectives run among the ranks of this
    machine only. `from_env()`, `from_torch_distributed()`, `from_deepspeed()` and `from_tf_config()` read the
    ranks from a launcher's environment.
    """

    def __init__(
        self,
        rank: int = 0,
        size: int = 1,
        local_rank: int = 0,
        local_size: int = 1,
        cross_rank: int = 0,
        cross_size: int = 1,
        chief_ip: Optional[str] = None,
        collectives: Optional[Collectives] = None,
        *,
        pub_port: int = DEFAULT_PUB_PORT,
        pull_port: int = DEFAULT_PULL_PORT,
        port_offset: int = 0,
        force_tcp: bool = False,
        timeout: Optional[float] = None,
    ) -> None:
        _check_ranks(rank, size, local_rank, local_size, cross_rank, cross_size)
        if size > 1 and local_size != size and not chief_ip and collectives is None:
            raise errors.DeterminedError(
                f"DistributedContext: chief_ip is required when the ranks span machines (size {size}, local_size "
                f"{local_size}): give the address of the machine of rank 0"
            )
        self.rank = rank
        self.size = size
        self.local_rank = local_rank
        self.local_size = local_size
        self.cross_rank = cross_rank
        self.cross_size = cross_size
        self.chief_ip = chief_ip
        self._collectives = collectives
        self._local: Optional[TCPCollectives] = None
        if size > 1 and collectives is None:
            self._collectives = TCPCollectives(rank, size, chief_ip or "127.0.0.1", pub_port, timeout)
        if size > 1 and self.cross_size > 1:  # every rank takes part, even one alone on its machine
            self._local = self._connect_local_group(timeout)

    def _connect_local_group(self, timeout: Optional[float]) -> "Optional[TCPCollectives]":
        """Collectives among this machine's ranks: each machine's local chief listens on a free port of 127.0.0.1
        and tells the others through an allgather (so constructing the context stays one collective). None for a
        rank alone on its machine (its local collectives are trivial)."""
        alone = self.local_size == 1
        listener = TCPCollectives.listen("127.0.0.1", 0) if self.local_rank == 0 and not alone else None
        port = listener.getsockname()[1] if listener is not None else None
        ports = {cross_rank: p for cross_rank, p in self.allgather((self.cross_rank, port)) if p is not None}
        if alone:
            return None
        return TCPCollectives(self.local_rank, self.local_size, "127.0.0.1", ports[self.cross_rank], timeout,
                              listener=listener)

    @classmethod
    def from_env(cls, timeout: Optional[float] = None) -> "DistributedContext":
        """The context of a process started by `determined.exec.launch` (or a size-1 context without one).

        Reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, DET_CROSS_RANK, DET_CROSS_SIZE, and connects
        the ranks through the chief at DET_CHIEF_IP:DET_CHIEF_PORT.
        """
        size = _env_int("WORLD_SIZE", 1)
        if size == 1:
            return cls()
        rank = _env_int("RANK", None)
        local_rank = _env_int("LOCAL_RANK", rank)
        local_size = _env_int("LOCAL_WORLD_SIZE", size)
        cross_size = _env_int("DET_CROSS_SIZE", max(1, size // local_size))
        cross_rank = _env_int("DET_CROSS_RANK", rank // local_size)
        chief_ip = os.environ.get("DET_CHIEF_IP") or os.environ.get("MASTER_ADDR") or "127.0.0.1"
        port = _env_int("DET_CHIEF_PORT", None)
        return cls(rank, size, local_rank, local_size, cross_rank, cross_size, chief_ip, pub_port=port,
                   timeout=timeout)

    @classmethod
    def from_torch_distributed(cls, chief_ip: Optional[str] = None) -> "DistributedContext":
        """The context of a process started by torchrun or `determined.launch.torch_distributed` (collective).

        Reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK and GROUP_WORLD_SIZE; the chief's address
        is `chief_ip`, else DET_CHIEF_IP, else MASTER_ADDR.
        """
        size = _env_int("WORLD_SIZE", None)
        local_size = _env_int("LOCAL_WORLD_SIZE", None)
        return cls._from_ranks(
            chief_ip, rank=_env_int("RANK", None), size=size, local_rank=_env_int("LOCAL_RANK", None),
            local_size=local_size, cross_rank=_env_int("GROUP_RANK", 0),
            cross_size=_env_int("GROUP_WORLD_SIZE", max(1, size // max(1, local_size))),
        )

    @classmethod
    def from_deepspeed(cls, chief_ip: Optional[str] = None) -> "DistributedContext":
        """The context of a process started by the DeepSpeed launcher (collective): RANK, WORLD_SIZE, LOCAL_RANK,
        LOCAL_SIZE, CROSS_RANK and CROSS_SIZE; the chief's address is `chief_ip`, else DET_CHIEF_IP."""
        return cls._from_ranks(
            chief_ip, rank=_env_int("RANK", None), size=_env_int("WORLD_SIZE", None),
            local_rank=_env_int("LOCAL_RANK", None), local_size=_env_int("LOCAL_SIZE", None),
            cross_rank=_env_int("CROSS_RANK", None), cross_size=_env_int("CROSS_SIZE", None),
        )

    @classmethod
    def from_horovod(cls, hvd: Any, chief_ip: Optional[str] = None) -> "DistributedContext":
        """Horovod is not supported here (deprecated in Determined 0.38): a clear error naming the replacement."""
        raise errors.DeterminedError(
            "DistributedContext.from_horovod(): Horovod is not supported here (Determined 0.38 deprecated it too); "
            "launch the script with `python3 -m determined.launch.torch_distributed` and build the context with "
            "DistributedContext.from_torch_distributed()"
        )

    @classmethod
    def from_tf_config(cls) -> "Tuple[DistributedContext, Any]":
        """`(context, strategy)` from TF_CONFIG (`determined.launch.tensorflow`; collective): with several workers,
        rank = this task's index, one rank per machine, the chief at worker 0's host, and a
        `tf.distribute.MultiWorkerMirroredStrategy`; otherwise size 1 with a `MirroredStrategy` over several GPUs,
        else TensorFlow's default strategy. A task type other than `worker` is refused."""
        return _tf_config.context_and_strategy(cls)

    @classmethod
    def _from_ranks(cls, chief_ip: Optional[str], **ranks: int) -> "DistributedContext":
        chief = chief_ip or os.environ.get("DET_CHIEF_IP") or os.environ.get("MASTER_ADDR")
        port = _env_int("DET_CHIEF_PORT", DEFAULT_PUB_PORT)
        if ranks["size"] == 1:
            return cls()
        return cls(chief_ip=chief, pub_port=port, **ranks)

    def __repr__(self) -> str:
        return (
            f"DistributedContext(rank={self.rank}, size={self.size}, local_rank={self.local_rank}, "
            f"local_size={self.local_size}, cross_rank={self.cross_rank}, cross_size={self.cross_size})"
        )

    def get_rank(self) -> int:
        return self.rank

    def get_size(self) -> int:
        return self.size

    def get_local_rank(self) -> int:
        return self.local_rank

    def get_local_size(self) -> int:
        return self.local_size

    def get_cross_rank(self) -> int:
        return self.cross_rank

    def get_cross_size(self) -> int:
        return self.cross_size

    def get_num_machines(self) -> int:
        """The number of machines the trial runs on (`cross_size`)."""
        return self.cross_size

    @property
    def is_chief(self) -> bool:
        return self.rank == 0

    @property
    def is_local_chief(self) -> bool:
        return self.local_rank == 0

    def allgather(self, obj: Any) -> List[Any]:
        """Every rank's `obj`, in rank order, on every rank."""
        if self.size == 1:
            return [obj]
        return self._require_collectives().allgather(obj)

    def gather(self, obj: Any) -> Optional[List[Any]]:
        """Every rank's `obj` in rank order on the chief; None on the other ranks."""
        if self.size == 1:
            return [obj]
        backend = self._require_collectives()
        if hasattr(backend, "gather"):
            return backend.gather(obj)  # type: ignore[no-any-return]
        gathered = backend.allgather(obj)
        return gathered if self.rank == 0 else None

    def broadcast(self, obj: Any) -> Any:
        """The chief's `obj`, on every rank (what the other ranks pass is ignored)."""
        if self.size == 1:
            return obj
        backend = self._require_collectives()
        if hasattr(backend, "broadcast"):
            return backend.broadcast(obj if self.rank == 0 else None)
        return backend.allgather(obj if self.rank == 0 else None)[0]

    def allgather_local(self, obj: Any) -> List[Any]:
        """Every local rank's `obj`, in local-rank order, on every rank of this machine."""
        if self._local is not None:
            return self._local.allgather(obj)
        return self.allgather(obj) if self.local_size == self.size else [obj]

    def gather_local(self, obj: Any) -> Optional[List[Any]]:
        """Every local rank's `obj` in local-rank order on the local chief (local rank 0); None elsewhere."""
        if self._local is not None:
            return self._local.gather(obj)
        return self.gather(obj) if self.local_size == self.size else [obj]

    def broadcast_local(self, obj: Any = None) -> Any:
        """The local chief's `obj`, on every rank of this machine."""
        if self._local is not None:
            return self._local.broadcast(obj if self.local_rank == 0 else None)
        return self.broadcast(obj) if self.local_size == self.size else obj

    def close(self) -> None:
        if self._local is not None:
            self._local.close()
        if self._collectives is not None:
            self._collectives.close()

    def _require_collectives(self) -> Collectives:
        if self._collectives is None:
            raise errors.DeterminedError(
                f"{self!r} has {self.size} processes but no collectives backend: create it with "
                "collectives=... (the distributed launcher does), or use size=1"
            )
        return self._collectives


def check_global_batch_size(hparams: Dict[str, Any], slots: int) -> None:
    """With several slots, global_batch_size must split evenly into per-slot batches."""
    gbs = hparams.get("global_batch_size")
    if slots <= 1 or isinstance(gbs, bool) or not isinstance(gbs, int):
        return
    if gbs < slots or gbs % slots:
        raise errors.InvalidTrialError(
            f"hyperparameter global_batch_size ({gbs}) must be a multiple of resources.slots_per_trial ({slots}) "
            f"and at least as large: every slot trains on global_batch_size / slots_per_trial records per batch; "
            f"use e.g. global_batch_size: {max(slots, gbs // slots * slots)} or change slots_per_trial"
        )


def _check_ranks(rank: int, size: int, local_rank: int, local_size: int, cross_rank: int, cross_size: int) -> None:
    for name, value in (("size", size), ("local_size", local_size), ("cross_size", cross_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise errors.DeterminedError(f"DistributedContext: {name} must be an int >= 1, got {value!r}")
    for name, value, bound in (
        ("rank", rank, size),
        ("local_rank", local_rank, local_size),
        ("cross_rank", cross_rank, cross_size),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < bound:
            raise errors.DeterminedError(f"DistributedContext: {name} must be an int in [0, {bound}), got {value!r}")


def _env_int(name: str, default: Optional[int]) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        if default is None:
            raise errors.DeterminedError(
                f"environment variable {name} is not set; a multi-process trial must be started by a launcher "
                "(`python3 -m determined.launch.torch_distributed`, torchrun, or `python -m determined.exec.launch` "
                "for a Trial class), which sets it"
            )
        return default
    try:
        return int(raw)
    except ValueError:
        raise errors.DeterminedError(f"environment variable {name}={raw!r} must be an integer") from None
