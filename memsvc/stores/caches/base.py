"""Cache contracts. Neither cache ever holds readable memory content."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from memsvc.domain.models import Namespace, ScoreBreakdown


class EmbeddingCache(Protocol):
    """Query vectors keyed by (model, version, text hash)."""

    async def get(self, key: str) -> npt.NDArray[np.float32] | None: ...

    async def put(self, key: str, vector: npt.NDArray[np.float32]) -> None: ...


@dataclass(frozen=True)
class CachedHit:
    """One ranked result of a cached query: ids and scores only, no content."""

    memory_id: str
    score: float
    breakdown: ScoreBreakdown
    matched_queries: tuple[str, ...] = ()


@dataclass(frozen=True)
class CachedResult:
    hits: tuple[CachedHit, ...]
    explanation: str
    candidates_recalled: int
    dropped_by_importance: int


class ResultCache(Protocol):
    """Ranked results per namespace; any write to the namespace invalidates them all.

    `lookup` returns the cached result (if any) and the slot to store a fresh one in. The slot
    names the namespace generation seen at lookup, so a result computed across a concurrent
    write is stored under the old generation and never served.
    """

    async def lookup(self, namespace: Namespace, request_key: str) -> tuple[CachedResult | None, str]: ...

    async def store(self, slot: str, result: CachedResult) -> None: ...

    async def invalidate(self, namespace: Namespace) -> None: ...

    async def invalidate_many(self, namespaces: Sequence[Namespace]) -> None: ...
