"""Ranks and collectives of the processes of one trial."""
from typing import Any, List, Optional, Protocol

from determined import errors


class Collectives(Protocol):
    """How the processes of a multi-process trial exchange Python objects (set by the distributed launcher)."""

    def allgather(self, obj: Any) -> List[Any]: ...

    def close(self) -> None: ...


class DistributedContext:
    """The position of this process among the processes of one trial, and collectives between them.

    `rank`/`size` count all processes; `local_*` the processes on this machine; `cross_*` the machines.
    With `size == 1` the collectives are trivial. A multi-process launcher passes `collectives`, an
    object with `allgather(obj) -> list` over all ranks, from which `gather` and `broadcast` are built.
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

    @property
    def is_chief(self) -> bool:
        return self.rank == 0

    def allgather(self, obj: Any) -> List[Any]:
        """Every rank's `obj`, in rank order, on every rank."""
        if self.size == 1:
            return [obj]
        return self._require_collectives().allgather(obj)

    def gather(self, obj: Any) -> Optional[List[Any]]:
        """Every rank's `obj` in rank order on the chief; None on the other ranks."""
        gathered = self.allgather(obj)
        return gathered if self.rank == 0 else None

    def broadcast(self, obj: Any) -> Any:
        """The chief's `obj`, on every rank (what the other ranks pass is ignored)."""
        if self.size == 1:
            return obj
        return self.allgather(obj if self.rank == 0 else None)[0]

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
