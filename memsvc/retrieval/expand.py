"""Context expansion: each returned memory brings the turns just before and after it in its session.

The neighbours are attached to the result they accompany (`RankedMemory.context`), never ranked
beside it: they were not matched, and an acknowledgement that follows a turn is what it looks
like only next to that turn.
"""

from __future__ import annotations

from dataclasses import replace

from opentelemetry.trace import Tracer

from memsvc.deadline import Deadline
from memsvc.domain.models import RankedMemory
from memsvc.memories.codec import MemoryCodec
from memsvc.pipeline.context import QueryReport, stage_span
from memsvc.pipeline.query.pipeline import QueryOutcome
from memsvc.stores.records.base import MemoryRecords


class ContextExpander:
    """One record-store query for all neighbours, each attached to the result it accompanies."""

    def __init__(self, store: MemoryRecords, codec: MemoryCodec, tracer: Tracer) -> None:
        self._store = store
        self._codec = codec
        self._tracer = tracer

    async def run(self, outcome: QueryOutcome, window: int, deadline: Deadline, report: QueryReport) -> QueryOutcome:
        anchors = [r for r in outcome.memories if r.memory.session_id]
        if window <= 0 or not anchors:
            return outcome
        plan = outcome.plan
        with stage_span(self._tracer, report, "expand") as span:
            rows = await deadline.run(
                self._store.session_neighbors(
                    plan.namespace,
                    [r.memory.id for r in anchors],
                    window,
                    plan.memory_filter.include_inactive,
                ),
                "the record store",
            )
            by_session: dict[str, list[tuple[float, str]]] = {}
            opened = {}
            for row in rows:
                if row.namespace != plan.namespace:
                    continue
                memory = await self._codec.open(row)
                # A neighbour is a memory like any other: the query's filters apply to it too.
                if not plan.memory_filter.admits(memory):
                    continue
                opened[row.id] = memory
                by_session.setdefault(row.session_id, []).append((row.created_at, row.id))
            # A neighbour comes once, with the first result it accompanies, and never when it is
            # a result of its own.
            emitted = {r.memory.id for r in outcome.memories}
            out: list[RankedMemory] = []
            attached = 0
            for r in outcome.memories:
                if not r.memory.session_id:
                    out.append(r)
                    continue
                key = (r.memory.created_at, r.memory.id)
                session = sorted(by_session.get(r.memory.session_id, []))
                before = [s for s in session if s < key][-window:]
                after = [s for s in session if s > key][:window]
                context = []
                for _, memory_id in [*before, *after]:
                    if memory_id not in emitted:
                        emitted.add(memory_id)
                        context.append(opened[memory_id])
                attached += len(context)
                out.append(replace(r, context=tuple(context)))
            span.set_attribute("memsvc.context.neighbors", attached)
        return replace(outcome, memories=out)
