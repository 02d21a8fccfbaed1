"""Milvus Lite searches a large segment through its HNSW graph, a small one (or a narrow filter) exactly."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from milvus_lite.index.brute_force import BruteForceIndex
from milvus_lite.index.faiss_hnsw import FaissHnswIndex
from pymilvus import DataType, MilvusClient

from memsvc.domain.models import MemoryFilter, MemoryKind, Namespace, RetentionStatus, Role, Tier
from memsvc.stores.records.sqlite import SqliteRecordStore
from memsvc.stores.vectors.base import VectorItem
from memsvc.stores.vectors.milvus import MilvusVectorIndex, collection_prefix, connect_milvus
from memsvc.stores.vectors.milvus_lite import EmbeddedMilvus
from tests.conftest import LoopThread

pytestmark = pytest.mark.integration

DIM = 32
ROWS = 3_000
LIMIT = 20
USER = Namespace("t", "p", "development", "many-memories")


def _vectors(count: int, seed: int) -> npt.NDArray[np.float32]:
    """Clustered vectors, as embeddings of one person's topics are: 30 topics, spread around each."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((30, DIM))
    return (centres[rng.integers(0, 30, count)] + 0.6 * rng.standard_normal((count, DIM))).astype(np.float32)


def _exact(stored: npt.NDArray[np.float32], query: npt.NDArray[np.float32], rows: npt.NDArray[np.int_]) -> list[int]:
    unit = stored[rows] / np.linalg.norm(stored[rows], axis=1, keepdims=True)
    order = np.argsort(-(unit @ (query / np.linalg.norm(query))), kind="stable")
    return [int(rows[i]) for i in order[:LIMIT]]


def _collection(client: EmbeddedMilvus, index_type: str) -> None:
    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("session_id", DataType.VARCHAR, max_length=16)
    index = client.prepare_index_params()
    params = {"M": 16, "efConstruction": 100} if index_type == "HNSW" else {}
    index.add_index(field_name="vector", index_type=index_type, metric_type="COSINE", params=params)
    client.create_collection("c", schema=schema, index_params=index)
    client.create_partition("c", "u")


def _load(client: EmbeddedMilvus, stored: npt.NDArray[np.float32]) -> None:
    rows = [{"id": str(i), "vector": v.tolist(), "session_id": f"s{i % 50}"} for i, v in enumerate(stored)]
    client.upsert("c", rows, partition_name="u")
    client.flush("c")
    collection = client._engine.db.get_collection("c")
    collection._wait_for_bg()  # the engine builds a sealed segment's graph in the background


def _search(client: EmbeddedMilvus, query: npt.NDArray[np.float32], expression: str = "") -> list[int]:
    hits = client.search(
        "c", data=[query.tolist()], limit=LIMIT, filter=expression, output_fields=["id"],
        search_params={"metric_type": "COSINE", "params": {"ef": 128}}, partition_names=["u"],
    )  # fmt: skip
    return [int(h["id"]) for h in hits[0]]


@pytest.fixture
def graph_client(tmp_path: Path) -> Iterator[EmbeddedMilvus]:
    client = EmbeddedMilvus(str(tmp_path / "milvus.db"), exact_rows=500)
    _collection(client, "HNSW")
    yield client
    client.close()


def test_a_large_segment_is_searched_through_its_graph_close_to_exact(graph_client: EmbeddedMilvus) -> None:
    stored = _vectors(ROWS, 1)
    _load(graph_client, stored)
    segments, _ = graph_client._engine.db.get_collection("c")._read_snapshot()
    assert [type(s.indexes.get("vector")) for s in segments] == [FaissHnswIndex]
    queries = _vectors(40, 2)
    found = [_search(graph_client, q) for q in queries]
    exact = [_exact(stored, q, np.arange(ROWS)) for q in queries]
    recall = np.mean([len(set(f) & set(e)) / LIMIT for f, e in zip(found, exact, strict=True)])
    assert recall >= 0.97
    for f, q in zip(found, queries, strict=True):
        sims = stored[f] @ q / np.linalg.norm(stored[f], axis=1) / np.linalg.norm(q)
        assert np.all(np.diff(sims) <= 1e-5), "hits come best first"


def test_a_broad_filter_on_a_large_segment_walks_the_graph_over_the_rows_it_keeps(graph_client: EmbeddedMilvus) -> None:
    stored = _vectors(ROWS, 8)
    _load(graph_client, stored)
    kept = np.flatnonzero(np.arange(ROWS) % 50 != 7)
    queries = stored[np.arange(7, ROWS, 50)[:20]]  # each query is a dropped row itself: its nearest
    found = [_search(graph_client, q, 'session_id != "s7"') for q in queries]
    assert all(i % 50 != 7 for hits in found for i in hits), "the filter applies"
    exact = [_exact(stored, q, kept) for q in queries]
    assert np.mean([len(set(f) & set(e)) / LIMIT for f, e in zip(found, exact, strict=True)]) >= 0.97


def test_a_narrow_filter_on_a_large_segment_is_searched_exactly(graph_client: EmbeddedMilvus) -> None:
    stored = _vectors(ROWS, 3)
    _load(graph_client, stored)
    in_session = np.flatnonzero(np.arange(ROWS) % 50 == 7)  # 60 rows, under exact_rows
    for query in _vectors(10, 4):
        assert _search(graph_client, query, 'session_id == "s7"') == _exact(stored, query, in_session)


def test_a_segment_under_the_exact_threshold_is_searched_exactly(tmp_path: Path) -> None:
    client = EmbeddedMilvus(str(tmp_path / "milvus.db"), exact_rows=ROWS)
    try:
        _collection(client, "HNSW")
        stored = _vectors(ROWS, 5)
        _load(client, stored)
        for query in _vectors(10, 6):
            assert _search(client, query) == _exact(stored, query, np.arange(ROWS))
    finally:
        client.close()


def _item(memory_id: str, vector: npt.NDArray[np.float32]) -> VectorItem:
    return VectorItem(
        memory_id, vector, Tier.HOT, (), "", Role.USER, MemoryKind.FACT, RetentionStatus.ACTIVE, time.time()
    )


def test_a_collection_made_with_an_exhaustive_index_gets_its_graph_and_finds_the_same(
    loop_thread: LoopThread, tmp_path: Path
) -> None:
    """A store from before the graph index (FLAT) is given HNSW when it is opened, data untouched."""
    store = SqliteRecordStore(tmp_path / "records.db")
    loop_thread.run(store.migrate())
    path = str(tmp_path / "milvus.db")
    stored = _vectors(400, 7)

    def index(client: EmbeddedMilvus) -> MilvusVectorIndex:
        return MilvusVectorIndex(
            client, embedding_version="test@1", dimension=DIM, placement="partition", registry=store
        )

    collection = f"{collection_prefix('test@1')}_s0000"
    old = connect_milvus(path)
    assert isinstance(old, EmbeddedMilvus)
    first = index(old)
    loop_thread.run(first.upsert(USER, [_item(f"m{i}", v) for i, v in enumerate(stored)]))
    # What an earlier build made: the same collection with an exhaustive index.
    old.release_collection(collection)
    old.drop_index(collection, "vector")
    flat = old.prepare_index_params()
    flat.add_index(field_name="vector", index_type="FLAT", metric_type="COSINE")
    old.create_index(collection, flat)
    old.load_collection(collection)
    old.flush(collection)
    assert old.describe_index(collection, "vector")["index_type"] == "FLAT"
    query = _vectors(1, 8)[0]
    before = loop_thread.run(first.search(USER, query, LIMIT, MemoryFilter()))
    loop_thread.run(first.close())

    reopened = connect_milvus(path)
    assert isinstance(reopened, EmbeddedMilvus)
    second = index(reopened)
    try:
        after = loop_thread.run(second.search(USER, query, LIMIT, MemoryFilter()))
        assert reopened.describe_index(collection, "vector")["index_type"] == "HNSW"
        segments, _ = reopened._engine.db.get_collection(collection)._read_snapshot()
        assert segments and all(isinstance(s.indexes.get("vector"), FaissHnswIndex) for s in segments)
        assert not any(isinstance(s.indexes.get("vector"), BruteForceIndex) for s in segments)
        assert [h.memory_id for h in after] == [h.memory_id for h in before]
        assert [h.memory_id for h in after] == [f"m{i}" for i in _exact(stored, query, np.arange(len(stored)))]
    finally:
        loop_thread.run(second.close())
        loop_thread.run(store.close())
