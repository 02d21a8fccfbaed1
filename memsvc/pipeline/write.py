"""The write path: validate -> embed (batched) -> encrypt -> record row -> vector upsert.

The record store is the source of truth. A row is committed before its vector is written;
if the vector write fails the row stays marked unindexed and the reconciler finishes the
job, so an acknowledged write is never lost.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memsvc.crypto.envelope import EnvelopeCipher
from memsvc.domain.models import (
    Memory,
    MemoryChanges,
    MemoryFilter,
    Namespace,
    NewMemory,
    Permission,
    Principal,
    RetentionStatus,
    SealedContent,
    StoredMemory,
    new_memory_id,
)
from memsvc.embeddings.base import Embedder
from memsvc.errors import MemsvcError, NotFound, PermissionDenied
from memsvc.pipeline.context import Deadline
from memsvc.pipeline.hydrate import metadata_matches, open_memory
from memsvc.pipeline.lexical import LexicalWriter
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

    # -- writes -------------------------------------------------------------------------------

    async def add(
        self, principal: Principal, user_id: str, items: list[NewMemory], deadline: Deadline
    ) -> list[tuple[Memory, bool]]:
        _require(principal, Permission.WRITE)
        now = time.time()
        validate_new_memories(user_id, items, self._limits, now)
        namespace = Namespace.of(principal, user_id)
        vectors = await deadline.run(self._embedder.embed([i.content for i in items]), "the embedder")
        rows: list[StoredMemory] = []
        for item in items:
            created_at = item.created_at if item.created_at is not None else now
            memory_id = new_memory_id(created_at)
            importance = (
                item.importance
                if item.importance is not None
                else estimate_importance(item.content, item.role, item.kind).value
            )
            sealed = SealedContent(item.content, dict(item.metadata)).to_bytes()
            rows.append(
                StoredMemory(
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
                    quality=estimate_quality(item.content).value,
                    consistency=1.0,
                    decay=1.0,
                    retention_status=RetentionStatus.ACTIVE,
                    embedding_version=self._index.embedding_version,
                    superseded_by="",
                    idempotency_key=item.idempotency_key,
                    indexed=False,
                )
            )
        stored = await deadline.run(self._store.insert_memories(rows), "the record store")
        fresh = [(row, vector) for (row, created), vector in zip(stored, vectors, strict=True) if created]
        texts = [item.content for (_, created), item in zip(stored, items, strict=True) if created]
        if fresh:
            await self._cache.invalidate(namespace)
            await self._index_rows(namespace, fresh, texts)
        return [(await open_memory(self._cipher, row), created) for row, created in stored]

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
        vectors = await deadline.run(self._embedder.embed([content]), "the embedder")
        updated = await deadline.run(
            self._store.update_memory(namespace, memory_id, columns, time.time()), "the record store"
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
        deleted = await deadline.run(self._store.delete_memory(namespace, memory_id), "the record store")
        if deleted is None:
            raise NotFound("no such memory")
        await self._cache.invalidate(namespace)
        try:
            await self._index.delete(namespace, [memory_id])
            await self._store.clear_vector_tombstones([memory_id])
        except MemsvcError as exc:
            log.warning("vector delete deferred to the reconciler: %s", exc.message)

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
