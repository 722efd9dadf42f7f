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
from typing import Any, Dict, List, Optional, Protocol

from determined import errors
from determined.common import env_seconds

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

    def __init__(self, rank: int, size: int, chief_host: str, port: int, timeout: Optional[float] = None) -> None:
        self.rank = rank
        self.size = size
        self.timeout = collective_timeout() if timeout is None else float(timeout)
        self._peers: Dict[int, socket.socket] = {}
        self._chief: Optional[socket.socket] = None
        if rank == 0:
            self._accept_peers(chief_host, port)
        else:
            self._chief = self._connect(chief_host, port)

    # -- set-up --------------------------------------------------------------------------------------

    def _accept_peers(self, host: str, port: int) -> None:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            server.bind((host, port))
        except OSError as e:
            server.close()
            raise errors.DeterminedError(
                f"the chief could not listen on {host}:{port} for the other ranks ({e}); the launcher must pass a "
                "free port in DET_CHIEF_PORT"
            ) from None
        server.listen(self.size)
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


class DistributedContext:
    """The position of this process among the processes of one trial, and collectives between them.

    `rank`/`size` count all processes; `local_*` the processes on this machine; `cross_*` the machines.
    With `size == 1` the collectives are trivial. A multi-process launcher passes `collectives`, an
    object with `allgather(obj) -> list` over all ranks, from which `gather` and `broadcast` are built;
    `DistributedContext.from_env()` builds one from the variables `determined.exec.launch` sets.
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
    ) -> None:
        for name, value in (("size", size), ("local_size", local_size), ("cross_size", cross_size)):
            if not isinstance(value, int) or value < 1:
                raise errors.DeterminedError(f"DistributedContext: {name} must be an int >= 1, got {value!r}")
        for name, value, bound in (
            ("rank", rank, size),
            ("local_rank", local_rank, local_size),
            ("cross_rank", cross_rank, cross_size),
        ):
            if not isinstance(value, int) or not 0 <= value < bound:
                raise errors.DeterminedError(
                    f"DistributedContext: {name} must be an int in [0, {bound}), got {value!r}"
                )
        self.rank = rank
        self.size = size
        self.local_rank = local_rank
        self.local_size = local_size
        self.cross_rank = cross_rank
        self.cross_size = cross_size
        self.chief_ip = chief_ip
        self._collectives = collectives

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
        # Validate the ranks before connecting anywhere.
        cls(rank, size, local_rank, local_size, cross_rank, cross_size, chief_ip)
        collectives = TCPCollectives(rank, size, chief_ip, port, timeout)
        return cls(rank, size, local_rank, local_size, cross_rank, cross_size, chief_ip, collectives)

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

    def close(self) -> None:
        if self._collectives is not None:
            self._collectives.close()

    def _require_collectives(self) -> Collectives:
        if self._collectives is None:
            raise errors.DeterminedError(
                f"{self!r} has {self.size} processes but no collectives backend: create it with "
                "collectives=... (the distributed launcher does), or use size=1"
            )
        return self._collectives


def _env_int(name: str, default: Optional[int]) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        if default is None:
            raise errors.DeterminedError(
                f"environment variable {name} is not set; a multi-process trial must be started by "
                "`python -m determined.exec.launch`, which sets it"
            )
        return default
    try:
        return int(raw)
    except ValueError:
        raise errors.DeterminedError(f"environment variable {name}={raw!r} must be an integer") from None
