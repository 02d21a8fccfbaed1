"""MEMSVC_MILVUS_DB_NAME: every read and write of the index stays in the configured database."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pymilvus import MilvusClient

from memsvc.domain.models import MemoryFilter, MemoryKind, Namespace, RetentionStatus, Role, Tier
from memsvc.stores.records.sqlite import SqliteRecordStore
from memsvc.stores.vectors.base import VectorItem
from memsvc.stores.vectors.milvus import MilvusVectorIndex, connect_milvus
from tests.conftest import LoopThread
from tests.milvus_server import MilvusServer

pytestmark = pytest.mark.integration

DATABASE = "memsvc_tenant_db"
ALICE = Namespace("acme", "default", "development", "alice")


def item(memory_id: str, seed: int) -> VectorItem:
    vector = np.random.default_rng(seed).standard_normal(16).astype(np.float32)
    return VectorItem(memory_id, vector, Tier.HOT, (), "s1", Role.USER, MemoryKind.FACT, RetentionStatus.ACTIVE, 0.0)


@pytest.mark.parametrize("placement", ["partition", "partition_key"])
def test_writes_searches_and_deletes_use_the_configured_database(
    loop_thread: LoopThread, milvus_server: MilvusServer, tmp_path: Path, placement: str
) -> None:
    admin = MilvusClient(uri=milvus_server.uri)
    if DATABASE not in admin.list_databases():
        admin.create_database(DATABASE)
    store = SqliteRecordStore(tmp_path / "records.db")
    loop_thread.run(store.migrate())
    index = MilvusVectorIndex(
        connect_milvus(milvus_server.uri, db_name=DATABASE),
        embedding_version="db@1",
        dimension=16,
        placement=placement,
        registry=store,
        embedded=False,
    )
    in_database = MilvusClient(uri=milvus_server.uri, db_name=DATABASE)
    try:
        loop_thread.run(index.upsert(ALICE, [item("a1", 1), item("a2", 2)]))
        hits = loop_thread.run(index.search(ALICE, item("a1", 1).vector, 5, MemoryFilter()))
        assert [h.memory_id for h in hits][:1] == ["a1"] and len(hits) == 2
        # The stored vectors of writes just acknowledged, read back as searches see them.
        stored = loop_thread.run(index.vectors(ALICE, ["a1", "a2", "missing"]))
        assert set(stored) == {"a1", "a2"} and np.allclose(stored["a2"], item("a2", 2).vector, atol=1e-6)
        # The refresh a proxy whose cache missed a new partition gets (tests/unit/
        # test_partition_cache_refresh.py): accepted by the server, in this database, harmless.
        collection = in_database.list_collections()[0]
        index._expire_proxy_cache(collection)
        assert "memsvc.cache_epoch" in in_database.describe_collection(collection)["properties"]
        loop_thread.run(index.delete(ALICE, ["a1"]))
        hits = loop_thread.run(index.search(ALICE, item("a1", 1).vector, 5, MemoryFilter()))
        assert [h.memory_id for h in hits] == ["a2"]
        assert admin.list_collections() == []  # nothing landed in `default`
        assert in_database.list_collections()
    finally:
        for name in in_database.list_collections():
            in_database.drop_collection(name)
        in_database.close()
        admin.close()
        loop_thread.run(index.close())
        loop_thread.run(store.close())


@pytest.mark.parametrize("placement", ["partition", "partition_key"])
def test_dropping_another_embedding_version_leaves_this_versions_vectors(
    loop_thread: LoopThread, milvus_server: MilvusServer, tmp_path: Path, placement: str
) -> None:
    admin = MilvusClient(uri=milvus_server.uri)
    if DATABASE not in admin.list_databases():
        admin.create_database(DATABASE)
    store = SqliteRecordStore(tmp_path / "records.db")
    loop_thread.run(store.migrate())

    def index_of(version: str) -> MilvusVectorIndex:
        return MilvusVectorIndex(
            connect_milvus(milvus_server.uri, db_name=DATABASE),
            embedding_version=version,
            dimension=16,
            placement=placement,
            registry=store,
            embedded=False,
        )

    # The new version's collection names start with the old one's: only the old ones go.
    old, new = index_of("db@1"), index_of("db@1+int8")
    in_database = MilvusClient(uri=milvus_server.uri, db_name=DATABASE)
    try:
        loop_thread.run(old.upsert(ALICE, [item("a1", 1)]))
        loop_thread.run(new.upsert(ALICE, [item("a1", 1), item("a2", 2)]))
        before = set(in_database.list_collections())
        dropped = loop_thread.run(new.drop_version("db@1"))
        assert dropped and all(name.startswith("memsvc_db_1_") and "int8" not in name for name in dropped)
        assert set(in_database.list_collections()) == before - set(dropped)
        hits = loop_thread.run(new.search(ALICE, item("a2", 2).vector, 5, MemoryFilter()))
        assert [h.memory_id for h in hits][:1] == ["a2"] and len(hits) == 2
        with pytest.raises(ValueError, match="serves"):
            loop_thread.run(new.drop_version("db@1+int8"))
    finally:
        for name in in_database.list_collections():
            in_database.drop_collection(name)
        in_database.close()
        admin.close()
        loop_thread.run(old.close())
        loop_thread.run(new.close())
        loop_thread.run(store.close())
