"""Relevance that means something on its own: DIRECT's floor drops what does not match at all."""

from __future__ import annotations

import grpc
import pytest

from memsvc.v1 import query_service_pb2, write_service_pb2
from tests.conftest import RunningServer
from tests.e2e.test_retrieval_modes import query

pytestmark = pytest.mark.e2e

ALICE = [
    "I prefer window seats when I fly",
    "I always book the early morning flight on business trips",
    "I'm allergic to peanuts",
    "My sister lives in Porto",
]


def test_a_small_store_returns_what_matches_and_not_everything(server: RunningServer) -> None:
    memories = [write_service_pb2.NewMemory(content=c) for c in ALICE]
    server.writes.AddMemories(
        write_service_pb2.AddMemoriesRequest(user_id="alice", memories=memories), metadata=server.md
    )

    found = query(server, "alice", "how do I like to fly?")
    contents = [r.memory.content for r in found.memories]
    assert contents[0] == "I prefer window seats when I fly"
    assert "I'm allergic to peanuts" not in contents and "My sister lives in Porto" not in contents
    assert found.report.dropped_below_relevance >= 2
    for r in found.memories:
        b = r.score_breakdown
        assert 0.25 <= b.relevance <= 1.0 and 0.0 <= b.term_coverage <= 1.0
    # The floor is the server's default; a query may lower it (0 keeps every candidate) or raise it.
    everything = query(server, "alice", "how do I like to fly?", min_relevance=0.0)
    assert len(everything.memories) == 4 and everything.report.dropped_below_relevance == 0
    peanuts = next(r for r in everything.memories if r.memory.content == "I'm allergic to peanuts")
    assert peanuts.score_breakdown.relevance < 0.25 < peanuts.score
    strict = query(server, "alice", "how do I like to fly?", min_relevance=0.99)
    assert all(r.score_breakdown.relevance >= 0.99 for r in strict.memories)
    # Words alone carry a terse memory its meaning misses: the rare word is most of the query.
    assert query(server, "alice", "Porto?").memories[0].memory.content == "My sister lives in Porto"


def test_a_floor_outside_zero_to_one_is_rejected_naming_the_field(server: RunningServer) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        server.queries.Query(
            query_service_pb2.QueryRequest(user_id="alice", query="flights", min_relevance=1.5), metadata=server.md
        )
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "min_relevance" in (caught.value.details() or "")
