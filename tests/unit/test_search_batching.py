"""SearchBatcher: searches started together become one call; each caller gets its own hits."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest

from memsvc.domain.models import MemoryFilter, Namespace
from memsvc.stores.vectors.base import Vector, VectorHit
from memsvc.stores.vectors.batching import SearchBatcher

ALICE = Namespace("t", "p", "e", "alice")
BOB = Namespace("t", "p", "e", "bob")


class RecordingIndex:
    """A search_many that answers each vector with its first component as the hit's id."""

    def __init__(self, fail: bool = False, delay_s: float = 0.0) -> None:
        self.calls: list[tuple[str, int, int]] = []
        self.fail = fail
        self.delay_s = delay_s

    async def search_many(
        self, namespace: Namespace, vectors: Sequence[Vector], limit: int, memory_filter: MemoryFilter
    ) -> list[list[VectorHit]]:
        self.calls.append((namespace.user_id, len(vectors), limit))
        await asyncio.sleep(self.delay_s)
        if self.fail:
            raise RuntimeError("index down")
        return [[VectorHit(f"{namespace.user_id}-{int(v[0])}", 1.0)] for v in vectors]


def vec(i: int) -> Vector:
    return np.array([i, 0.0], dtype=np.float32)


def test_searches_of_one_turn_share_a_call_per_namespace_limit_and_filter() -> None:
    index = RecordingIndex()
    batcher = SearchBatcher(index.search_many)

    async def run() -> list[list[VectorHit]]:
        return await asyncio.gather(
            batcher.search(ALICE, vec(1), 50, MemoryFilter(), ""),
            batcher.search(ALICE, vec(2), 50, MemoryFilter(), ""),
            batcher.search(BOB, vec(3), 50, MemoryFilter(), ""),
            batcher.search(ALICE, vec(4), 10, MemoryFilter(), ""),
            batcher.search(ALICE, vec(5), 50, MemoryFilter(), 'tier == "hot"'),
            batcher.search(ALICE, vec(6), 50, MemoryFilter(), ""),
        )

    results = asyncio.run(run())
    assert [r[0].memory_id for r in results] == ["alice-1", "alice-2", "bob-3", "alice-4", "alice-5", "alice-6"]
    assert sorted(index.calls) == sorted([("alice", 3, 50), ("bob", 1, 50), ("alice", 1, 10), ("alice", 1, 50)])

    async def one_after_another() -> None:
        await batcher.search(ALICE, vec(7), 50, MemoryFilter(), "")
        await batcher.search(ALICE, vec(8), 50, MemoryFilter(), "")

    index.calls.clear()
    asyncio.run(one_after_another())
    assert index.calls == [("alice", 1, 50), ("alice", 1, 50)]


def test_a_failed_call_fails_every_search_of_it() -> None:
    batcher = SearchBatcher(RecordingIndex(fail=True).search_many)

    async def run() -> list[object]:
        return await asyncio.gather(
            batcher.search(ALICE, vec(1), 50, MemoryFilter(), ""),
            batcher.search(ALICE, vec(2), 50, MemoryFilter(), ""),
            return_exceptions=True,
        )

    assert [str(r) for r in asyncio.run(run())] == ["index down", "index down"]


def test_a_caller_that_gives_up_leaves_the_others_their_hits() -> None:
    batcher = SearchBatcher(RecordingIndex(delay_s=0.05).search_many)

    async def run() -> list[VectorHit]:
        impatient = asyncio.ensure_future(asyncio.wait_for(batcher.search(ALICE, vec(1), 50, MemoryFilter(), ""), 0.01))
        patient = asyncio.ensure_future(batcher.search(ALICE, vec(2), 50, MemoryFilter(), ""))
        with pytest.raises(TimeoutError):
            await impatient
        return await patient

    assert [h.memory_id for h in asyncio.run(run())] == ["alice-2"]
