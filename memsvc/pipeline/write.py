"""The write path: validate -> embed (batched) -> encrypt -> record row -> vector upsert.

The record store is the source of truth. A row is committed before its vector is written;
if the vector write fails the row stays marked unindexed and the reconciler finishes the
job, so an acknowledged write is never lost.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from memsvc.crypto.envelope import EnvelopeCipher
from memsvc.domain.models import (
    Memory,
    MemoryChange,
    MemoryChanges,
    MemoryFilter,
    Namespace,
    NewMemory,
    Permission,
    Principal,
    RetentionStatus,
    SealedContent,
    StoredMemory,
    StoredVersion,
    new_memory_id,
)
from memsvc.embeddings.base import Embedder
from memsvc.errors import MemsvcError, NotFound, PermissionDenied
from memsvc.pipeline.context import Deadline
from memsvc.pipeline.hydrate import metadata_matches, open_memory
from memsvc.pipeline.lexical import LexicalWriter
from memsvc.pipeline.lifecycle import (
    Contradiction,
    Review,
    WriteReview,
    seal_version,
    superseded_changes,
    version_of,
)
from memsvc.pipeline.paging import PageTokens
from memsvc.pipeline.reconcile import vector_item
from memsvc.pipeline.scoring import estimate_importance, estimate_quality
from memsvc.pipeline.validation import (
    Limits,
    Violations,
    check_memory_id,
    check_user_id,
    validate_changes,
    validate_listing,
    validate_new_memories,
)
from memsvc.stores.caches.base import ResultCache
from memsvc.stores.records.base import IndexTicket, PageCursor, RecordStore
from memsvc.stores.vectors.base import VectorIndex

log = logging.getLogger(__name__)


class WriteOutcome(StrEnum):
    CREATED = "created"
    IDEMPOTENT_REPLAY = "idempotent_replay"
    CONFIRMED_EXISTING = "confirmed_existing"


@dataclass(frozen=True)
class AddResult:
    """What AddMemories did with one item, and why."""

    memory: Memory
    created: bool
    outcome: WriteOutcome
    reason: str = ""
    superseded_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Page:
    memories: list[Memory]
    next_page_token: str


def _require(principal: Principal, permission: Permission) -> None:
    if not principal.allows(permission):
        raise PermissionDenied(f"this API key lacks the {permission.value} permission")


class WritePath:
    def __init__(
        self,
        *,
        store: RecordStore,
        index: VectorIndex,
        embedder: Embedder,
        cipher: EnvelopeCipher,
        result_cache: ResultCache,
        page_tokens: PageTokens,
        limits: Limits,
        default_page_size: int,
        lexical: LexicalWriter | None = None,
        review: WriteReview | None = None,
    ) -> None:
        self._store = store
        self._index = index
        self._embedder = embedder
        self._cipher = cipher
        self._cache = result_cache
        self._pages = page_tokens
        self._limits = limits
        self._default_page_size = default_page_size
        self._lexical = lexical
        self._review = review

    # -- writes -------------------------------------------------------------------------------

    async def add(
        self, principal: Principal, user_id: str, items: list[NewMemory], deadline: Deadline
    ) -> list[tuple[Memory, bool]]:
        return [(r.memory, r.created) for r in await self.add_detailed(principal, user_id, items, deadline)]

    async def add_detailed(
        self, principal: Principal, user_id: str, items: list[NewMemory], deadline: Deadline
    ) -> list[AddResult]:
        """Store new memories; repeats confirm an existing memory, contradictions supersede older ones."""
        _require(principal, Permission.WRITE)
        now = time.time()
        validate_new_memories(user_id, items, self._limits, now)
        namespace = Namespace.of(principal, user_id)
        # Retries first: a replayed item is answered from the store with no side effect at all.
        keys = [i.idempotency_key for i in items if i.idempotency_key]
        replayed = {
            r.idempotency_key: r
            for r in await deadline.run(self._store.fetch_by_idempotency_keys(namespace, keys), "the record store")
        }
        vectors = await deadline.run(self._embedder.embed([i.content for i in items]), "the embedder")
        results: list[AddResult | None] = [None] * len(items)
        rows: list[StoredMemory] = []
        versions: list[StoredVersion] = []
        pending: list[tuple[int, NewMemory, Any, tuple[Contradiction, ...]]] = []
        batch: list[tuple[Memory, Any]] = []  # this call's new memories, for repeats within the call
        repeats: list[tuple[int, int, str]] = []  # (item, pending row it repeats, why)
        confirmed_any = False
        # Every item against the stored memories in one search; then in order against each other.
        to_review = [
            i for i, item in enumerate(items) if self._review is not None and item.idempotency_key not in replayed
        ]
        reviews = [Review()] * len(items)
        if self._review is not None and to_review:
            found = await self._review.review_many(
                namespace, [(items[i].content, vectors[i]) for i in to_review], deadline
            )
            for i, review in zip(to_review, found, strict=True):
                reviews[i] = review
        for i, (item, vector, review) in enumerate(zip(items, vectors, reviews, strict=True)):
            if item.idempotency_key in replayed:
                memory = await open_memory(self._cipher, replayed[item.idempotency_key])
                results[i] = AddResult(memory, False, WriteOutcome.IDEMPOTENT_REPLAY, "idempotency key stored before")
                continue
            local = Review()
            if self._review is not None and review.duplicate_of is None:
                local = await self._review.review_batch(item.content, vector, batch, deadline)
            if review.duplicate_of is not None:
                confirmed = await self._confirm(principal, review.duplicate_of, review.duplicate_reason, now, deadline)
                if confirmed is not None:
                    confirmed_any = True
                    results[i] = AddResult(confirmed, False, WriteOutcome.CONFIRMED_EXISTING, review.duplicate_reason)
                    continue
            if local.duplicate_of is not None:
                k = next(k for k, (m, _) in enumerate(batch) if m.id == local.duplicate_of.id)
                rows[k] = replace(rows[k], confirmation_count=rows[k].confirmation_count + 1)
                after = replace(local.duplicate_of, confirmation_count=rows[k].confirmation_count)
                versions.append(
                    await version_of(
                        self._cipher,
                        after,
                        at=now,
                        actor=principal.key_id,
                        change=MemoryChange.CONFIRM,
                        fields=("confirmation_count",),
                        description=local.duplicate_reason,
                    )
                )
                repeats.append((i, k, local.duplicate_reason))
                continue
            contradictions = review.contradictions + local.contradictions
            created_at = item.created_at if item.created_at is not None else now
            # A back-dated statement older than the memory it contradicts is history, not news.
            newer = [c for c in contradictions if c.memory.created_at > created_at]
            row = await self._new_row(namespace, item, now, max(newer, key=lambda c: c.memory.created_at, default=None))
            rows.append(row)
            memory = await open_memory(self._cipher, row)
            batch.append((memory, vector))
            versions.append(
                await version_of(
                    self._cipher,
                    memory,
                    at=now,
                    actor=principal.key_id,
                    change=MemoryChange.CREATE,
                    fields=("content", "metadata", "importance", "quality", "tier"),
                    description="created by AddMemories",
                )
            )
            pending.append((i, item, vector, () if newer else contradictions))
        # Creates come first in `versions` order per memory, so confirmations number after them.
        versions.sort(key=lambda v: v.change is not MemoryChange.CREATE)
        stored = await deadline.run(self._store.insert_memories(rows, versions), "the record store")
        fresh: list[tuple[StoredMemory, Any]] = []
        texts: list[str] = []
        supersede: list[tuple[Memory, str, str]] = []
        opened: list[Memory] = []
        for (i, item, vector, contradicted), (row, created) in zip(pending, stored, strict=True):
            memory = await open_memory(self._cipher, row)
            opened.append(memory)
            if not created:  # a concurrent retry stored the same idempotency key first
                results[i] = AddResult(memory, False, WriteOutcome.IDEMPOTENT_REPLAY, "idempotency key stored before")
                continue
            fresh.append((row, vector))
            texts.append(item.content)
            superseded = tuple(c.memory.id for c in contradicted)
            supersede += [(c.memory, row.id, c.reason) for c in contradicted]
            reason = f"contradicts and supersedes {', '.join(superseded)}" if superseded else ""
            if row.retention_status is RetentionStatus.SUPERSEDED:
                reason = f"older than memory {row.superseded_by}, which it contradicts; stored as superseded history"
            results[i] = AddResult(memory, True, WriteOutcome.CREATED, reason, superseded)
        for i, k, why in repeats:
            results[i] = AddResult(opened[k], False, WriteOutcome.CONFIRMED_EXISTING, why)
        if fresh or confirmed_any:
            await self._cache.invalidate(namespace)
        if fresh:
            await self._index_rows(namespace, fresh, texts)
        if supersede:
            await self._supersede(principal, namespace, supersede, now)
        done = [r for r in results if r is not None]
        assert len(done) == len(items)
        return done

    async def _new_row(
        self, namespace: Namespace, item: NewMemory, now: float, superseded_by: Contradiction | None = None
    ) -> StoredMemory:
        created_at = item.created_at if item.created_at is not None else now
        memory_id = new_memory_id(created_at)
        if item.importance is not None:
            importance, importance_reason = item.importance, "set by the caller"
        else:
            estimate = estimate_importance(item.content, item.role, item.kind)
            importance, importance_reason = estimate.value, f"estimated: {estimate.reason}"
        quality = estimate_quality(item.content)
        sealed = SealedContent(item.content, dict(item.metadata)).to_bytes()
        reasons = {
            "importance": importance_reason,
            "quality": f"estimated: {quality.reason}",
            "consistency": "not contradicted",
        }
        row = StoredMemory(
            id=memory_id,
            namespace=namespace,
            ciphertext=await self._cipher.seal(namespace, memory_id, sealed),
            role=item.role,
            kind=item.kind,
            tags=item.tags,
            session_id=item.session_id,
            importance=importance,
            tier=item.tier,
            created_at=created_at,
            updated_at=now,
            usage_count=0,
            last_accessed_at=None,
            quality=quality.value,
            consistency=1.0,
            decay=1.0,
            retention_status=RetentionStatus.ACTIVE,
            embedding_version=self._index.embedding_version,
            superseded_by="",
            idempotency_key=item.idempotency_key,
            indexed=False,
            expires_at=item.expires_at,
            score_reasons=reasons,
        )
        if superseded_by is None:
            return row
        return replace(row, **superseded_changes(row, superseded_by.memory.id, superseded_by.reason))

    async def _confirm(
        self, principal: Principal, existing: Memory, reason: str, now: float, deadline: Deadline
    ) -> Memory | None:
        version = await version_of(
            self._cipher,
            replace(existing, confirmation_count=existing.confirmation_count + 1),
            at=now,
            actor=principal.key_id,
            change=MemoryChange.CONFIRM,
            fields=("confirmation_count",),
            description=reason,
        )
        row = await deadline.run(
            self._store.confirm_memory(existing.namespace, existing.id, now, version), "the record store"
        )
        return None if row is None else await open_memory(self._cipher, row)

    async def _supersede(
        self, principal: Principal, namespace: Namespace, items: Sequence[tuple[Memory, str, str]], now: float
    ) -> None:
        """Mark contradicted memories superseded (with a version each) and re-index their vectors.

        The successors are stored first: if this step fails, both stay active, never neither.
        """
        updated: list[tuple[StoredMemory, str]] = []
        for old, successor_id, reason in items:
            changes = superseded_changes(old, successor_id, reason)
            after = replace(old, retention_status=RetentionStatus.SUPERSEDED, superseded_by=successor_id)
            version = await version_of(
                self._cipher,
                after,
                at=now,
                actor=principal.key_id,
                change=MemoryChange.SUPERSEDE,
                fields=("retention_status", "superseded_by", "consistency"),
                description=f"superseded by {successor_id}: {reason}",
            )
            row = await self._store.update_memory(namespace, old.id, changes, now, version)
            if row is not None:
                updated.append((row, old.content))
        await self.reindex(namespace, updated)

    @property
    def embedding_version(self) -> str:
        return self._index.embedding_version

    async def index_rows(
        self, namespace: Namespace, rows: Sequence[tuple[StoredMemory, Any]], texts: Sequence[str] = ()
    ) -> None:
        """Index stored rows (postings and vectors); the reconciler finishes if this fails."""
        await self._index_rows(namespace, rows, texts)

    async def reindex(self, namespace: Namespace, rows: Sequence[tuple[StoredMemory, str]]) -> None:
        """Rewrite the index entries of rows whose indexed attributes changed (status, tier).

        The content did not change, so the stored vector is reused; only a row the index has no
        vector for (never indexed, or the index unreachable) is embedded again from `content`.
        """
        if not rows:
            return
        try:
            stored = await self._index.vectors(namespace, [row.id for row, _ in rows])
        except MemsvcError:
            stored = {}
        missing = [(row, content) for row, content in rows if row.id not in stored]
        if missing:
            fresh = await self._embedder.embed([content for _, content in missing])
            stored.update({row.id: v for (row, _), v in zip(missing, fresh, strict=True)})
        await self._index_rows(namespace, [(row, stored[row.id]) for row, _ in rows])

    async def invalidate(self, namespace: Namespace) -> None:
        """Drop cached query results of a namespace whose rows changed outside a write RPC."""
        await self._cache.invalidate(namespace)

    async def _index_rows(
        self, namespace: Namespace, rows: Sequence[tuple[StoredMemory, Any]], texts: Sequence[str] = ()
    ) -> None:
        """Write postings and vectors, then mark rows indexed; on failure leave them to the reconciler."""
        try:
            if self._lexical is not None and texts:
                pairs = [(row.id, text) for (row, _), text in zip(rows, texts, strict=True)]
                await self._lexical.write(namespace, pairs)
            await self._index.upsert(namespace, [vector_item(row, vector) for row, vector in rows])
            await self._store.mark_indexed([IndexTicket(row.id, row.revision) for row, _ in rows])
        except MemsvcError as exc:
            log.warning("vector write deferred to the reconciler for %d rows: %s", len(rows), exc.message)

    async def update(
        self, principal: Principal, user_id: str, memory_id: str, changes: MemoryChanges, deadline: Deadline
    ) -> Memory:
        _require(principal, Permission.WRITE)
        validate_changes(user_id, memory_id, changes, self._limits)
        namespace = Namespace.of(principal, user_id)
        current = await self._get_stored(namespace, memory_id, deadline)
        memory = await open_memory(self._cipher, current)
        columns: dict[str, Any] = {}
        content = memory.content if changes.content is None else changes.content
        metadata = memory.metadata if changes.metadata is None else changes.metadata
        if changes.content is not None or changes.metadata is not None:
            sealed = SealedContent(content, dict(metadata)).to_bytes()
            columns["ciphertext"] = await self._cipher.seal(namespace, memory_id, sealed)
        if changes.tags is not None:
            columns["tags"] = changes.tags
        if changes.tier is not None:
            columns["tier"] = changes.tier
        if changes.importance is not None:
            columns["importance"] = changes.importance
            columns["score_reasons"] = {**memory.score_reasons, "importance": "set by the caller"}
        if changes.expires_at is not None:
            columns["expires_at"] = changes.expires_at or None
        vectors = await deadline.run(self._embedder.embed([content]), "the embedder")
        now = time.time()
        fields = [f for f in ("content", "tags", "tier", "importance", "metadata") if getattr(changes, f) is not None]
        if changes.expires_at is not None:
            fields.append("expire_time")
        after = replace(
            memory,
            content=content,
            metadata=metadata,
            tier=memory.tier if changes.tier is None else changes.tier,
            importance=memory.importance if changes.importance is None else changes.importance,
        )
        version = await version_of(
            self._cipher,
            after,
            at=now,
            actor=principal.key_id,
            change=MemoryChange.UPDATE,
            fields=fields,
            description=f"UpdateMemory set {', '.join(fields)}",
        )
        updated = await deadline.run(
            self._store.update_memory(namespace, memory_id, columns, now, version), "the record store"
        )
        if updated is None:
            raise NotFound("no such memory")
        await self._cache.invalidate(namespace)
        await self._index_rows(namespace, [(updated, vectors[0])], [content])
        return await open_memory(self._cipher, updated)

    async def delete(self, principal: Principal, user_id: str, memory_id: str, deadline: Deadline) -> None:
        _require(principal, Permission.WRITE)
        self._check_ids(user_id, memory_id)
        namespace = Namespace.of(principal, user_id)
        if not await self.delete_rows(namespace, [memory_id], principal.key_id, "deleted by DeleteMemory", deadline):
            raise NotFound("no such memory")

    async def delete_rows(
        self, namespace: Namespace, memory_ids: Sequence[str], actor: str, description: str, deadline: Deadline
    ) -> int:
        """The one delete path (callers and the maintenance job): row, history content, postings, vector.

        Each memory keeps only a content-free version recording who deleted it, when and why.
        """
        deleted = 0
        for memory_id in memory_ids:
            row = await deadline.run(self._store.fetch_memories(namespace, [memory_id]), "the record store")
            if not row:
                continue
            version = await seal_version(
                self._cipher,
                memory_id=memory_id,
                namespace=namespace,
                at=time.time(),
                actor=actor,
                change=MemoryChange.DELETE,
                fields=("content", "metadata"),
                description=description,
                tier=row[0].tier,
                retention_status=row[0].retention_status,
                importance=row[0].importance,
                content=None,
            )
            if await deadline.run(self._store.delete_memory(namespace, memory_id, version), "the record store"):
                deleted += 1
        if not deleted:
            return 0
        await self._cache.invalidate(namespace)
        try:
            await self._index.delete(namespace, list(memory_ids))
            await self._store.clear_vector_tombstones(list(memory_ids))
        except MemsvcError as exc:
            log.warning("vector delete deferred to the reconciler: %s", exc.message)
        return deleted

    async def forget(self, principal: Principal, user_id: str, deadline: Deadline) -> int:
        _require(principal, Permission.WRITE)
        v = Violations()
        check_user_id(v, user_id)
        v.raise_if_any()
        namespace = Namespace.of(principal, user_id)
        # Rows and the data key go first, in one transaction: from then on nothing decrypts.
        count = await deadline.run(self._store.forget_namespace(namespace), "the record store")
        self._cipher.forget(namespace)
        await self._cache.invalidate(namespace)
        try:
            await self._index.drop_namespace(namespace)
            await self._store.clear_namespace_tombstone(namespace)
        except MemsvcError as exc:
            log.warning("vector erasure deferred to the reconciler: %s", exc.message)
        return count

    # -- reads --------------------------------------------------------------------------------

    async def get(self, principal: Principal, user_id: str, memory_id: str, deadline: Deadline) -> Memory:
        _require(principal, Permission.READ)
        self._check_ids(user_id, memory_id)
        stored = await self._get_stored(Namespace.of(principal, user_id), memory_id, deadline)
        return await open_memory(self._cipher, stored)

    async def list(
        self,
        principal: Principal,
        user_id: str,
        memory_filter: MemoryFilter,
        page_size: int,
        page_token: str,
        deadline: Deadline,
    ) -> Page:
        _require(principal, Permission.READ)
        size = page_size or self._default_page_size
        validate_listing(user_id, size, memory_filter, self._limits)
        namespace = Namespace.of(principal, user_id)
        fingerprint = memory_filter.fingerprint()
        cursor = self._pages.decode(page_token, namespace, fingerprint) if page_token else None
        rows = await deadline.run(
            self._store.list_memories(namespace, memory_filter, cursor, size + 1), "the record store"
        )
        has_more = len(rows) > size
        rows = rows[:size]
        memories = [await open_memory(self._cipher, row) for row in rows]
        if memory_filter.metadata:
            memories = [m for m in memories if metadata_matches(m.metadata, memory_filter.metadata)]
        token = ""
        if has_more and rows:
            token = self._pages.encode(namespace, fingerprint, PageCursor(rows[-1].created_at, rows[-1].id))
        return Page(memories, token)

    async def _get_stored(self, namespace: Namespace, memory_id: str, deadline: Deadline) -> StoredMemory:
        rows = await deadline.run(self._store.fetch_memories(namespace, [memory_id]), "the record store")
        if not rows:
            raise NotFound("no such memory")
        return rows[0]

    @staticmethod
    def _check_ids(user_id: str, memory_id: str) -> None:
        v = Violations()
        check_user_id(v, user_id)
        check_memory_id(v, memory_id)
        v.raise_if_any()
