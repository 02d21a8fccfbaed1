"""Limits over gRPC: sizes and counts are INVALID_ARGUMENT naming the field; load is RESOURCE_EXHAUSTED."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest

from memsvc.v1 import query_service_pb2, write_service_pb2
from tests.backends import REDIS_URL, redis_prefix
from tests.conftest import RunningServer, ServerFactory
from tests.security.support import Failure, add, expect_failure, failure_of, query

pytestmark = pytest.mark.e2e

SMALL = {
    "max_message_bytes": 64 * 1024,
    "max_batch_items": 4,
    "max_content_chars": 1000,
    "max_query_chars": 200,
    "max_results": 20,
    "max_tags": 3,
    "max_page_size": 10,
}


def test_sizes_and_counts_name_the_field(server_factory: ServerFactory) -> None:
    s = server_factory(**SMALL)
    key = s.api_key
    w = write_service_pb2

    def add_call(**fields: Any) -> Failure:
        return expect_failure(lambda: s.writes.AddMemories(w.AddMemoriesRequest(**fields), metadata=s.md))

    cases: list[tuple[Failure, str]] = [
        (add_call(user_id="u", memories=[{"content": f"m{i}"} for i in range(5)]), "memories"),
        (add_call(user_id="u", memories=[{"content": "x" * 1001}]), "memories[0].content"),
        (add_call(user_id="u", memories=[{"content": "ok", "tags": ["a", "b", "c", "d"]}]), "memories[0].tags"),
        (add_call(user_id="u" * 129, memories=[{"content": "ok"}]), "user_id"),
        (expect_failure(lambda: query(s, key, "u", "q" * 201)), "query"),
        (expect_failure(lambda: query(s, key, "u", "hello", limit=21)), "limit"),
        (expect_failure(lambda: query(s, key, "u", "hello", limit=-1)), "limit"),
        (
            expect_failure(
                lambda: s.writes.ListMemories(w.ListMemoriesRequest(user_id="u", page_size=11), metadata=s.md)
            ),
            "page_size",
        ),
    ]
    for failure, field in cases:
        assert failure.code == grpc.StatusCode.INVALID_ARGUMENT, field
        assert field in failure.fields, (field, failure.fields)
    # At the limits themselves everything is accepted.
    add(s, key, "u", *[f"memory number {i}" for i in range(4)])
    add(s, key, "u", "y" * 1000, tags=["a", "b", "c"])
    query(s, key, "u", "q" * 200, limit=20)


def test_an_oversized_request_is_resource_exhausted(server_factory: ServerFactory) -> None:
    s = server_factory(**SMALL)
    request = write_service_pb2.AddMemoriesRequest(user_id="u", memories=[{"content": "z" * (80 * 1024)}])
    failure = expect_failure(lambda: s.writes.AddMemories(request, metadata=s.md))
    assert failure.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    add(s, s.api_key, "u", "a normal request still works")


def test_a_user_past_the_memory_limit_is_refused_whole_and_loses_nothing(server_factory: ServerFactory) -> None:
    s = server_factory(max_memories_per_user=4)
    w = write_service_pb2
    kept = add(s, s.api_key, "u", "I keep bees on the allotment", "My sister lives in Porto", "I teach piano")
    # Three new and one more would be five: the call is refused whole, naming the limit.
    failure = expect_failure(lambda: add(s, s.api_key, "u", "I swim on Tuesdays", "I am allergic to cats"))
    assert failure.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "MEMSVC_MAX_MEMORIES_PER_USER" in failure.message and failure.reason == "RESOURCE_EXHAUSTED"
    listed = s.writes.ListMemories(w.ListMemoriesRequest(user_id="u"), metadata=s.md).memories
    assert sorted(m.id for m in listed) == sorted(m.id for m in kept)
    # Nothing already stored was dropped from recall to make room.
    assert query(s, s.api_key, "u", "who looks after the bees?").memories[0].memory.id == kept[0].id
    # A conversation is refused before any of its turns is stored; other users are not limited.
    turns = [query_service_pb2.ConversationTurn(content=f"turn {i} about gardening") for i in range(2)]
    failure = expect_failure(
        lambda: s.writes.AddConversation(
            w.AddConversationRequest(user_id="u", session_id="s1", turns=turns), metadata=s.md
        )
    )
    assert failure.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert len(s.writes.ListMemories(w.ListMemoriesRequest(user_id="u"), metadata=s.md).memories) == 3
    add(s, s.api_key, "v", "I swim on Tuesdays", "I am allergic to cats")
    # Up to the limit is accepted, and deleting makes room again.
    add(s, s.api_key, "u", "I swim on Tuesdays")
    s.writes.DeleteMemory(w.DeleteMemoryRequest(user_id="u", id=kept[1].id), metadata=s.md)
    add(s, s.api_key, "u", "I am allergic to cats")
    # An import counts as much: u's four memories do not fit beside v's two, and do for a new user.
    exported = s.writes.ExportMemories(w.ExportMemoriesRequest(user_id="u"), metadata=s.md)
    records = [r for response in exported for r in response.records]
    assert len(records) == 4
    failure = expect_failure(
        lambda: s.writes.ImportMemories(w.ImportMemoriesRequest(user_id="v", records=records), metadata=s.md)
    )
    assert failure.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    imported = s.writes.ImportMemories(w.ImportMemoriesRequest(user_id="x", records=records), metadata=s.md)
    assert imported.imported_count == 4


def _burst(s: RunningServer, key: str, count: int) -> list[Failure | None]:
    outcomes: list[Failure | None] = []
    for _ in range(count):
        try:
            query(s, key, "u", "hello")
            outcomes.append(None)
        except grpc.RpcError as error:
            outcomes.append(failure_of(error))
    return outcomes


def test_requests_per_tenant_per_second(server_factory: ServerFactory) -> None:
    s = server_factory(rate_limit_per_tenant_rps=2.0, rate_limit_per_tenant_burst=3)
    outcomes = _burst(s, s.api_key, 6)
    allowed = [o for o in outcomes if o is None]
    refused = [o for o in outcomes if o is not None]
    assert 3 <= len(allowed) <= 4 and refused  # the burst, plus at most one token refilled meanwhile
    for failure in refused:
        assert failure.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert failure.retry_delay_s is not None and 0 < failure.retry_delay_s <= 0.5
    # Another key of the same tenant shares the bucket; another tenant has its own.
    assert _burst(s, s.create_key(), 1)[0] is not None
    assert _burst(s, s.create_key(tenant="globex"), 3) == [None, None, None]
    assert refused[-1].retry_delay_s is not None
    time.sleep(refused[-1].retry_delay_s + 0.05)
    assert _burst(s, s.api_key, 1) == [None]


def test_rate_limit_is_shared_by_replicas_through_redis(server_factory: ServerFactory) -> None:
    with redis_prefix() as prefix:
        settings = {
            "redis_url": REDIS_URL,
            "redis_key_prefix": prefix,
            "rate_limit_per_tenant_rps": 1.0,
            "rate_limit_per_tenant_burst": 4,
        }
        replicas = (server_factory(**settings), server_factory(**settings))  # each with a key of tenant acme
        results = [_burst(replicas[i % 2], replicas[i % 2].api_key, 1)[0] for i in range(8)]
        allowed = sum(1 for r in results if r is None)
        # Each replica alone would allow 4 of its 4 calls; shared, the two together allow about 4.
        assert allowed <= 5, results


def test_concurrency_limit_sheds_load_instead_of_queueing(
    server_factory: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = server_factory(max_concurrent_rpcs=2)
    memory_id = add(s, s.api_key, "u", "Ursula keeps a kayak at the lake")[0].id
    real_get = s.components.reads.get

    async def slow_get(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(1.5)
        return await real_get(*args, **kwargs)

    monkeypatch.setattr(s.components.reads, "get", slow_get)
    request = write_service_pb2.GetMemoryRequest(user_id="u", id=memory_id)

    def call() -> tuple[grpc.StatusCode, float]:
        started = time.perf_counter()
        try:
            s.writes.GetMemory(request, metadata=s.md, timeout=10)
            return grpc.StatusCode.OK, time.perf_counter() - started
        except grpc.RpcError as error:
            return error.code(), time.perf_counter() - started  # type: ignore[attr-defined]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: call(), range(8)))
    shed = [elapsed for code, elapsed in results if code == grpc.StatusCode.RESOURCE_EXHAUSTED]
    served = [elapsed for code, elapsed in results if code == grpc.StatusCode.OK]
    assert shed and served, results
    assert len(shed) + len(served) == len(results), results
    assert max(shed) < 1.0, "shed calls must fail fast, not wait for a slot"
