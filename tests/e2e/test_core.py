"""The core promises of memsvc, driven over gRPC against a real server, Milvus Lite and SQLite."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import field_mask_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from memsvc.domain.models import Namespace, Permission
from memsvc.errors import Unavailable
from memsvc.v1 import memory_pb2, query_service_pb2, write_service_pb2
from tests.conftest import RunningServer, ServerFactory

pytestmark = pytest.mark.e2e


def add(s: RunningServer, user: str, *contents: str, key: str | None = None, **fields: Any) -> list[Any]:
    request = write_service_pb2.AddMemoriesRequest(
        user_id=user, memories=[write_service_pb2.NewMemory(content=c, **fields) for c in contents]
    )
    return list(s.writes.AddMemories(request, metadata=s.auth(key or s.api_key)).memories)


def query(s: RunningServer, user: str, text: str, key: str | None = None, **fields: Any) -> Any:
    request = query_service_pb2.QueryRequest(user_id=user, query=text, **fields)
    return s.queries.Query(request, metadata=s.auth(key or s.api_key))


def all_filter() -> memory_pb2.MemoryFilter:
    return memory_pb2.MemoryFilter(min_importance=0.0)


def error_of(call: Any) -> tuple[grpc.StatusCode, list[str], str]:
    """Call, expect failure; return the code, the field violations and the ErrorInfo reason."""
    with pytest.raises(grpc.RpcError) as info:
        call()
    error = info.value
    status = rpc_status.from_call(error)
    fields: list[str] = []
    reason = ""
    if status is not None:
        for detail in status.details:
            if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                bad = error_details_pb2.BadRequest()
                detail.Unpack(bad)
                fields += [v.field for v in bad.field_violations]
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                ei = error_details_pb2.ErrorInfo()
                detail.Unpack(ei)
                reason = ei.reason
    return error.code(), fields, reason


@pytest.fixture
def engine_server(engine_server_factory: ServerFactory) -> RunningServer:
    return engine_server_factory()


def test_add_then_query_returns_it(engine_server: RunningServer) -> None:
    server = engine_server
    stored = add(server, "alice", "I prefer window seats on long flights", kind=memory_pb2.MEMORY_KIND_PREFERENCE)
    add(server, "alice", "My sister lives in Lisbon and works as an architect", "I am allergic to peanuts")
    response = query(server, "alice", "which seat do I like on a plane?")
    assert response.memories[0].memory.id == stored[0].id
    top = response.memories[0]
    assert top.memory.content == "I prefer window seats on long flights"
    assert 0 < top.score <= 1
    b = top.score_breakdown
    assert b.semantic > 0.3 and b.recency > 0.9 and b.importance == pytest.approx(top.memory.importance)
    assert top.memory.embedding_version
    assert response.request_id.startswith("req_")
    assert response.explanation
    assert [s.stage for s in response.report.stages] == ["scope", "embed", "recall", "hydrate", "rank", "bookkeep"]


@pytest.mark.parametrize("placement", ["partition", "partition_key"])
def test_users_and_tenants_are_isolated(engine_server_factory: ServerFactory, placement: str) -> None:
    s = engine_server_factory(vector_placement=placement)
    other_tenant = s.create_key(tenant="globex")
    crafted = ['x" || tier != "', 'a\\" or 1==1 or \\"', "alice", 'bob") or ("1"=="1']
    add(s, "alice", "Alice keeps bees in her garden", tags=["bees"], session_id="s1")
    add(s, "bob", "Bob keeps bees on his roof", tags=["bees"], session_id="s1")
    add(s, "alice", "Globex alice keeps bees too", key=other_tenant, tags=["bees"])
    found = query(s, "alice", "who keeps bees?", filter=all_filter())
    assert [m.memory.content for m in found.memories] == ["Alice keeps bees in her garden"]
    found = query(s, "alice", "who keeps bees?", key=other_tenant, filter=all_filter())
    assert [m.memory.content for m in found.memories] == ["Globex alice keeps bees too"]
    for value in crafted:
        # Crafted values either fail validation or match nothing; they never widen the scope.
        for f in (
            memory_pb2.MemoryFilter(min_importance=0.0, tags_any=[value]),
            memory_pb2.MemoryFilter(min_importance=0.0, session_id=value),
        ):
            try:
                result = query(s, "alice", "bees", filter=f)
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT
                continue
            assert all(m.memory.user_id == "alice" for m in result.memories)
            assert all("Bob" not in m.memory.content and "Globex" not in m.memory.content for m in result.memories)
    # A user id that looks like an expression is just another (empty) user.
    assert not query(s, 'alice" or "1"=="1', "bees", filter=all_filter()).memories
    # Another tenant cannot read a memory by id.
    alice_id = query(s, "alice", "bees", filter=all_filter()).memories[0].memory.id
    code, _, _ = error_of(
        lambda: s.writes.GetMemory(
            write_service_pb2.GetMemoryRequest(user_id="alice", id=alice_id), metadata=s.auth(other_tenant)
        )
    )
    assert code == grpc.StatusCode.NOT_FOUND


def test_no_plaintext_at_rest(server: RunningServer, tmp_path: Path) -> None:
    canary = "canary-7f3a9c-zebra-quartz"
    add(server, "carol", f"My locker code is {canary}", metadata=None)
    assert query(server, "carol", "locker code", filter=all_filter()).memories[0].memory.content.endswith(canary)
    server.run(server.components.index.close())  # flush everything Milvus Lite holds to disk
    data_dir = server.components.settings.data_dir
    files = [p for p in data_dir.rglob("*") if p.is_file()]
    assert any("milvus" in str(p) for p in files) and any(p.name.startswith("memsvc.db") for p in files)
    for path in files:
        assert canary.encode() not in path.read_bytes(), f"plaintext found in {path}"


def test_one_span_per_stage_under_the_rpc_span(server: RunningServer) -> None:
    add(server, "dave", "Dave runs marathons every spring")
    server.spans.clear()
    query(server, "dave", "what sport does dave do?", filter=all_filter())
    spans = server.spans.get_finished_spans()
    rpc = [s for s in spans if s.name == "memsvc.v1.QueryService/Query"]
    assert len(rpc) == 1
    assert rpc[0].attributes is not None and rpc[0].attributes["rpc.system"] == "grpc"
    stages = [s for s in spans if s.name.startswith("memsvc.stage.")]
    assert sorted(s.name.removeprefix("memsvc.stage.") for s in stages) == sorted(
        ["scope", "embed", "recall", "hydrate", "rank", "bookkeep"]
    )
    for span in stages:
        assert span.parent is not None and span.parent.span_id == rpc[0].context.span_id
    recall = next(s for s in stages if s.name == "memsvc.stage.recall")
    assert recall.attributes is not None and recall.attributes["memsvc.candidates.recalled"] == 1
    embed = next(s for s in stages if s.name == "memsvc.stage.embed")
    assert embed.attributes is not None and embed.attributes["memsvc.embedding.cache_hit"] is False


def test_usage_and_last_access_move(server: RunningServer) -> None:
    memory = add(server, "erin", "Erin's favourite tea is genmaicha")[0]
    assert memory.usage_count == 0 and not memory.HasField("last_access_time")
    query(server, "erin", "what tea does erin like?", filter=all_filter())
    deadline = time.time() + 5
    while time.time() < deadline:
        got = server.writes.GetMemory(
            write_service_pb2.GetMemoryRequest(user_id="erin", id=memory.id), metadata=server.md
        ).memory
        if got.usage_count == 1:
            break
        time.sleep(0.05)
    assert got.usage_count == 1
    assert got.HasField("last_access_time")


def test_result_cache_answers_repeats_and_writes_invalidate(server: RunningServer) -> None:
    add(server, "frank", "Frank plays the cello in a quartet")
    first = query(server, "frank", "what instrument?", filter=all_filter())
    second = query(server, "frank", "what instrument?", filter=all_filter())
    assert not first.report.cache_hit and second.report.cache_hit
    assert [m.memory.id for m in first.memories] == [m.memory.id for m in second.memories]
    add(server, "frank", "Frank also learned the viola last year")
    third = query(server, "frank", "what instrument?", filter=all_filter())
    assert not third.report.cache_hit
    assert len(third.memories) == 2


def test_bad_input_gets_clear_statuses(server: RunningServer) -> None:
    w, md = server.writes, server.md
    cases: list[tuple[Any, str]] = [
        (
            lambda: w.AddMemories(
                write_service_pb2.AddMemoriesRequest(user_id="u", memories=[write_service_pb2.NewMemory(content="")]),
                metadata=md,
            ),
            "memories[0].content",
        ),
        (
            lambda: w.AddMemories(
                write_service_pb2.AddMemoriesRequest(
                    user_id="u", memories=[write_service_pb2.NewMemory(content="x" * 40000)]
                ),
                metadata=md,
            ),
            "memories[0].content",
        ),
        (
            lambda: w.AddMemories(
                write_service_pb2.AddMemoriesRequest(
                    user_id="u", memories=[write_service_pb2.NewMemory(content="ok", tier=9)]
                ),
                metadata=md,
            ),
            "memories[0].tier",
        ),
        (
            lambda: w.AddMemories(
                write_service_pb2.AddMemoriesRequest(
                    user_id="u", memories=[write_service_pb2.NewMemory(content="ok", tags=["bad tag!"])]
                ),
                metadata=md,
            ),
            "memories[0].tags[0]",
        ),
        (
            lambda: w.AddMemories(
                write_service_pb2.AddMemoriesRequest(user_id="", memories=[write_service_pb2.NewMemory(content="ok")]),
                metadata=md,
            ),
            "user_id",
        ),
        (lambda: query(server, "u", "hello", limit=1000), "limit"),
        (lambda: query(server, "u", ""), "query"),
        (lambda: query(server, "u", "hi", filter=memory_pb2.MemoryFilter(tier=42)), "filter.tier"),
        (lambda: query(server, "u", "hi", filter=memory_pb2.MemoryFilter(tags_any=["a b"])), "filter.tags_any[0]"),
        (
            lambda: w.ListMemories(
                write_service_pb2.ListMemoriesRequest(user_id="u", page_token="bm90LWEtdG9rZW4tYXQtYWxs"), metadata=md
            ),
            "page_token",
        ),
        (lambda: w.GetMemory(write_service_pb2.GetMemoryRequest(user_id="u", id="nope"), metadata=md), "id"),
    ]
    for call, field in cases:
        code, fields, reason = error_of(call)
        assert code == grpc.StatusCode.INVALID_ARGUMENT, field
        assert field in fields, (field, fields)
        assert reason == "INVALID_ARGUMENT"
    code, _, _ = error_of(
        lambda: w.GetMemory(write_service_pb2.GetMemoryRequest(user_id="u", id="0" * 32), metadata=md)
    )
    assert code == grpc.StatusCode.NOT_FOUND
    code, _, _ = error_of(
        lambda: w.DeleteMemory(write_service_pb2.DeleteMemoryRequest(user_id="u", id="0" * 32), metadata=md)
    )
    assert code == grpc.StatusCode.NOT_FOUND


def test_page_tokens_are_bound_to_the_caller(server: RunningServer) -> None:
    add(server, "gina", *[f"Gina note number {i} about gardening" for i in range(5)])
    page = server.writes.ListMemories(
        write_service_pb2.ListMemoriesRequest(user_id="gina", page_size=2), metadata=server.md
    )
    assert len(page.memories) == 2 and page.next_page_token
    seen = [m.id for m in page.memories]
    token = page.next_page_token
    while token:
        page = server.writes.ListMemories(
            write_service_pb2.ListMemoriesRequest(user_id="gina", page_size=2, page_token=token), metadata=server.md
        )
        seen += [m.id for m in page.memories]
        token = page.next_page_token
    assert len(seen) == len(set(seen)) == 5
    first = server.writes.ListMemories(
        write_service_pb2.ListMemoriesRequest(user_id="gina", page_size=2), metadata=server.md
    )
    for other_user, other_key in (("hank", server.api_key), ("gina", server.create_key(tenant="globex"))):
        code, fields, _ = error_of(
            lambda u=other_user, k=other_key: server.writes.ListMemories(
                write_service_pb2.ListMemoriesRequest(user_id=u, page_size=2, page_token=first.next_page_token),
                metadata=server.auth(k),
            )
        )
        assert code == grpc.StatusCode.INVALID_ARGUMENT and fields == ["page_token"]


def test_missing_bad_and_revoked_keys_are_unauthenticated(server: RunningServer) -> None:
    request = query_service_pb2.QueryRequest(user_id="u", query="hello")
    for metadata in (
        (),
        (("authorization", "Bearer msk_0000000000000000_" + "a" * 40),),
        (("authorization", "Basic x"),),
    ):
        code, _, _ = error_of(lambda m=metadata: server.queries.Query(request, metadata=m))
        assert code == grpc.StatusCode.UNAUTHENTICATED
    key = server.create_key()
    server.queries.Query(request, metadata=server.auth(key))
    key_id = key.split("_")[1]
    assert server.run(server.components.keys.revoke(key_id))
    time.sleep(server.components.settings.auth_cache_ttl_s + 0.1)
    code, _, _ = error_of(lambda: server.queries.Query(request, metadata=server.auth(key)))
    assert code == grpc.StatusCode.UNAUTHENTICATED
    read_only = server.create_key(permissions=frozenset({Permission.READ}))
    code, _, _ = error_of(lambda: add(server, "u", "not allowed", key=read_only))
    assert code == grpc.StatusCode.PERMISSION_DENIED


def test_reconciler_indexes_a_write_whose_vector_failed(server: RunningServer, monkeypatch: pytest.MonkeyPatch) -> None:
    index = server.components.index

    async def index_down(*args: Any, **kwargs: Any) -> None:
        raise Unavailable("vector index down (injected)")

    monkeypatch.setattr(index, "upsert", index_down)
    stored = add(server, "ivan", "Ivan's passport expires in March 2027")[0]
    assert server.run(server.components.store.count_pending_index()) == 1
    monkeypatch.undo()
    # Without its vector the memory is still found, by the lexical channel alone (its postings
    # were written before the vector write failed).
    early = query(server, "ivan", "when does the passport expire?", filter=all_filter()).memories
    assert [(m.score_breakdown.dense_rank, m.score_breakdown.lexical_rank > 0) for m in early] == [(0, True)]
    result = server.run(server.components.reconciler.run_once(min_age_s=0))
    assert result.indexed == 1
    assert server.run(server.components.store.count_pending_index()) == 0
    found = query(server, "ivan", "when does the passport expire?", filter=all_filter(), skip_cache=True)
    assert [m.memory.id for m in found.memories] == [stored.id]


def test_update_delete_and_forget(engine_server: RunningServer) -> None:
    server = engine_server
    m = add(server, "judy", "Judy drives a red bicycle", tags=["transport"])[0]
    updated = server.writes.UpdateMemory(
        write_service_pb2.UpdateMemoryRequest(
            user_id="judy",
            id=m.id,
            memory=write_service_pb2.MemoryUpdate(content="Judy drives a green scooter", tier=memory_pb2.TIER_WARM),
            update_mask=field_mask_pb2.FieldMask(paths=["content", "tier"]),
        ),
        metadata=server.md,
    ).memory
    assert updated.content == "Judy drives a green scooter" and updated.tier == memory_pb2.TIER_WARM
    hot_only = memory_pb2.MemoryFilter(min_importance=0.0, tier=memory_pb2.TIER_HOT)
    assert not query(server, "judy", "scooter", filter=hot_only).memories
    assert query(server, "judy", "scooter", filter=all_filter()).memories[0].memory.content.endswith("scooter")
    server.writes.DeleteMemory(write_service_pb2.DeleteMemoryRequest(user_id="judy", id=m.id), metadata=server.md)
    assert not query(server, "judy", "scooter", filter=all_filter()).memories
    add(server, "judy", "Judy has two cats", "Judy studies law")
    forgotten = server.writes.ForgetUser(write_service_pb2.ForgetUserRequest(user_id="judy"), metadata=server.md)
    assert forgotten.deleted_count == 2
    assert not query(server, "judy", "cats", filter=all_filter()).memories
    namespace = Namespace("acme", "default", "development", "judy")
    assert server.run(server.components.store.get_data_key(namespace)) is None
    assert server.run(server.components.index.count(namespace)) == 0


def test_a_direct_query_decrypts_only_what_it_returns(server: RunningServer, monkeypatch: pytest.MonkeyPatch) -> None:
    for n in range(4):
        add(
            server,
            "dee",
            *[f"Trip {n}-{i}: we hiked a mountain trail near lake {i}" for i in range(8)],
            metadata={"trip": str(n)},
        )
    cipher = server.components.cipher
    real_open = cipher.open
    opened: list[str] = []

    async def counting_open(namespace: Namespace, memory_id: str, ciphertext: bytes) -> bytes:
        opened.append(memory_id)
        return await real_open(namespace, memory_id, ciphertext)

    monkeypatch.setattr(cipher, "open", counting_open)
    response = query(server, "dee", "mountain trail hike", limit=3, filter=all_filter(), skip_cache=True)
    returned = [m.memory.id for m in response.memories]
    assert len(returned) == 3 and all(m.memory.content.startswith("Trip ") for m in response.memories)
    # Ranking read plaintext columns only: the candidates it dropped were never decrypted.
    assert response.report.candidates_recalled > 3
    assert sorted(opened) == sorted(returned)
    # A metadata filter needs every candidate's sealed metadata, and gets it.
    opened.clear()
    wanted = memory_pb2.MemoryFilter(min_importance=0.0)
    wanted.metadata.update({"trip": "2"})
    response = query(server, "dee", "mountain trail hike", limit=3, filter=wanted, skip_cache=True)
    assert [m.memory.content[:7] for m in response.memories] == ["Trip 2-"] * 3
    assert len(opened) > 3
