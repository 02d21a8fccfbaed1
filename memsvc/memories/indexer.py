"""Putting stored rows into the indexes: lexical postings, the vector, then the row marked indexed.

The record store is the truth and the indexes follow it: a row stays `indexed = 0` until both
are written, so whatever fails here is finished by the reconciler. Writes, import, maintenance
and the reconciler all index through this one object.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from memsvc.domain.models import Memory, Namespace, StoredMemory
from memsvc.embeddings.base import Embedder, Vector
from memsvc.errors import MemsvcError
from memsvc.stores.lexical.analysis import TermHasher
from memsvc.stores.lexical.base import LexicalDoc, LexicalIndex
from memsvc.stores.records.base import IndexTicket, RecordStore
from memsvc.stores.vectors.base import VectorIndex, VectorItem

log = logging.getLogger(__name__)


def vector_item(stored: StoredMemory, vector: Vector) -> VectorItem:
    """The vector index entry of a row: its vector and the attributes recall filters on."""
    return VectorItem(
        memory_id=stored.id,
        vector=np.asarray(vector, dtype=np.float32),
        tier=stored.tier,
        tags=stored.tags,
        session_id=stored.session_id,
        role=stored.role,
        kind=stored.kind,
        retention_status=stored.retention_status,
        created_at=stored.created_at,
    )


class LexicalWriter:
    """Writes the keyed term bags of memories' lexical texts; the indexer writes them."""

    def __init__(self, hasher: TermHasher, index: LexicalIndex) -> None:
        self._hasher = hasher
        self._index = index

    async def write(self, namespace: Namespace, entries: Sequence[tuple[str, Memory]]) -> None:
        """Replace the postings of each (memory id, opened memory): its lexical text's terms and,
        for a turn with a named speaker, the speaker's marker terms (`TermHasher.speaker_ids`), so
        that a query can tell the names of the namespace's speakers. Only term ids leave here."""
        docs = []
        for memory_id, memory in entries:
            bag = self._hasher.bag(namespace.tenant, memory.lexical_text)
            terms = bag.counts
            if memory.speaker_name:
                terms = {**terms, **dict.fromkeys(self._hasher.speaker_ids(namespace.tenant, memory.speaker_name), 1)}
            # The markers are not words of the text: its BM25 length stays the text's.
            docs.append(LexicalDoc(memory_id, terms, bag.length))
        await self._index.index(namespace, docs)


class Indexer:
    def __init__(
        self, store: RecordStore, index: VectorIndex, embedder: Embedder, lexical: LexicalWriter | None
    ) -> None:
        self._store = store
        self._index = index
        self._embedder = embedder
        self._lexical = lexical

    @property
    def embedding_version(self) -> str:
        return self._index.embedding_version

    async def vectors(self, namespace: Namespace, memory_ids: Sequence[str]) -> dict[str, Vector]:
        """The stored vectors of these memories that the index holds (none while it is down)."""
        try:
            return await self._index.vectors(namespace, memory_ids)
        except MemsvcError as exc:
            log.debug("stored vectors unavailable: %s", exc.message)
            return {}

    async def index(
        self, namespace: Namespace, rows: Sequence[tuple[StoredMemory, Vector]], opened: Sequence[Memory] = ()
    ) -> None:
        """Write postings (from the rows' `opened` plaintext, one per row, when given) and vectors,
        then mark the rows indexed. Raises the index's error: the caller decides whether to defer."""
        if not rows:
            return
        if self._lexical is not None and opened:
            await self._lexical.write(namespace, [(row.id, m) for (row, _), m in zip(rows, opened, strict=True)])
        await self._index.upsert(namespace, [vector_item(row, vector) for row, vector in rows])
        await self._store.mark_indexed([IndexTicket(row.id, row.revision) for row, _ in rows])

    async def index_or_defer(
        self, namespace: Namespace, rows: Sequence[tuple[StoredMemory, Vector]], opened: Sequence[Memory] = ()
    ) -> None:
        """`index`, leaving the rows to the reconciler if an index is down (the write stands)."""
        try:
            await self.index(namespace, rows, opened)
        except MemsvcError as exc:
            log.warning("vector write deferred to the reconciler for %d rows: %s", len(rows), exc.message)

    async def reindex(self, namespace: Namespace, rows: Sequence[tuple[StoredMemory, str]]) -> None:
        """Rewrite the index entries of rows whose indexed attributes changed (status, tier).

        The content did not change, so the stored vector is reused; only a row the index has no
        vector for (never indexed, or the index unreachable) is embedded again from the text
        given with it (the memory's `embedding_text`).
        """
        if not rows:
            return
        stored = await self.vectors(namespace, [row.id for row, _ in rows])
        missing = [(row, content) for row, content in rows if row.id not in stored]
        if missing:
            fresh = await self._embedder.embed([content for _, content in missing])
            stored.update({row.id: v for (row, _), v in zip(missing, fresh, strict=True)})
        await self.index_or_defer(namespace, [(row, stored[row.id]) for row, _ in rows])

    async def remove(self, namespace: Namespace, memory_ids: Sequence[str]) -> None:
        """Delete the vectors of deleted rows (their tombstones let the reconciler finish)."""
        try:
            await self._index.delete(namespace, list(memory_ids))
            await self._store.clear_vector_tombstones(list(memory_ids))
        except MemsvcError as exc:
            log.warning("vector delete deferred to the reconciler: %s", exc.message)

    async def drop(self, namespace: Namespace) -> None:
        """Erase a forgotten namespace's vectors (its tombstone lets the reconciler finish)."""
        try:
            await self._index.drop_namespace(namespace)
            await self._store.clear_namespace_tombstone(namespace)
        except MemsvcError as exc:
            log.warning("vector erasure deferred to the reconciler: %s", exc.message)
