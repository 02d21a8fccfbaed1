"""The vector index contract: per-namespace upsert, filtered search and deletion."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from memsvc.domain.models import MemoryFilter, MemoryKind, Namespace, RetentionStatus, Role, Tier

Vector = npt.NDArray[np.float32]


@dataclass(frozen=True)
class VectorItem:
    """One memory's vector and the attributes recall may filter on (never its text)."""

    memory_id: str
    vector: Vector
    tier: Tier
    tags: tuple[str, ...]
    session_id: str
    role: Role
    kind: MemoryKind
    retention_status: RetentionStatus
    created_at: float


class VectorHit(NamedTuple):
    """A search's hit; a NamedTuple, built fast (fifty per search)."""

    memory_id: str
    similarity: float


class VectorIndex(Protocol):
    """Vectors of one embedding version, isolated per user namespace."""

    @property
    def embedding_version(self) -> str: ...

    async def upsert(self, namespace: Namespace, items: Sequence[VectorItem]) -> None: ...

    async def search(
        self, namespace: Namespace, vector: Vector, limit: int, memory_filter: MemoryFilter
    ) -> list[VectorHit]: ...

    async def search_many(
        self, namespace: Namespace, vectors: Sequence[Vector], limit: int, memory_filter: MemoryFilter
    ) -> list[list[VectorHit]]:
        """One search per vector, in one round trip; hits in the order of `vectors`.

        The index evaluates every field of the filter but `metadata` (sealed; hydration checks
        it) and `min_importance` (the rank stage's gate).
        """
        ...

    async def vectors(self, namespace: Namespace, memory_ids: Sequence[str]) -> dict[str, Vector]:
        """The stored vectors of these memories (ids without one are absent), in one round trip."""
        ...

    async def delete(self, namespace: Namespace, memory_ids: Sequence[str]) -> None: ...

    async def delete_by_digest(self, namespace_digest: str, memory_ids: Sequence[str]) -> None: ...

    async def drop_namespace(self, namespace: Namespace) -> None: ...

    async def drop_version(self, embedding_version: str) -> list[str]:
        """Erase every vector another embedding version wrote here (after its memories were
        marked for re-embedding); returns the names of what was dropped."""
        ...

    async def count(self, namespace: Namespace) -> int: ...

    async def ping(self) -> None: ...

    async def close(self) -> None: ...
