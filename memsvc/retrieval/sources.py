"""Sources: each returned memory derived from others (extracted, summary) brings what it came from."""

from __future__ import annotations

from dataclasses import replace

from opentelemetry.trace import Tracer

from memsvc.deadline import Deadline
from memsvc.memories.codec import MemoryCodec
from memsvc.pipeline.context import QueryReport, stage_span
from memsvc.pipeline.query.pipeline import QueryOutcome
from memsvc.stores.records.base import MemoryRecords


class SourceAttacher:
    """One record-store query for every source of every returned derived memory."""

    def __init__(self, store: MemoryRecords, codec: MemoryCodec, tracer: Tracer) -> None:
        self._store = store
        self._codec = codec
        self._tracer = tracer

    async def run(self, outcome: QueryOutcome, deadline: Deadline, report: QueryReport) -> QueryOutcome:
        wanted = list(dict.fromkeys(s for r in outcome.memories for s in r.memory.source_ids))
        if not wanted:
            return outcome
        with stage_span(self._tracer, report, "sources") as span:
            rows = await deadline.run(self._store.fetch_memories(outcome.plan.namespace, wanted), "the record store")
            opened = {m.id: m for m in await self._codec.open_all(rows)}
            memories = [
                replace(r, sources=tuple(opened[s] for s in r.memory.source_ids if s in opened))
                for r in outcome.memories
            ]
            span.set_attribute("memsvc.sources", len(opened))
        return replace(outcome, memories=memories)
