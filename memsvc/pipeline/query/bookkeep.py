"""Stage 6, bookkeep: recall events off the caller's critical path, and the result cache."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from memsvc.domain.models import RankedMemory, RecallEvent
from memsvc.pipeline.context import QueryPlan
from memsvc.pipeline.jobs.periodic import PeriodicTask
from memsvc.stores.caches.base import CachedHit, CachedResult, ResultCache
from memsvc.stores.records.base import UsageRecords

log = logging.getLogger(__name__)


class RecallRecorder:
    """Batches recall events and writes them in one transaction every flush interval.

    Queries never wait for this write; events still queued at shutdown are flushed by
    `stop()`, and a failed flush keeps its events for the next attempt.
    """

    def __init__(self, store: UsageRecords, flush_interval_s: float, max_pending: int = 100_000) -> None:
        self._store = store
        self._interval_s = flush_interval_s
        self._max_pending = max_pending
        self._pending: list[RecallEvent] = []
        self._periodic = PeriodicTask("recall bookkeeping", self.flush)
        self._wake = asyncio.Event()

    def record(self, events: Sequence[RecallEvent]) -> None:
        if len(self._pending) + len(events) > self._max_pending:
            log.warning("recall bookkeeping is behind; dropping %d events", len(events))
            return
        self._pending.extend(events)

    async def flush(self) -> None:
        batch, self._pending = self._pending, []
        if not batch:
            return
        try:
            await self._store.record_recalls(batch)
        except Exception:
            log.exception("recording %d recall events failed; will retry", len(batch))
            self._pending[:0] = batch

    def start(self) -> None:
        self._periodic.start(self._interval_s)

    async def stop(self) -> None:
        await self._periodic.stop()
        await self.flush()


class BookkeepStage:
    def __init__(self, recorder: RecallRecorder, cache: ResultCache) -> None:
        self._recorder = recorder
        self._cache = cache

    async def run(
        self,
        plan: QueryPlan,
        ranked: Sequence[RankedMemory],
        now: float,
        cache_slot: str | None,
        explanation: str,
        candidates_recalled: int,
        dropped_by_importance: int,
    ) -> None:
        self._recorder.record(
            [
                RecallEvent(r.memory.id, plan.namespace, plan.request_id, r.score, i + 1, now)
                for i, r in enumerate(ranked)
            ]
        )
        if cache_slot is not None:
            await self._cache.store(
                cache_slot,
                CachedResult(
                    hits=tuple(CachedHit(r.memory.id, r.score, r.breakdown, r.matched_queries) for r in ranked),
                    explanation=explanation,
                    candidates_recalled=candidates_recalled,
                    dropped_by_importance=dropped_by_importance,
                ),
            )
