"""Milvus Lite called in process answers as pymilvus's local server does, on the same files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from milvus_lite.server_manager import server_manager_instance
from pymilvus import DataType, MilvusClient
from pymilvus.exceptions import MilvusException

from memsvc.stores.vectors.milvus import connect_milvus
from memsvc.stores.vectors.milvus_lite import EmbeddedMilvus

pytestmark = pytest.mark.integration

DIM = 16


def _create(client: EmbeddedMilvus) -> None:
    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("tags", DataType.ARRAY, element_type=DataType.VARCHAR, max_capacity=4, max_length=16)
    schema.add_field("status", DataType.VARCHAR, max_length=16)
    index = client.prepare_index_params()
    index.add_index(field_name="vector", index_type="FLAT", metric_type="COSINE")
    client.create_collection("c", schema=schema, index_params=index)
    client.create_partition("c", "alice")
    client.create_partition("c", "bob")


def _rows(owner: str, count: int, seed: int) -> list[dict[str, object]]:
    vectors = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    return [
        {"id": f"{owner}-{i}", "vector": v.tolist(), "tags": ["t"], "status": "active" if i % 4 else "superseded"}
        for i, v in enumerate(vectors)
    ]


def _search(client: EmbeddedMilvus | MilvusClient, vector: list[float], partition: str) -> list[tuple[str, float]]:
    hits = client.search(
        "c",
        data=[vector],
        limit=10,
        filter='(status == "active")',
        output_fields=["id"],
        search_params={"metric_type": "COSINE"},
        consistency_level="Strong",
        partition_names=[partition],
    )
    return [(str(h["id"]), round(float(h["distance"]), 5)) for h in hits[0]]


def test_in_process_calls_match_the_local_server_on_the_same_files(tmp_path: Path) -> None:
    path = str(tmp_path / "milvus.db")
    query = np.random.default_rng(9).standard_normal(DIM).astype(np.float32).tolist()
    embedded = connect_milvus(path)
    assert isinstance(embedded, EmbeddedMilvus)
    _create(embedded)
    embedded.upsert("c", _rows("alice", 40, 1), partition_name="alice")
    embedded.upsert("c", _rows("bob", 40, 2), partition_name="bob")
    embedded.delete("c", ids=["alice-1"], partition_name="alice")
    embedded.flush("c")
    found = _search(embedded, query, "alice")
    assert len(found) == 10 and all(i.startswith("alice-") for i, _ in found)
    assert "alice-1" not in {i for i, _ in found}, "deleted"
    assert not any(int(i.split("-")[1]) % 4 == 0 for i, _ in found), "the filter applies"
    assert [h["id"] for h in embedded.get("c", ids=["bob-3", "bob-5"], output_fields=["vector"])] == ["bob-3", "bob-5"]
    assert embedded.query("c", filter='id != ""', output_fields=["count(*)"], partition_names=["bob"]) == [
        {"count(*)": 40}
    ]
    embedded.close()

    server = MilvusClient(uri=path)  # pymilvus starts Milvus Lite's own gRPC server on the directory
    try:
        server.load_collection("c")
        assert _search(server, query, "alice") == found
    finally:
        server.close()
        server_manager_instance.release_server(path)


def _compare_searches(client: EmbeddedMilvus, rng: np.random.Generator, partitions: list[str]) -> int:
    """The id-only search against the engine's own, for random queries; returns the hits compared."""
    collection = client._engine.db.get_collection("c")
    compared = 0
    for partition in [*partitions, None]:
        for expression in ("", '(status == "active")'):
            queries = rng.standard_normal((2, DIM)).astype(np.float32).tolist()
            names = [partition] if partition else None
            fast = client.search(
                "c", data=queries, limit=7, filter=expression, output_fields=["id"],
                search_params={"metric_type": "COSINE"}, partition_names=names,
            )  # fmt: skip
            engine = collection.search(
                query_vectors=queries, top_k=7, metric_type="COSINE", partition_names=names,
                expr=expression or None, output_fields=["id"],
            )  # fmt: skip
            for mine, theirs in zip(fast, engine, strict=True):
                _assert_same_hits(mine, theirs)
                compared += len(mine)
    return compared


def _assert_same_hits(mine: list[dict[str, Any]], theirs: list[dict[str, Any]], tolerance: float = 1e-5) -> None:
    """The same hits as the engine's, in the same order, up to float rounding: the distances agree
    within `tolerance`, and two hits may trade places (or the last place) only where the engine
    found them that close."""
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs, strict=True):
        assert abs(a["distance"] - b["distance"]) <= tolerance, (mine, theirs)
    engine = {h["id"]: h["distance"] for h in theirs}
    for position, (a, b) in enumerate(zip(mine, theirs, strict=True)):
        if a["id"] != b["id"]:
            near_tie = abs(engine.get(a["id"], theirs[-1]["distance"]) - b["distance"]) <= tolerance
            assert near_tie, (position, mine, theirs)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_search_for_ids_finds_what_the_engines_own_search_finds(tmp_path: Path, seed: int) -> None:
    """The id-only search finds an id's latest version and drops deleted rows its own way; the
    hits must be the engine's. Random writes over a small set of ids, so that ids are written
    again in other segments and in the memtable, deleted before and after a flush, and written
    again after a delete; compared after every step."""
    rng = np.random.default_rng(seed)
    client = EmbeddedMilvus(str(tmp_path / "milvus.db"))
    compared = 0
    try:
        _create(client)
        for _ in range(30):
            owner = str(rng.choice(["alice", "bob"]))
            step = rng.integers(0, 10)
            if step < 6:
                ids = sorted({int(i) for i in rng.integers(0, 40, size=int(rng.integers(1, 12)))})
                rows = _rows(owner, 40, int(rng.integers(0, 1_000_000)))
                client.upsert("c", [rows[i] for i in ids], partition_name=owner)
            elif step < 8:
                ids = [f"{owner}-{int(i)}" for i in rng.integers(0, 40, size=3)]
                client.delete("c", ids=ids, partition_name=owner)
            else:
                client.flush("c")
            compared += _compare_searches(client, rng, ["alice", "bob"])
        assert compared > 500
    finally:
        client.close()


def test_clients_of_one_directory_share_its_engine_until_the_last_closes(tmp_path: Path) -> None:
    path = str(tmp_path / "milvus.db")
    first, second = EmbeddedMilvus(path), EmbeddedMilvus(path)  # the directory lock would refuse two engines
    _create(first)
    first.upsert("c", _rows("alice", 5, 3), partition_name="alice")
    first.close()
    with pytest.raises(MilvusException, match="closed"):
        first.list_collections()
    assert second.list_collections() == ["c"], "the other client still reads"
    assert second.has_partition("c", "alice")
    second.close()
    third = EmbeddedMilvus(path)  # reopened from disk once the last one closed
    try:
        third.load_collection("c")
        assert len(third.get("c", ids=["alice-0"])) == 1
    finally:
        third.close()


def test_engine_errors_surface_as_milvus_exceptions(tmp_path: Path) -> None:
    client = EmbeddedMilvus(str(tmp_path / "milvus.db"))
    try:
        _create(client)
        with pytest.raises(MilvusException):
            client.search("missing", data=[[0.0] * DIM], limit=1)
        with pytest.raises(MilvusException):
            client.create_partition("c", "alice")  # exists already
        with pytest.raises(MilvusException):
            client.search("c", data=[[0.0] * DIM], limit=1, filter="status === 1")
        ids_only: dict[str, Any] = {"output_fields": ["id"], "search_params": {"metric_type": "COSINE"}}
        with pytest.raises(MilvusException):  # the same through the id-only search
            client.search("c", data=[[0.0] * DIM], limit=1, filter="status === 1", **ids_only)
    finally:
        client.close()
