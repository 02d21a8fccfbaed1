"""Stage 4, hydrate: one `WHERE id IN (...)` for the candidates, decryption, metadata filter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from memsvc.deadline import Deadline
from memsvc.domain.models import Memory, Namespace, RetentionStatus, StoredMemory, metadata_matches
from memsvc.memories.codec import MemoryCodec
from memsvc.pipeline.context import QueryPlan
from memsvc.pipeline.query.recall import Candidate
from memsvc.stores.records.base import MemoryRecords


class Hydrated(NamedTuple):
    """A candidate with its row: opened (a `Memory`) when its content was decrypted, else the
    sealed row, whose plaintext columns are all that ranking reads.

    A NamedTuple, as `Candidate`: one per candidate of every query."""

    memory: Memory | StoredMemory
    candidate: Candidate


def opened(items: Sequence[Hydrated]) -> list[Memory]:
    """The memories of items hydrated with `decrypt=True` (all of them are open)."""
    return [h.memory for h in items if isinstance(h.memory, Memory)]


class HydrateStage:
    def __init__(self, store: MemoryRecords, codec: MemoryCodec) -> None:
        self._store = store
        self._codec = codec

    async def fetch(
        self, namespace: Namespace, candidates: Sequence[Candidate], deadline: Deadline, decrypt: bool = True
    ) -> list[Hydrated]:
        """Rows for the candidates in candidate order; ids with no row (stale vectors) are skipped.

        With `decrypt=False` the content stays sealed (`open` opens the few that are returned):
        ranking reads only the plaintext columns.
        """
        rows = await deadline.run(
            self._store.fetch_memories(namespace, [c.memory_id for c in candidates]), "the record store"
        )
        by_id = {row.id: row for row in rows}
        out: list[Hydrated] = []
        for candidate in candidates:
            row = by_id.get(candidate.memory_id)
            if row is None or row.namespace != namespace:
                continue
            out.append(Hydrated(await self._codec.open(row) if decrypt else row, candidate))
        return out

    async def newest(self, plan: QueryPlan, deadline: Deadline) -> float | None:
        """When the plan's namespace got its newest memory (None: it has none)."""
        return await deadline.run(self._store.newest_memory_at(plan.namespace), "the record store")

    async def open(self, rows: Sequence[Memory | StoredMemory]) -> list[Memory]:
        """The rows as memories, the sealed ones decrypted: the few results ranking kept."""
        return [await self._codec.open(row) if isinstance(row, StoredMemory) else row for row in rows]

    async def run(
        self, plan: QueryPlan, candidates: Sequence[Candidate], deadline: Deadline, decrypt: bool = True
    ) -> list[Hydrated]:
        # A metadata filter reads the sealed metadata: then every candidate is opened here.
        decrypt = decrypt or bool(plan.memory_filter.metadata)
        hydrated = await self.fetch(plan.namespace, candidates, deadline, decrypt)
        # The row is the truth: a vector whose attributes lag its row (a supersession or tier
        # move not yet re-indexed) never lets a superseded or wrong-tier memory through.
        memory_filter = plan.memory_filter
        if not memory_filter.include_inactive:
            hydrated = [h for h in hydrated if h.memory.retention_status is RetentionStatus.ACTIVE]
        if memory_filter.tier is not None:
            hydrated = [h for h in hydrated if h.memory.tier is memory_filter.tier]
        wanted = memory_filter.metadata
        if wanted:
            hydrated = [
                h for h in hydrated if isinstance(h.memory, Memory) and metadata_matches(h.memory.metadata, wanted)
            ]
        return hydrated
