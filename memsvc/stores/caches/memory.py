"""In-process caches for the embedded default: LRU embeddings, TTL results with generations."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import numpy as np
import numpy.typing as npt

from memsvc.domain.models import Namespace
from memsvc.stores.caches.base import CachedResult

V = TypeVar("V")


class LruTtlMap(Generic[V]):
    """A bounded, thread-safe map whose entries expire after ttl_s (None: never)."""

    def __init__(self, max_entries: int, ttl_s: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        self._max_entries = max_entries
        self._ttl_s = ttl_s
        self._clock = clock
        self._data: OrderedDict[str, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> V | None:
        with self._lock:
            entry = self._data.get(key)
            if entry is None:
                return None
            expires, value = entry
            if self._ttl_s is not None and expires < self._clock():
                del self._data[key]
                return None
            self._data.move_to_end(key)
            return value

    def put(self, key: str, value: V) -> None:
        expires = self._clock() + (self._ttl_s or 0.0)
        with self._lock:
            self._data[key] = (expires, value)
            self._data.move_to_end(key)
            while len(self._data) > self._max_entries:
                self._data.popitem(last=False)


class InMemoryEmbeddingCache:
    def __init__(self, max_entries: int) -> None:
        self._map: LruTtlMap[npt.NDArray[np.float32]] = LruTtlMap(max_entries, None)

    async def get(self, key: str) -> npt.NDArray[np.float32] | None:
        return self._map.get(key)

    async def put(self, key: str, vector: npt.NDArray[np.float32]) -> None:
        self._map.put(key, vector)


class InMemoryResultCache:
    """Results keyed by namespace generation: bumping the generation invalidates them all."""

    def __init__(self, max_entries: int, ttl_s: float) -> None:
        self._map: LruTtlMap[CachedResult] = LruTtlMap(max_entries, ttl_s)
        self._generations: dict[str, int] = {}
        self._lock = threading.Lock()

    def _key(self, namespace: Namespace, request_key: str) -> str:
        with self._lock:
            generation = self._generations.get(namespace.digest, 0)
        return f"{namespace.digest}:{generation}:{request_key}"

    async def lookup(self, namespace: Namespace, request_key: str) -> tuple[CachedResult | None, str]:
        slot = self._key(namespace, request_key)
        return self._map.get(slot), slot

    async def store(self, slot: str, result: CachedResult) -> None:
        self._map.put(slot, result)

    async def invalidate(self, namespace: Namespace) -> None:
        with self._lock:
            self._generations[namespace.digest] = self._generations.get(namespace.digest, 0) + 1

    async def invalidate_many(self, namespaces: Sequence[Namespace]) -> None:
        for namespace in namespaces:
            await self.invalidate(namespace)


class NoResultCache:
    """No result caching: for worker processes without Redis, whose in-process caches would not
    see another worker's writes (an invalidation reaches only the cache of the writing process)."""

    async def lookup(self, namespace: Namespace, request_key: str) -> tuple[CachedResult | None, str]:
        return None, ""

    async def store(self, slot: str, result: CachedResult) -> None:
        return None

    async def invalidate(self, namespace: Namespace) -> None:
        return None

    async def invalidate_many(self, namespaces: Sequence[Namespace]) -> None:
        return None
