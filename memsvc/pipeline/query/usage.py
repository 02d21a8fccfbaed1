"""The usage signal normalised by the tenant's usage percentiles (kept by the maintenance job)."""

from __future__ import annotations

import asyncio
import logging
import math
import time

from memsvc.stores.records.base import UsageRecords, UsageStats

log = logging.getLogger(__name__)


def usage_signal(count: int, p90: float | None, saturation: float) -> float:
    """In [0, 1]: log-scaled against the tenant's 90th percentile when known, else saturating.

    A memory recalled as often as the tenant's 90th percentile scores 1; the log keeps the
    first recalls worth more than the hundredth. Without percentiles (a new tenant, or nothing
    recalled yet) the count saturates with `saturation`.
    """
    if count <= 0:
        return 0.0
    if p90 is not None and p90 >= 1:
        return min(1.0, math.log1p(count) / math.log1p(p90))
    return 1.0 - math.exp(-count / saturation) if saturation > 0 else 0.0


class UsageNorms:
    """Per-tenant usage percentiles for the (synchronous) rank stage, refreshed in the background.

    A lookup never waits for the store: a stale or missing entry schedules a refresh and
    answers with what it has (None at first, which means "saturating fallback").
    """

    def __init__(self, store: UsageRecords, ttl_s: float = 60.0) -> None:
        self._store = store
        self._ttl_s = ttl_s
        self._stats: dict[str, tuple[UsageStats | None, float]] = {}
        self._refreshing: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def p90(self, tenant: str) -> float | None:
        entry = self._stats.get(tenant)
        if entry is None or time.monotonic() - entry[1] > self._ttl_s:
            self._schedule(tenant)
        if entry is None or entry[0] is None:
            return None
        return entry[0].p90

    async def refresh(self, tenant: str) -> UsageStats | None:
        try:
            stats = await self._store.get_usage_stats(tenant)
        except Exception:
            log.warning("usage percentiles of a tenant could not be read; ranking uses the fallback")
            stats = None
        self._stats[tenant] = (stats, time.monotonic())
        return stats

    def _schedule(self, tenant: str) -> None:
        if tenant in self._refreshing:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._refreshing.add(tenant)

        async def run() -> None:
            try:
                await self.refresh(tenant)
            finally:
                self._refreshing.discard(tenant)

        task = loop.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
