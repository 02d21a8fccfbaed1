"""The maintenance job: decay, usage percentiles, tiers, expiry and retention, on a lease.

One run scans every memory once. It recomputes decay from the time since the last recall (or
since creation), moves memories between tiers by policy and re-indexes their vectors so tier
filters at recall stay true, stores per-tenant usage percentiles for ranking, deletes for real
the memories past their expiry or their kind's retention, through the write path's one delete
path, and deletes the recall events past theirs. Runs take a lease row in the record store,
and every row update is a compare-and-set on the row's revision: two replicas (or a CronJob and
an in-process scheduler) running at once neither double-apply nor fight. The clock is a
parameter, so a simulated month is one call.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import secrets
import socket
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from memsvc.deadline import Deadline
from memsvc.domain.models import (
    ACTOR_MAINTENANCE,
    MemoryChange,
    MemoryKind,
    Namespace,
    RetentionStatus,
    StoredMemory,
    Tier,
)
from memsvc.errors import MemsvcError
from memsvc.memories.changes import NamespaceChanges
from memsvc.memories.codec import MemoryCodec
from memsvc.memories.indexer import Indexer
from memsvc.pipeline.jobs.periodic import PeriodicTask
from memsvc.pipeline.write.path import WritePath
from memsvc.stores.records.base import MaintenanceUpdate, RecordStore, UsageStats

log = logging.getLogger(__name__)

LEASE_NAME = "maintenance"
_DAY_S = 86_400.0
# Decay changes smaller than this are not written: a rerun at the same clock changes nothing.
_DECAY_EPSILON = 1e-3


@dataclass(frozen=True)
class MaintenancePolicy:
    """Thresholds of the lifecycle; durations in days."""

    decay_half_life_days: float = 30.0
    # Recalled (or created) within this many days: hot.
    hot_idle_days: float = 7.0
    # Idle at least this many days: cold; in between: warm.
    cold_idle_days: float = 30.0
    # Memories this important stay hot however idle they are.
    hot_importance: float = 0.9
    # Memories of these kinds are deleted once older than this many days.
    retention_days_by_kind: Mapping[MemoryKind, float] = field(default_factory=dict)
    # Every query writes a 'recall' event per result: those older than this many days are
    # deleted (0 keeps them all). usage_count and last_accessed_at keep the totals.
    recall_events_days: float = 30.0
    lease_ttl_s: float = 300.0
    batch: int = 500


@dataclass
class MaintenanceReport:
    ran: bool
    scanned: int = 0
    decay_updated: int = 0
    tier_moves: dict[str, int] = field(default_factory=dict)
    expired_deleted: int = 0
    retention_deleted: int = 0
    recall_events_pruned: int = 0
    tenants_with_usage: int = 0
    note: str = ""

    @property
    def moved(self) -> int:
        return sum(self.tier_moves.values())


def decay_of(idle_s: float, half_life_days: float) -> float:
    """1 right after a recall, halving every half-life without one."""
    if half_life_days <= 0:
        return 1.0
    return round(float(0.5 ** (max(0.0, idle_s) / (half_life_days * _DAY_S))), 4)


def tier_of(idle_s: float, importance: float, policy: MaintenancePolicy) -> Tier:
    if idle_s < policy.hot_idle_days * _DAY_S or importance >= policy.hot_importance:
        return Tier.HOT
    if idle_s < policy.cold_idle_days * _DAY_S:
        return Tier.WARM
    return Tier.COLD


def percentile(sorted_values: list[int], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list (0 for an empty one)."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return float(sorted_values[rank - 1])


def default_holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class Maintenance:
    def __init__(
        self,
        *,
        store: RecordStore,
        writes: WritePath,
        codec: MemoryCodec,
        indexer: Indexer,
        changes: NamespaceChanges,
        policy: MaintenancePolicy,
        holder: str | None = None,
    ) -> None:
        self._store = store
        self._writes = writes
        self._codec = codec
        self._indexer = indexer
        self._changes = changes
        self._policy = policy
        self.holder = holder or default_holder()
        self._periodic = PeriodicTask("maintenance", self._tick)

    async def run_once(self, now: float | None = None) -> MaintenanceReport:
        """One pass over every memory at clock `now` (default: the wall clock)."""
        clock = time.time() if now is None else now
        # The lease runs on the wall clock whatever `now` says: it guards real concurrency.
        if not await self._store.acquire_lease(LEASE_NAME, self.holder, time.time(), self._policy.lease_ttl_s):
            return MaintenanceReport(ran=False, note="another replica holds the maintenance lease")
        report = MaintenanceReport(ran=True)
        try:
            await self._pass(clock, report)
        finally:
            with contextlib.suppress(MemsvcError):
                await self._store.release_lease(LEASE_NAME, self.holder)
        return report

    async def _pass(self, now: float, report: MaintenanceReport) -> None:
        policy = self._policy
        usage: dict[str, list[int]] = defaultdict(list)
        namespaces: set[Namespace] = set()
        after = ""
        while True:
            if self._stopping(report):
                return  # the next pass starts over; partial usage counts are not stats
            rows = await self._store.scan_memories(after, policy.batch)
            if not rows:
                break
            after = rows[-1].id
            report.scanned += len(rows)
            updates: list[MaintenanceUpdate] = []
            expired: dict[Namespace, list[str]] = defaultdict(list)
            retired: dict[Namespace, list[str]] = defaultdict(list)
            for row in rows:
                namespaces.add(row.namespace)
                if row.expires_at is not None and row.expires_at <= now:
                    expired[row.namespace].append(row.id)
                    continue
                retention = policy.retention_days_by_kind.get(row.kind)
                if retention is not None and now - row.created_at >= retention * _DAY_S:
                    retired[row.namespace].append(row.id)
                    continue
                if row.retention_status is RetentionStatus.ACTIVE:
                    usage[row.namespace.tenant].append(row.usage_count)
                update = await self._update_for(row, now)
                if update is not None:
                    updates.append(update)
            report.expired_deleted += await self._delete(expired, "expired (expire_time passed)")
            report.retention_deleted += await self._delete(retired, "past the retention period of its kind")
            moved = await self._store.apply_maintenance(updates, now)
            report.decay_updated += len(updates)
            for row in moved:
                report.tier_moves[row.tier.value] = report.tier_moves.get(row.tier.value, 0) + 1
            await self._reindex(moved)
            if len(rows) < policy.batch:
                break
            if not await self._renewed(report):
                return
        if not await self._prune_recall_events(namespaces, now, report):
            return
        stats = []
        for tenant, counts in usage.items():
            counts.sort()
            stats.append(
                UsageStats(
                    tenant,
                    percentile(counts, 0.5),
                    percentile(counts, 0.9),
                    percentile(counts, 0.99),
                    len(counts),
                    now,
                )
            )
        await self._store.put_usage_stats(stats)
        report.tenants_with_usage = len(stats)

    def _stopping(self, report: MaintenanceReport) -> bool:
        """Whether the server is shutting down (noted in the report): the pass stops there."""
        stopping = self._periodic.stopping
        if stopping:
            report.note = "stopped by shutdown before the end of the pass"
        return stopping

    async def _renewed(self, report: MaintenanceReport) -> bool:
        """Renew the lease between batches; a holder that lost it stops (noted in the report)."""
        if await self._store.acquire_lease(LEASE_NAME, self.holder, time.time(), self._policy.lease_ttl_s):
            return True
        report.note = "lost the maintenance lease mid-run"
        return False

    async def _prune_recall_events(self, namespaces: set[Namespace], now: float, report: MaintenanceReport) -> bool:
        """Delete the old recall events of every namespace the pass saw (ForgetUser deletes a
        forgotten user's); False when the pass must stop (shutdown, or the lease lost)."""
        policy = self._policy
        if policy.recall_events_days <= 0:
            return True
        before = now - policy.recall_events_days * _DAY_S
        for namespace in namespaces:
            while True:
                if self._stopping(report):
                    return False
                pruned = await self._store.prune_recall_events(namespace, before, policy.batch)
                report.recall_events_pruned += pruned
                if pruned < policy.batch:
                    break
                if not await self._renewed(report):
                    return False
        return True

    async def _update_for(self, row: StoredMemory, now: float) -> MaintenanceUpdate | None:
        idle_s = now - (row.last_accessed_at if row.last_accessed_at is not None else row.created_at)
        decay = decay_of(idle_s, self._policy.decay_half_life_days)
        tier = tier_of(idle_s, row.importance, self._policy)
        if tier is row.tier:
            if abs(decay - row.decay) < _DECAY_EPSILON:
                return None
            return MaintenanceUpdate(row.id, row.namespace.digest, row.revision, decay)
        memory = await self._codec.open(row)
        idle_days = idle_s / _DAY_S
        version = await self._codec.version_of(
            memory._replace(tier=tier, decay=decay),
            at=now,
            actor=ACTOR_MAINTENANCE,
            change=MemoryChange.TIER_MOVE,
            fields=("tier", "decay"),
            description=f"{row.tier.value} -> {tier.value}: {idle_days:.1f} days without recall",
        )
        return MaintenanceUpdate(row.id, row.namespace.digest, row.revision, decay, tier, version)

    async def _delete(self, doomed: Mapping[Namespace, list[str]], why: str) -> int:
        total = 0
        for namespace, ids in doomed.items():
            total += await self._writes.delete_rows(
                namespace, ids, ACTOR_MAINTENANCE, f"deleted: {why}", Deadline(None)
            )
        return total

    async def _reindex(self, rows: list[StoredMemory]) -> None:
        """Vectors carry the tier: write them again so tier filters at recall stay true."""
        by_namespace: dict[Namespace, list[StoredMemory]] = defaultdict(list)
        for row in rows:
            by_namespace[row.namespace].append(row)
        for namespace, group in by_namespace.items():
            texts = [m.embedding_text for m in await self._codec.open_all(group)]
            await self._indexer.reindex(namespace, list(zip(group, texts, strict=True)))
            await self._changes.changed(namespace)

    # -- the in-process scheduler (embedded default) -------------------------------------------

    async def _tick(self) -> None:
        report = await self.run_once()
        changed = report.moved or report.expired_deleted or report.retention_deleted or report.recall_events_pruned
        if report.ran and changed:
            log.info("maintenance: %s", report)

    def start(self, interval_s: float) -> None:
        self._periodic.start(interval_s)

    async def stop(self) -> None:
        await self._periodic.stop()
