"""Redis caches shared by every replica: query embeddings and per-namespace ranked results.

Keys (all under one configurable prefix):
- `{prefix}:{emb key}`: a query vector as little-endian float32 bytes, with a TTL.
- `{prefix}:gen:{namespace digest}`: the namespace's generation, INCR'd by every write on any
  replica. It has no TTL (one small key per namespace written), so with a `volatile-*`
  eviction policy Redis never evicts it and a generation is never reused.
- `{prefix}:res:{digest}:{generation}:{request key}`: one ranked result (ids and scores, no
  memory content), with the result TTL. A lookup reads the generation first, so after a write
  every replica looks under the new generation and the old results are never served.

Redis is an optimisation: when it cannot answer, lookups are misses, nothing fails, a warning
is logged, and Redis is left alone for a short back-off instead of costing every query a timeout.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from memsvc.domain.models import Namespace, ScoreBreakdown
from memsvc.errors import FailedPrecondition
from memsvc.stores.caches.base import CachedHit, CachedResult
from memsvc.tls import read_key_pair, read_trusted_cas

T = TypeVar("T")
log = logging.getLogger(__name__)

_BREAKDOWN_FIELDS = frozenset(ScoreBreakdown._fields)
_NO_SLOT = ""  # a lookup that could not read the generation must not store a result


def connect_redis(
    url: str,
    timeout_s: float,
    *,
    ca_file: Path | None = None,
    cert_file: Path | None = None,
    key_file: Path | None = None,
) -> Redis:
    """One client (and connection pool) per process; no retries: a miss is cheaper than a wait.

    A `rediss://` URL speaks TLS: the server's certificate is verified (against `ca_file`, else the
    system's trust store) and so is its host name; `cert_file` and `key_file` answer a server that
    requires client certificates. TLS files with a plaintext URL are refused rather than ignored.
    """
    tls: dict[str, Any] = {}
    if url.startswith("rediss://"):
        tls = {"ssl_cert_reqs": "required", "ssl_check_hostname": True}
        # Checked here, so a wrong file stops the start instead of leaving the caches off.
        if ca_file is not None:
            read_trusted_cas(ca_file, "MEMSVC_REDIS_CA_FILE")
            tls["ssl_ca_certs"] = str(ca_file)
        if (cert_file is None) != (key_file is None):
            raise FailedPrecondition("MEMSVC_REDIS_CERT_FILE, MEMSVC_REDIS_KEY_FILE: a client certificate needs both")
        if cert_file is not None and key_file is not None:
            read_key_pair(cert_file, "MEMSVC_REDIS_CERT_FILE", key_file, "MEMSVC_REDIS_KEY_FILE")
            tls.update(ssl_certfile=str(cert_file), ssl_keyfile=str(key_file))
    elif any(f is not None for f in (ca_file, cert_file, key_file)):
        raise FailedPrecondition(
            "MEMSVC_REDIS_CA_FILE, MEMSVC_REDIS_CERT_FILE, MEMSVC_REDIS_KEY_FILE: set for a plaintext "
            "MEMSVC_REDIS_URL; use rediss:// for TLS"
        )
    return Redis.from_url(
        url,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=Retry(NoBackoff(), 0),
        health_check_interval=30,
        **tls,
    )


class RedisGuard:
    """Runs Redis calls; on failure logs once, then skips Redis for `backoff_s`."""

    def __init__(self, client: Redis, backoff_s: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self._backoff_s = backoff_s
        self._clock = clock
        self._down_until = 0.0
        self._failing = False

    @property
    def available(self) -> bool:
        return self._clock() >= self._down_until

    async def call(self, make: Callable[[], Awaitable[T]], what: str) -> T | None:
        """The call's result, or None when Redis is down (or was, moments ago)."""
        if not self.available:
            return None
        try:
            result = await make()
        except (RedisError, OSError) as exc:  # OSError covers timeouts and refused connections
            self._down_until = self._clock() + self._backoff_s
            if not self._failing:
                log.warning("redis unavailable (%s): caches degrade to misses: %s", what, exc)
            self._failing = True
            return None
        if self._failing:
            log.warning("redis is back: shared caches resume")
            self._failing = False
        return result

    async def close(self) -> None:
        await self.client.aclose()


class RedisEmbeddingCache:
    """Query vectors keyed as EmbedStage keys them, stored as float32 bytes with a TTL."""

    def __init__(self, guard: RedisGuard, prefix: str, ttl_s: float) -> None:
        self._guard = guard
        self._prefix = prefix
        self._ttl_ms = max(1, int(ttl_s * 1000))

    async def get(self, key: str) -> npt.NDArray[np.float32] | None:
        raw = await self._guard.call(lambda: self._guard.client.get(f"{self._prefix}:{key}"), "embedding get")
        if not isinstance(raw, bytes) or len(raw) % 4:
            return None
        return np.frombuffer(raw, dtype="<f4").astype(np.float32)

    async def put(self, key: str, vector: npt.NDArray[np.float32]) -> None:
        data = np.asarray(vector, dtype="<f4").tobytes()
        await self._guard.call(
            lambda: self._guard.client.set(f"{self._prefix}:{key}", data, px=self._ttl_ms), "embedding put"
        )


def encode_result(result: CachedResult) -> bytes:
    return json.dumps(
        {
            "hits": [
                {
                    "id": h.memory_id,
                    "score": h.score,
                    "breakdown": h.breakdown._asdict(),
                    "queries": list(h.matched_queries),
                }
                for h in result.hits
            ],
            "explanation": result.explanation,
            "recalled": result.candidates_recalled,
            "dropped": result.dropped_by_importance,
        },
        separators=(",", ":"),
    ).encode()


def breakdown_of(fields: dict[str, Any]) -> ScoreBreakdown:
    """A cached breakdown; fields another version of memsvc wrote but this one lacks are ignored."""
    if "fused" not in fields:  # written before the relative score was named `fused`
        fields = {**fields, "fused": fields.pop("relevance", None)}
    return ScoreBreakdown(**{k: v for k, v in fields.items() if k in _BREAKDOWN_FIELDS})


def decode_result(raw: bytes) -> CachedResult:
    data: dict[str, Any] = json.loads(raw)
    return CachedResult(
        hits=tuple(
            CachedHit(
                memory_id=h["id"],
                score=float(h["score"]),
                breakdown=breakdown_of(h["breakdown"]),
                matched_queries=tuple(h["queries"]),
            )
            for h in data["hits"]
        ),
        explanation=data["explanation"],
        candidates_recalled=int(data["recalled"]),
        dropped_by_importance=int(data["dropped"]),
    )


class RedisResultCache:
    """ResultCache on Redis with per-namespace generations shared by every replica."""

    def __init__(self, guard: RedisGuard, prefix: str, ttl_s: float) -> None:
        self._guard = guard
        self._prefix = prefix
        self._ttl_ms = max(1, int(ttl_s * 1000))
        # Invalidations Redis did not take; retried before the next cache call of this replica.
        self._unsent: set[str] = set()

    def _generation_key(self, digest: str) -> str:
        return f"{self._prefix}:gen:{digest}"

    async def _flush_unsent(self) -> bool:
        """Send invalidations that failed earlier; False while they still cannot be sent."""
        if not self._unsent:
            return True
        pending = sorted(self._unsent)

        async def send() -> bool:
            async with self._guard.client.pipeline(transaction=False) as pipe:
                for digest in pending:
                    pipe.incr(self._generation_key(digest))
                await pipe.execute()
            return True

        if await self._guard.call(send, "invalidate (retry)"):
            self._unsent.difference_update(pending)
            return True
        return False

    async def lookup(self, namespace: Namespace, request_key: str) -> tuple[CachedResult | None, str]:
        if not await self._flush_unsent():
            return None, _NO_SLOT
        digest = namespace.digest
        generation = await self._guard.call(
            lambda: self._guard.client.get(self._generation_key(digest)), "result lookup"
        )
        if generation is None and not self._guard.available:
            return None, _NO_SLOT
        slot = f"{self._prefix}:res:{digest}:{int(generation or 0)}:{request_key}"
        raw = await self._guard.call(lambda: self._guard.client.get(slot), "result lookup")
        if not isinstance(raw, bytes):
            return None, slot
        try:
            return decode_result(raw), slot
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring an unreadable cached result")
            return None, slot

    async def store(self, slot: str, result: CachedResult) -> None:
        if slot == _NO_SLOT:
            return
        data = encode_result(result)
        await self._guard.call(lambda: self._guard.client.set(slot, data, px=self._ttl_ms), "result store")

    async def invalidate(self, namespace: Namespace) -> None:
        await self.invalidate_many([namespace])

    async def invalidate_many(self, namespaces: Sequence[Namespace]) -> None:
        self._unsent.update(n.digest for n in namespaces)
        if not await self._flush_unsent():
            log.warning("%d result-cache invalidations wait for redis", len(self._unsent))
