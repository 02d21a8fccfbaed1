"""A server whose local embedder runs on ONNX Runtime serves writes and queries over gRPC."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsvc.v1 import memory_pb2, query_service_pb2, write_service_pb2
from tests.conftest import ServerFactory

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(
    ("runtime", "version"), [("onnx", "all-MiniLM-L6-v2@1"), ("onnx-int8", "all-MiniLM-L6-v2@1+int8")]
)
def test_add_then_query_on_the_onnx_runtime(
    server_factory: ServerFactory, onnx_dir: Path, runtime: str, version: str
) -> None:
    s = server_factory(own_embedder=True, embedding_runtime=runtime, embedding_onnx_dir=onnx_dir)
    assert s.components.embedder.version == version
    contents = [
        "I prefer window seats on long flights",
        "My sister lives in Lisbon and works as an architect",
        "I am allergic to peanuts",
    ]
    request = write_service_pb2.AddMemoriesRequest(
        user_id="alice", memories=[write_service_pb2.NewMemory(content=c) for c in contents]
    )
    stored = s.writes.AddMemories(request, metadata=s.md).memories
    assert [m.embedding_version for m in stored] == [version] * 3
    response = s.queries.Query(
        query_service_pb2.QueryRequest(
            user_id="alice", query="which seat do I like on a plane?", filter=memory_pb2.MemoryFilter(min_importance=0)
        ),
        metadata=s.md,
    )
    assert response.memories[0].memory.id == stored[0].id
    assert response.memories[0].score_breakdown.semantic > 0.3


def test_a_changed_embedding_version_re_embeds_every_memory_and_drops_the_old_vectors(
    server_factory: ServerFactory, onnx_dir: Path, tmp_path: Path
) -> None:
    data_dir = tmp_path / "switching"
    s = server_factory(data_dir=data_dir, own_embedder=True, embedding_runtime="onnx", embedding_onnx_dir=onnx_dir)
    contents = ["I prefer window seats on long flights", "My sister lives in Lisbon", "I am allergic to peanuts"]
    stored = s.writes.AddMemories(
        write_service_pb2.AddMemoriesRequest(
            user_id="alice", memories=[write_service_pb2.NewMemory(content=c) for c in contents]
        ),
        metadata=s.md,
    ).memories
    old_collections = set(s.components.index.client.list_collections())
    assert old_collections and all(n.startswith("memsvc_all_minilm_l6_v2_1_") for n in old_collections)
    s.channel.close()
    s.run(s.server.stop(0))

    s = server_factory(data_dir=data_dir, own_embedder=True, embedding_runtime="onnx-int8", embedding_onnx_dir=onnx_dir)
    # The reconciler's pass at start (and this one, whichever comes first) adopts the new version.
    s.run(s.components.reconciler.run_once(min_age_s=0))
    assert s.run(s.components.store.count_pending_index()) == 0
    collections = set(s.components.index.client.list_collections())
    assert not collections & old_collections, "the old version's vectors are erased"
    for memory in stored:
        got = s.writes.GetMemory(write_service_pb2.GetMemoryRequest(user_id="alice", id=memory.id), metadata=s.md)
        assert got.memory.embedding_version == "all-MiniLM-L6-v2@1+int8"
    response = s.queries.Query(
        query_service_pb2.QueryRequest(
            user_id="alice", query="which seat do I like on a plane?", filter=memory_pb2.MemoryFilter(min_importance=0)
        ),
        metadata=s.md,
    )
    assert response.memories[0].memory.id == stored[0].id
    assert response.memories[0].score_breakdown.semantic > 0.3, "found by its new vector, not by words alone"
