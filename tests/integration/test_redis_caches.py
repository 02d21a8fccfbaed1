"""The shared Redis caches against the real Redis: two replicas, one generation per namespace."""

from __future__ import annotations

import json
import logging
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import numpy as np
import pytest
import redis

from memsvc.domain.models import Namespace, ScoreBreakdown
from memsvc.pipeline.query.embed import EmbedStage
from memsvc.stores.caches.base import CachedHit, CachedResult
from memsvc.stores.caches.redis import (
    RedisEmbeddingCache,
    RedisGuard,
    RedisResultCache,
    connect_redis,
)
from tests.backends import REDIS_URL, redis_prefix
from tests.conftest import LoopThread

pytestmark = pytest.mark.integration
T = TypeVar("T")

ALICE = Namespace("acme", "default", "development", "alice")
BOB = Namespace("acme", "default", "development", "bob")
RESULT = CachedResult(
    hits=(
        CachedHit("m1", 0.9, ScoreBreakdown(semantic=0.8, recency=1.0, dense_rank=1, relevance=0.7), ("q",)),
        CachedHit("m2", 0.4, ScoreBreakdown(semantic=0.3)),
    ),
    explanation="m1 leads on semantic similarity",
    candidates_recalled=7,
    dropped_by_importance=2,
)
DEAD_REDIS = "redis://127.0.0.1:1/0"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Replicas:
    """Cache objects as two replicas would hold them: separate clients, one Redis, one prefix."""

    def __init__(self, loop_thread: LoopThread, prefix: str) -> None:
        self.loop = loop_thread
        self.prefix = prefix
        self.clock = Clock()
        self.guards: list[RedisGuard] = []
        self.raw = redis.Redis.from_url(REDIS_URL)

    def guard(self, url: str = REDIS_URL) -> RedisGuard:
        guard = RedisGuard(connect_redis(url, 0.5), backoff_s=5.0, clock=self.clock)
        self.guards.append(guard)
        return guard

    def results(self, guard: RedisGuard | None = None, ttl_s: float = 300.0) -> RedisResultCache:
        return RedisResultCache(guard or self.guard(), self.prefix, ttl_s)

    def embeddings(self, guard: RedisGuard | None = None, ttl_s: float = 60.0) -> RedisEmbeddingCache:
        return RedisEmbeddingCache(guard or self.guard(), self.prefix, ttl_s)

    def __call__(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run(coro, timeout_s=30)

    def close(self) -> None:
        for guard in self.guards:
            self(guard.close())
        self.raw.close()


@pytest.fixture
def replicas(loop_thread: LoopThread) -> Iterator[Replicas]:
    with redis_prefix() as prefix:
        r = Replicas(loop_thread, prefix)
        yield r
        r.close()


class _Embedder:
    version = "minilm@test"


def test_embeddings_are_float32_bytes_keyed_as_the_embed_stage_keys_them(replicas: Replicas) -> None:
    a, b = replicas.embeddings(ttl_s=60), replicas.embeddings()
    key = EmbedStage(_Embedder(), a).cache_key("how do I like to fly?")  # type: ignore[arg-type]
    vector = np.linspace(-1, 1, 384, dtype=np.float32)
    assert replicas(a.get(key)) is None
    replicas(a.put(key, vector))
    got = replicas(b.get(key))
    assert got is not None and got.dtype == np.float32
    np.testing.assert_array_equal(got, vector)
    raw = replicas.raw.get(f"{replicas.prefix}:{key}")
    assert raw == vector.astype("<f4").tobytes()
    assert key.startswith("emb:minilm@test:")
    assert 0 < replicas.raw.pttl(f"{replicas.prefix}:{key}") <= 60_000


def test_results_are_shared_and_hold_ids_and_scores_only(replicas: Replicas) -> None:
    a, b = replicas.results(ttl_s=300), replicas.results()
    cached, slot = replicas(a.lookup(ALICE, "req-key"))
    assert cached is None and slot
    replicas(a.store(slot, RESULT))
    cached, _ = replicas(b.lookup(ALICE, "req-key"))
    assert cached == RESULT
    assert replicas(b.lookup(BOB, "req-key"))[0] is None
    assert replicas(b.lookup(ALICE, "other-key"))[0] is None
    stored = json.loads(replicas.raw.get(slot) or b"")
    assert set(stored) == {"hits", "explanation", "recalled", "dropped"}
    assert all(set(h) == {"id", "score", "breakdown", "queries"} for h in stored["hits"])
    assert 0 < replicas.raw.pttl(slot) <= 300_000


def test_a_write_on_one_replica_invalidates_the_other(replicas: Replicas) -> None:
    a, b = replicas.results(), replicas.results()
    _, slot = replicas(b.lookup(ALICE, "k"))
    replicas(b.store(slot, RESULT))
    _, bob_slot = replicas(b.lookup(BOB, "k"))
    replicas(b.store(bob_slot, RESULT))
    assert replicas(b.lookup(ALICE, "k"))[0] == RESULT
    replicas(a.invalidate(ALICE))
    cached, new_slot = replicas(b.lookup(ALICE, "k"))
    assert cached is None and new_slot != slot
    assert replicas(b.lookup(BOB, "k"))[0] == RESULT  # other users keep their results
    replicas(a.invalidate_many([ALICE, BOB]))
    assert replicas(b.lookup(BOB, "k"))[0] is None


def test_a_result_computed_across_a_write_is_never_served(replicas: Replicas) -> None:
    a, b = replicas.results(), replicas.results()
    _, slot = replicas(b.lookup(ALICE, "k"))  # B starts a query ...
    replicas(a.invalidate(ALICE))  # ... A writes meanwhile ...
    replicas(b.store(slot, RESULT))  # ... B stores what it computed before the write.
    assert replicas(b.lookup(ALICE, "k"))[0] is None
    assert replicas(a.lookup(ALICE, "k"))[0] is None


def test_redis_down_degrades_to_misses_quickly(replicas: Replicas, caplog: pytest.LogCaptureFixture) -> None:
    guard = replicas.guard(DEAD_REDIS)
    results, embeddings = replicas.results(guard), replicas.embeddings(guard)
    with caplog.at_level(logging.WARNING, logger="memsvc.stores.caches.redis"):
        assert replicas(embeddings.get("emb:v:x")) is None
        replicas(embeddings.put("emb:v:x", np.zeros(4, dtype=np.float32)))
        assert replicas(results.lookup(ALICE, "k")) == (None, "")
        replicas(results.store("", RESULT))
        replicas(results.invalidate(ALICE))
    warnings = [r for r in caplog.records if "redis unavailable" in r.getMessage()]
    assert len(warnings) == 1  # one warning per outage, not one per call
    assert not guard.available  # backing off: later calls skip Redis instead of waiting


def test_invalidations_lost_in_an_outage_are_sent_when_redis_returns(replicas: Replicas) -> None:
    healthy = replicas.guard()
    reader = replicas.results(healthy)
    _, slot = replicas(reader.lookup(ALICE, "k"))
    replicas(reader.store(slot, RESULT))
    # The writer's Redis connection is down while it writes.
    writer_guard = replicas.guard(DEAD_REDIS)
    writer = replicas.results(writer_guard)
    replicas(writer.invalidate(ALICE))
    assert replicas(writer.lookup(ALICE, "k")) == (None, "")  # never serves nor stores meanwhile
    # Redis is reachable again and the back-off has passed: the writer sends the invalidation
    # before anything else, so no replica serves the result computed before the write.
    replicas(writer_guard.close())
    writer_guard.client = connect_redis(REDIS_URL, 0.5)
    replicas.clock.now += 10
    cached, _ = replicas(writer.lookup(BOB, "k"))
    assert cached is None
    assert replicas(reader.lookup(ALICE, "k"))[0] is None
