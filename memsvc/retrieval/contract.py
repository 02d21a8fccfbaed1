"""The user's interaction contract: their current instructions, read for every composed context."""

from __future__ import annotations

from opentelemetry.trace import Tracer

from memsvc.deadline import Deadline
from memsvc.domain.models import Memory, MemoryFilter, MemoryKind, Namespace
from memsvc.memories.codec import MemoryCodec
from memsvc.pipeline.context import QueryReport, stage_span
from memsvc.stores.records.base import MemoryRecords

# More standing instructions than any context block gives room to.
MAX_INSTRUCTIONS = 30


class ContractReader:
    """One record-store query for the user's active instructions, newest first."""

    def __init__(self, store: MemoryRecords, codec: MemoryCodec, tracer: Tracer) -> None:
        self._store = store
        self._codec = codec
        self._tracer = tracer

    async def run(self, namespace: Namespace, deadline: Deadline, report: QueryReport) -> list[Memory]:
        with stage_span(self._tracer, report, "contract") as span:
            wanted = MemoryFilter(kinds=(MemoryKind.INSTRUCTION,))
            rows = await deadline.run(
                self._store.list_memories(namespace, wanted, None, MAX_INSTRUCTIONS), "the record store"
            )
            span.set_attribute("memsvc.instructions", len(rows))
            return await self._codec.open_all(rows)
