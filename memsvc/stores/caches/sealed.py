"""A result cache that seals the texts a cached result carries (matched queries, explanation).

Cached results are ids and scores, but each hit also names the queries that found it, which are
the caller's words, and an explanation may quote them. Those are sealed with AES-256-GCM under a
key derived from the master key ring (the same on every replica), bound to the hit's memory id,
so neither process memory nor a shared Redis holds them readable. An entry that no longer opens
(for example after a master-key change) is a miss.
"""

from __future__ import annotations

import base64
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import replace

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from memsvc.domain.models import Namespace
from memsvc.stores.caches.base import CachedResult, ResultCache

log = logging.getLogger(__name__)
_AAD = b"memsvc/v1/result-cache|"


class SealedResultCache:
    """Wraps a ResultCache; only sealed texts reach the wrapped cache."""

    def __init__(self, inner: ResultCache, key: bytes) -> None:
        self._inner = inner
        self._aead = AESGCM(key)

    def _seal(self, texts: Sequence[str], binding: str) -> str:
        nonce = os.urandom(12)
        body = self._aead.encrypt(nonce, json.dumps(list(texts)).encode(), _AAD + binding.encode())
        return base64.b64encode(nonce + body).decode()

    def _open(self, sealed: str, binding: str) -> list[str]:
        raw = base64.b64decode(sealed)
        texts = json.loads(self._aead.decrypt(raw[:12], raw[12:], _AAD + binding.encode()))
        return [str(t) for t in texts]

    async def lookup(self, namespace: Namespace, request_key: str) -> tuple[CachedResult | None, str]:
        result, slot = await self._inner.lookup(namespace, request_key)
        if result is None:
            return None, slot
        try:
            hits = tuple(
                replace(h, matched_queries=tuple(self._open(h.matched_queries[0], h.memory_id)))
                if h.matched_queries
                else h
                for h in result.hits
            )
            explanation = self._open(result.explanation, slot)[0] if result.explanation else ""
        except (InvalidTag, ValueError, IndexError, TypeError):
            log.warning("a cached result did not open; treating it as a miss")
            return None, slot
        return replace(result, hits=hits, explanation=explanation), slot

    async def store(self, slot: str, result: CachedResult) -> None:
        hits = tuple(
            replace(h, matched_queries=(self._seal(h.matched_queries, h.memory_id),)) if h.matched_queries else h
            for h in result.hits
        )
        explanation = self._seal([result.explanation], slot) if result.explanation else ""
        await self._inner.store(slot, replace(result, hits=hits, explanation=explanation))

    async def invalidate(self, namespace: Namespace) -> None:
        await self._inner.invalidate(namespace)

    async def invalidate_many(self, namespaces: Sequence[Namespace]) -> None:
        await self._inner.invalidate_many(namespaces)
