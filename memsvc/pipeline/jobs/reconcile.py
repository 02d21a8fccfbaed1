"""The reconciler: brings the vector index back in line with the record store (the truth).

Rows whose vector is missing (index down, crash between steps) are re-embedded and upserted,
and so is every row once the embedding version changes (another runtime or model); vectors of
deleted rows and namespaces are removed; conversation turns whose extracted memories and
summary a crash left unwritten get them. Every step is idempotent, so two replicas running it
at once only repeat work.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass

from memsvc.domain.models import Namespace, StoredMemory
from memsvc.embeddings.base import Embedder
from memsvc.memories.codec import MemoryCodec
from memsvc.memories.indexer import Indexer
from memsvc.pipeline.jobs.periodic import PeriodicTask
from memsvc.pipeline.write.conversation import ConversationPath
from memsvc.stores.records.base import RecordStore
from memsvc.stores.vectors.base import VectorIndex

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReconcileResult:
    indexed: int
    vectors_deleted: int
    namespaces_dropped: int
    turns_extracted: int = 0
    marked_for_reembedding: int = 0


class Reconciler:
    def __init__(
        self,
        store: RecordStore,
        index: VectorIndex,
        embedder: Embedder,
        codec: MemoryCodec,
        indexer: Indexer,
        min_age_s: float,
        conversations: ConversationPath | None = None,
        batch: int = 256,
    ) -> None:
        self._conversations = conversations
        self._store = store
        self._index = index
        self._embedder = embedder
        self._codec = codec
        self._indexer = indexer
        self._min_age_s = min_age_s
        self._batch = batch
        self._version_adopted = False  # checked once per process: versions change only at start
        # The first pass runs at start-up: rows left unindexed by a crash are restored at once.
        self._periodic = PeriodicTask("reconciliation", self._tick, run_first=True)

    async def run_once(self, min_age_s: float | None = None) -> ReconcileResult:
        age = self._min_age_s if min_age_s is None else min_age_s
        marked = 0
        if not self._version_adopted:
            marked = await self._adopt_embedding_version()
            self._version_adopted = True
        indexed = await self._reindex(time.time() - age)
        deleted = await self._delete_vectors()
        dropped = await self._drop_namespaces()
        extracted = await self._finish_extractions(time.time() - age)
        return ReconcileResult(indexed, deleted, dropped, extracted, marked)

    async def _adopt_embedding_version(self) -> int:
        """Memories embedded by another version get this version's vectors (the re-index below).

        Their old vectors sit in the other version's collections, which this server never reads,
        and which would keep a forgotten user's vectors; they are dropped first, so a crash in
        between leaves rows still marked with the old version, and the next start does both again.
        """
        version = self._index.embedding_version
        others = await self._store.other_embedding_versions(version)
        if not others:
            return 0
        dropped = [name for other in others for name in await self._index.drop_version(other)]
        marked = await self._store.reembed_as(version)
        log.warning(
            "%d memories were embedded as %s; re-embedding them as %s (until then recall finds them by "
            "their words only); dropped the old vectors (%s)",
            marked,
            " and ".join(others),
            version,
            ", ".join(dropped) or "none found",
        )
        return marked

    async def _finish_extractions(self, older_than: float) -> int:
        if self._conversations is None:
            return 0
        total = 0
        while not self._periodic.stopping:
            rows = await self._store.pending_extractions(self._batch, older_than)
            if not rows:
                break
            total += await self._conversations.finish_pending(rows)
            if len(rows) < self._batch:
                break
        return total

    async def _reindex(self, older_than: float) -> int:
        total = 0
        while True:
            rows = await self._store.pending_index(self._batch, older_than)
            if not rows:
                return total
            if total == 0:
                # While the index is down, fail before re-embedding the backlog on every pass.
                await self._index.ping()
            by_namespace: dict[Namespace, list[StoredMemory]] = defaultdict(list)
            for row in rows:
                by_namespace[row.namespace].append(row)
            for namespace, group in by_namespace.items():
                memories = await self._codec.open_all(group)
                vectors = await self._embedder.embed([m.embedding_text for m in memories])
                # Raises while an index is down: the pass stops and the next one retries.
                await self._indexer.index(namespace, list(zip(group, vectors, strict=True)), memories)
                total += len(group)
            if len(rows) < self._batch or self._periodic.stopping:
                return total  # the rest waits for the next pass (or the next start)

    async def _delete_vectors(self) -> int:
        tombstones = await self._store.pending_vector_deletes(self._batch)
        by_digest: dict[str, list[str]] = defaultdict(list)
        for t in tombstones:
            by_digest[t.namespace_digest].append(t.memory_id)
        for digest, ids in by_digest.items():
            await self._index.delete_by_digest(digest, ids)
            await self._store.clear_vector_tombstones(ids)
        return len(tombstones)

    async def _drop_namespaces(self) -> int:
        tombstones = await self._store.pending_namespace_drops(self._batch)
        for t in tombstones:
            await self._index.drop_namespace(t.namespace)
            await self._store.clear_namespace_tombstone(t.namespace)
        return len(tombstones)

    async def _tick(self) -> None:
        result = await self.run_once()
        if result.indexed or result.vectors_deleted or result.namespaces_dropped or result.marked_for_reembedding:
            log.info("reconciled: %s", result)

    def start(self, interval_s: float) -> None:
        self._periodic.start(interval_s)

    async def stop(self) -> None:
        await self._periodic.stop()
