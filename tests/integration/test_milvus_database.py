"""MEMSVC_MILVUS_DB_NAME: every read and write of the index stays in the configured database."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
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


@dataclass
class Setup:
    """The configured database on the session's Milvus server, a record store for the
    placement registry, and indexes of any embedding version over both."""

    uri: str
    store: SqliteRecordStore
    placement: str
    loop: LoopThread
    in_database: MilvusClient
    indexes: list[MilvusVectorIndex] = field(default_factory=list)

    def index(self, version: str = "db@1") -> MilvusVectorIndex:
        index = MilvusVectorIndex(
            connect_milvus(self.uri, db_name=DATABASE),
            embedding_version=version,
            dimension=16,
            placement=self.placement,
            registry=self.store,
            embedded=False,
        )
        self.indexes.append(index)
        return index


@pytest.fixture(params=["partition", "partition_key"])
def setup(
    request: pytest.FixtureRequest, loop_thread: LoopThread, milvus_server: MilvusServer, tmp_path: Path
) -> Iterator[Setup]:
    admin = MilvusClient(uri=milvus_server.uri)
    if DATABASE not in admin.list_databases():
        admin.create_database(DATABASE)
    store = SqliteRecordStore(tmp_path / "records.db")
    loop_thread.run(store.migrate())
    in_database = MilvusClient(uri=milvus_server.uri, db_name=DATABASE)
    s = Setup(milvus_server.uri, store, request.param, loop_thread, in_database)
    try:
        yield s
        assert admin.list_collections() == []  # nothing landed in `default`
    finally:
        for name in in_database.list_collections():
            in_database.drop_collection(name)
        in_database.close()
        admin.close()
        for index in s.indexes:
            loop_thread.run(index.close())
        loop_thread.run(store.close())


def test_writes_searches_and_deletes_use_the_configured_database(setup: Setup) -> None:
    run, index, in_database = setup.loop.run, setup.index(), setup.in_database
    run(index.upsert(ALICE, [item("a1", 1), item("a2", 2)]))
    hits = run(index.search(ALICE, item("a1", 1).vector, 5, MemoryFilter()))
    assert [h.memory_id for h in hits][:1] == ["a1"] and len(hits) == 2
    # The stored vectors of writes just acknowledged, read back as searches see them.
    stored = run(index.vectors(ALICE, ["a1", "a2", "missing"]))
    assert set(stored) == {"a1", "a2"} and np.allclose(stored["a2"], item("a2", 2).vector, atol=1e-6)
    # The refresh a proxy whose cache missed a new partition gets (tests/unit/
    # test_partition_cache_refresh.py): accepted by the server, in this database, harmless.
    collection = in_database.list_collections()[0]
    index._expire_proxy_cache(collection)
    assert "memsvc.cache_epoch" in in_database.describe_collection(collection)["properties"]
    run(index.delete(ALICE, ["a1"]))
    hits = run(index.search(ALICE, item("a1", 1).vector, 5, MemoryFilter()))
    assert [h.memory_id for h in hits] == ["a2"]
    assert in_database.list_collections()


def test_dropping_another_embedding_version_leaves_this_versions_vectors(setup: Setup) -> None:
    run = setup.loop.run
    # The new version's collection names start with the old one's: only the old ones go.
    old, new = setup.index("db@1"), setup.index("db@1+int8")
    run(old.upsert(ALICE, [item("a1", 1)]))
    run(new.upsert(ALICE, [item("a1", 1), item("a2", 2)]))
    before = set(setup.in_database.list_collections())
    dropped = run(new.drop_version("db@1"))
    assert dropped and all(name.startswith("memsvc_db_1_") and "int8" not in name for name in dropped)
    assert set(setup.in_database.list_collections()) == before - set(dropped)
    hits = run(new.search(ALICE, item("a2", 2).vector, 5, MemoryFilter()))
    assert [h.memory_id for h in hits][:1] == ["a2"] and len(hits) == 2
    with pytest.raises(ValueError, match="serves"):
        run(new.drop_version("db@1+int8"))
