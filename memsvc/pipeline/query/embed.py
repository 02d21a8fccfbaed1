"""Stage 2, embed: the query vector from the cache, or from the embedder on a miss."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from memsvc.deadline import Deadline
from memsvc.embeddings.base import Embedder, Vector
from memsvc.stores.caches.base import EmbeddingCache


@dataclass(frozen=True)
class QueryVector:
    vector: Vector
    cache_hit: bool


class EmbedStage:
    def __init__(self, embedder: Embedder, cache: EmbeddingCache) -> None:
        self._embedder = embedder
        self._cache = cache

    def cache_key(self, text: str) -> str:
        digest = hashlib.sha256(text.encode()).hexdigest()
        return f"emb:{self._embedder.version}:{digest}"

    async def run(self, text: str, deadline: Deadline) -> QueryVector:
        key = self.cache_key(text)
        cached = await self._cache.get(key)
        if cached is not None:
            return QueryVector(cached, True)
        vectors = await deadline.run(self._embedder.embed([text]), "the embedder")
        await self._cache.put(key, vectors[0])
        return QueryVector(vectors[0], False)
