"""Hybrid recall over gRPC: the lexical channel finds rare terms, honours filters, keeps no text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.protobuf import field_mask_pb2

from memsvc.v1 import memory_pb2, query_service_pb2, write_service_pb2
from tests.conftest import RunningServer, ServerFactory

pytestmark = pytest.mark.e2e

RARE = "Vaszkovics"  # a surname the embedding model has never seen as a whole word
TARGET = f"My new physiotherapist is Dr {RARE}, appointments on Thursdays"
# Furniture memories that the embedding puts nearer a sofa question than the target, none with
# the words "sofa" or "Vaszkovics". The six couches "from" someone keep the target well below
# the third place on every machine: with the thirty others alone, the int8 model put it third
# on one CPU and eighth on others (int8 kernels round differently from CPU to CPU); now seventh
# (0.022 below the third) and thirteenth on the float model.
DISTRACTORS = [
    f"{subject} {predicate}"
    for subject in (
        "The couch delivery",
        "Our new settee",
        "The leather couch",
        "The loveseat order",
        "The corner couch",
    )
    for predicate in ("arrives on Tuesday", "was delayed again", "needs two people", "was rescheduled", "is stuck")
] + [f"The velvet settee {p}" for p in ("arrives on Tuesday", "was delayed", "needs two people", "is stuck", "is blue")]
DISTRACTORS += [
    f"The couch from {name} {p}"
    for name, p in zip(
        ("Kowalski", "Horvath", "Novak", "Szabo", "Kovacs", "Nagy"),
        ("arrives on Tuesday", "was delayed again", "needs two people", "was rescheduled", "is stuck", "is blue"),
        strict=True,
    )
]
QUERY = f"the sofa from {RARE}"


def add(s: RunningServer, user: str, contents: list[str], **fields: Any) -> list[Any]:
    request = write_service_pb2.AddMemoriesRequest(
        user_id=user, memories=[write_service_pb2.NewMemory(content=c, importance=0.6, **fields) for c in contents]
    )
    return list(s.writes.AddMemories(request, metadata=s.md).memories)


def query(s: RunningServer, user: str, text: str, limit: int = 5, **filter_fields: Any) -> Any:
    request = query_service_pb2.QueryRequest(
        user_id=user,
        query=text,
        limit=limit,
        skip_cache=True,
        filter=memory_pb2.MemoryFilter(min_importance=0.0, **filter_fields),
    )
    return s.queries.Query(request, metadata=s.md)


def test_rare_term_found_by_the_lexical_channel_with_both_channels_in_the_breakdown(
    server_factory: ServerFactory,
) -> None:
    s = server_factory()
    add(s, "olga", DISTRACTORS)
    target = add(s, "olga", [TARGET], tags=["health"])[0]
    response = query(s, "olga", QUERY, limit=3)
    top = response.memories[0]
    assert top.memory.id == target.id
    b = top.score_breakdown
    assert b.lexical_rank == 1 and b.lexical == pytest.approx(1.0)
    assert b.dense_rank > 3 and 0 < b.semantic < 1  # both channels, the dense one far behind
    assert response.report.candidates_recalled > 3
    # The dense channel alone misses it at this depth: the couches look more like a sofa.
    dense_only = server_factory(lexical_enabled=False)
    add(dense_only, "olga", DISTRACTORS)
    add(dense_only, "olga", [TARGET], tags=["health"])
    missed = query(dense_only, "olga", QUERY, limit=3).memories
    assert TARGET not in [m.memory.content for m in missed]
    assert all(m.score_breakdown.lexical_rank == 0 for m in missed)

    # Filters hold for lexical hits too (nothing is tagged "home" or cold).
    assert not query(s, "olga", QUERY, tags_any=["home"]).memories
    assert not query(s, "olga", QUERY, tier=memory_pb2.TIER_COLD).memories
    assert [m.memory.id for m in query(s, "olga", QUERY, tags_any=["health"]).memories] == [target.id]
    # Other users never see it.
    assert not query(s, "someone-else", RARE).memories


def test_postings_follow_updates_deletes_and_forget(server: RunningServer) -> None:
    target = add(server, "pia", [TARGET])[0]
    add(server, "pia", DISTRACTORS[:2])
    assert [m.memory.id for m in query(server, "pia", RARE).memories][:1] == [target.id]
    server.writes.UpdateMemory(
        write_service_pb2.UpdateMemoryRequest(
            user_id="pia",
            id=target.id,
            memory=write_service_pb2.MemoryUpdate(content="My physiotherapist is Dr Okonkwo now"),
            update_mask=field_mask_pb2.FieldMask(paths=["content"]),
        ),
        metadata=server.md,
    )
    hits = {m.memory.id: m.score_breakdown for m in query(server, "pia", "Okonkwo").memories}
    assert hits[target.id].lexical_rank == 1
    assert all(b.lexical_rank == 0 for b in (m.score_breakdown for m in query(server, "pia", RARE).memories))
    server.writes.DeleteMemory(write_service_pb2.DeleteMemoryRequest(user_id="pia", id=target.id), metadata=server.md)
    assert target.id not in [m.memory.id for m in query(server, "pia", "Okonkwo").memories]
    lexical = server.components.lexical_index
    assert lexical is not None
    namespace = server.run(_namespace(server, "pia"))
    assert server.run(lexical.stats(namespace))[0] == 2
    server.writes.ForgetUser(write_service_pb2.ForgetUserRequest(user_id="pia"), metadata=server.md)
    assert server.run(lexical.postings_count(namespace)) == 0
    assert server.run(lexical.stats(namespace)) == (0, 0)


async def _namespace(s: RunningServer, user: str) -> Any:
    from memsvc.domain.models import Namespace

    return Namespace("acme", "default", "development", user)


def test_no_readable_text_in_any_store_or_index(server: RunningServer) -> None:
    add(server, "quinn", [TARGET, "Quinn keeps the spare key under the blue flowerpot"])
    query(server, "quinn", RARE)
    server.run(server.components.index.close())  # flush Milvus Lite segments to disk
    server.run(server.components.store.close())
    data_dir: Path = server.components.settings.data_dir
    files = [p for p in data_dir.rglob("*") if p.is_file()]
    assert any(p.name.startswith("memsvc.db") for p in files)
    for path in files:
        blob = path.read_bytes().lower()
        for word in (RARE.lower(), "flowerpot", "physiotherapist"):
            assert word.encode() not in blob, f"{word} readable in {path.name}"
