"""In-memory stand-ins for unit tests of pure logic: a record store, a vector index, an embedder.

They keep the contracts the write path and the strategies rely on (idempotency keys, revisions
and `indexed`, per-namespace isolation, exact cosine search) and nothing of a real backend's
durability or concurrency: those are the integration and e2e suites' job, on the real stores.
A method a fake does not have raises AttributeError, so a test never passes on a silent gap.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from memsvc.crypto.envelope import EnvelopeCipher
from memsvc.crypto.keyring import MasterKeyRing, new_key_b64
from memsvc.domain.models import MemoryFilter, Namespace, RetentionStatus, StoredMemory, StoredVersion, WrappedDataKey
from memsvc.embeddings.base import Vector
from memsvc.memories.codec import MemoryCodec
from memsvc.stores.records.base import IndexTicket
from memsvc.stores.vectors.base import VectorHit, VectorItem

_WORD = re.compile(r"[a-z0-9]+")


class HashEmbedder:
    """Bag-of-words vectors from word hashes: equal texts are identical, shared words are close."""

    version = "hash-words@1"
    dimension = 64

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        out = []
        for text in texts:
            vector = np.zeros(self.dimension, dtype=np.float32)
            for word in _WORD.findall(text.lower()):
                vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % self.dimension] += 1.0
            norm = float(np.linalg.norm(vector)) or 1.0
            out.append(vector / norm)
        return out

    async def close(self) -> None:
        return None


class FakeRecordStore:
    """Rows, versions and data keys in dictionaries."""

    def __init__(self) -> None:
        self.rows: dict[str, StoredMemory] = {}
        self.versions: list[StoredVersion] = []
        self.data_keys: dict[str, WrappedDataKey] = {}
        self.vector_tombstones: set[str] = set()

    def _of(self, namespace: Namespace) -> list[StoredMemory]:
        return [r for r in self.rows.values() if r.namespace == namespace]

    async def fetch_by_idempotency_keys(self, namespace: Namespace, keys: Sequence[str]) -> list[StoredMemory]:
        return [r for r in self._of(namespace) if r.idempotency_key and r.idempotency_key in keys]

    async def fetch_memories(self, namespace: Namespace, ids: Sequence[str]) -> list[StoredMemory]:
        return [r for r in self._of(namespace) if r.id in ids]

    async def insert_memories(
        self, rows: Sequence[StoredMemory], versions: Sequence[StoredVersion] = ()
    ) -> list[tuple[StoredMemory, bool]]:
        out: list[tuple[StoredMemory, bool]] = []
        for row in rows:
            same_key = [
                r for r in self._of(row.namespace) if row.idempotency_key and r.idempotency_key == row.idempotency_key
            ]
            if same_key:
                out.append((same_key[0], False))
                continue
            self.rows[row.id] = row
            out.append((row, True))
        stored = {row.id for row, created in out if created}
        for version in versions:
            if version.memory_id in stored:
                self._add_version(version)
        return out

    def _add_version(self, version: StoredVersion) -> None:
        number = 1 + max((v.version for v in self.versions if v.memory_id == version.memory_id), default=0)
        self.versions.append(replace(version, version=number))

    async def confirm_memory(
        self, namespace: Namespace, memory_id: str, now: float, version: StoredVersion
    ) -> StoredMemory | None:
        row = self.rows.get(memory_id)
        if row is None or row.namespace != namespace:
            return None
        self.rows[memory_id] = row._replace(confirmation_count=row.confirmation_count + 1, updated_at=now)
        self._add_version(version)
        return self.rows[memory_id]

    async def update_memory(
        self,
        namespace: Namespace,
        memory_id: str,
        changes: Mapping[str, Any],
        now: float,
        version: StoredVersion | None = None,
    ) -> StoredMemory | None:
        row = self.rows.get(memory_id)
        if row is None or row.namespace != namespace:
            return None
        self.rows[memory_id] = row._replace(**changes, updated_at=now, revision=row.revision + 1, indexed=False)
        if version is not None:
            self._add_version(version)
        return self.rows[memory_id]

    async def mark_indexed(self, tickets: Sequence[IndexTicket]) -> None:
        for ticket in tickets:
            row = self.rows.get(ticket.memory_id)
            if row is not None and row.revision == ticket.revision:
                self.rows[ticket.memory_id] = row._replace(indexed=True)

    async def get_data_key(self, namespace: Namespace) -> WrappedDataKey | None:
        return self.data_keys.get(namespace.digest)

    async def put_data_key_if_absent(self, namespace: Namespace, key: WrappedDataKey) -> WrappedDataKey:
        return self.data_keys.setdefault(namespace.digest, key)


class FakeVectorIndex:
    """Exact cosine search over the vectors of each namespace."""

    embedding_version = HashEmbedder.version

    def __init__(self) -> None:
        self.items: dict[Namespace, dict[str, VectorItem]] = {}

    async def upsert(self, namespace: Namespace, items: Sequence[VectorItem]) -> None:
        self.items.setdefault(namespace, {}).update({item.memory_id: item for item in items})

    async def search_many(
        self, namespace: Namespace, vectors: Sequence[Vector], limit: int, memory_filter: MemoryFilter
    ) -> list[list[VectorHit]]:
        candidates = [
            item
            for item in self.items.get(namespace, {}).values()
            if memory_filter.include_inactive or item.retention_status is RetentionStatus.ACTIVE
        ]
        out = []
        for vector in vectors:
            hits = [VectorHit(item.memory_id, float(np.dot(item.vector, vector))) for item in candidates]
            out.append(sorted(hits, key=lambda h: -h.similarity)[:limit])
        return out

    async def search(
        self, namespace: Namespace, vector: Vector, limit: int, memory_filter: MemoryFilter
    ) -> list[VectorHit]:
        return (await self.search_many(namespace, [vector], limit, memory_filter))[0]

    async def vectors(self, namespace: Namespace, memory_ids: Sequence[str]) -> dict[str, Vector]:
        held = self.items.get(namespace, {})
        return {i: held[i].vector for i in memory_ids if i in held}


def codec_over(store: FakeRecordStore) -> MemoryCodec:
    """The real envelope encryption (AES-GCM, a fresh master key) over the fake store's data keys."""
    return MemoryCodec(EnvelopeCipher(MasterKeyRing.parse(f"1:{new_key_b64()}"), store))
