"""The VectorIndex contract, run over Milvus Lite in process and the C++ Milvus server alike."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from pymilvus import MilvusClient

from memsvc.domain.models import MemoryFilter, MemoryKind, Namespace, RetentionStatus, Role, Tier
from memsvc.stores.records.postgres import PostgresRecordStore
from memsvc.stores.records.sqlite import SqliteRecordStore
from memsvc.stores.vectors.base import VectorItem
from memsvc.stores.vectors.milvus import MilvusVectorIndex, connect_milvus
from tests.backends import fresh_schema
from tests.conftest import LoopThread
from tests.milvus_server import MilvusServer

pytestmark = pytest.mark.integration

DIM = 16
ALICE = Namespace("acme", "default", "development", "alice")
BOB = Namespace("acme", "default", "development", "bob")
IndexFactory = Callable[..., MilvusVectorIndex]


def item(
    memory_id: str, seed: int, tier: Tier = Tier.HOT, tags: tuple[str, ...] = (), session: str = "s1"
) -> VectorItem:
    vector = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return VectorItem(
        memory_id, vector, tier, tags, session, Role.USER, MemoryKind.FACT, RetentionStatus.ACTIVE, time.time()
    )


@pytest.fixture(params=["lite", "server"])
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def milvus_uri(engine: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if engine == "lite":
        return str(tmp_path / "milvus.db")
    server: MilvusServer = request.getfixturevalue("milvus_server")
    return server.uri


@pytest.fixture
def indexes(loop_thread: LoopThread, engine: str, milvus_uri: str, tmp_path: Path) -> Iterator[IndexFactory]:
    """Indexes sharing one placement registry (a SQLite record store), each with its own client."""
    store = SqliteRecordStore(tmp_path / "records.db")
    loop_thread.run(store.migrate())
    made: list[MilvusVectorIndex] = []

    def make(placement: str = "partition", **options: object) -> MilvusVectorIndex:
        index = MilvusVectorIndex(
            connect_milvus(milvus_uri),
            embedding_version="contract@1",
            dimension=DIM,
            placement=placement,
            registry=store,
            embedded=engine == "lite",
            flush_delay_s=0.2,
            **options,  # type: ignore[arg-type]
        )
        made.append(index)
        return index

    yield make
    for index in made:
        loop_thread.run(index.close())
    loop_thread.run(store.close())


def ids(hits: list[object]) -> list[str]:
    return [h.memory_id for h in hits]  # type: ignore[attr-defined]


@pytest.mark.parametrize("placement", ["partition", "partition_key"])
def test_a_write_is_searchable_counted_and_isolated(
    loop_thread: LoopThread, indexes: IndexFactory, placement: str
) -> None:
    index = indexes(placement)
    a1, a2, b1 = item("a1", 1), item("a2", 2, tier=Tier.COLD, tags=("travel",)), item("b1", 3)
    loop_thread.run(index.upsert(ALICE, [a1, a2]))
    loop_thread.run(index.upsert(BOB, [b1]))
    best = loop_thread.run(index.search(ALICE, a1.vector, 1, MemoryFilter()))
    assert ids(best) == ["a1"] and best[0].similarity == pytest.approx(1.0, abs=1e-4)  # cosine of itself
    assert set(ids(loop_thread.run(index.search(ALICE, b1.vector, 10, MemoryFilter())))) == {"a1", "a2"}
    assert ids(loop_thread.run(index.search(BOB, a1.vector, 10, MemoryFilter()))) == ["b1"]
    assert ids(loop_thread.run(index.search(ALICE, a1.vector, 10, MemoryFilter(tags_any=("travel",))))) == ["a2"]
    assert loop_thread.run(index.search(ALICE, a1.vector, 10, MemoryFilter(tags_any=("none",)))) == []
    assert loop_thread.run(index.count(ALICE)) == 2
    stored = loop_thread.run(index.vectors(ALICE, ["a1", "b1"]))
    assert set(stored) == {"a1"}
    assert np.allclose(stored["a1"], a1.vector, atol=1e-5)


def test_a_search_within_sessions_finds_only_their_memories(loop_thread: LoopThread, indexes: IndexFactory) -> None:
    index = indexes()
    items = [item("a1", 1, session="chat"), item("a2", 2, session="other"), item("a3", 3, session="")]
    items.append(item("a4", 4, session="third"))
    loop_thread.run(index.upsert(ALICE, items))
    within = MemoryFilter(session_ids=("chat", ""))
    assert set(ids(loop_thread.run(index.search(ALICE, items[1].vector, 10, within)))) == {"a1", "a3"}
    # With the caller's own session filter, both must hold.
    both = MemoryFilter(session_id="chat", session_ids=("chat", "other"))
    assert ids(loop_thread.run(index.search(ALICE, items[1].vector, 10, both))) == ["a1"]
    assert loop_thread.run(index.search(ALICE, items[1].vector, 10, MemoryFilter(session_ids=("none",)))) == []


@pytest.mark.parametrize("placement", ["partition", "partition_key"])
def test_a_memory_indexed_again_after_each_seal_is_counted_once(
    loop_thread: LoopThread, indexes: IndexFactory, placement: str
) -> None:
    # A memory's vector is written again whenever its status or tier changes; a server's upsert
    # leaves the replaced row in its sealed segment until compaction.
    index = indexes(placement)
    for _ in range(3):
        loop_thread.run(index.upsert(ALICE, [item("a1", 1), item("a2", 2), item("a3", 3)]))
        for name in index.client.list_collections():
            index.client.flush(name)
    loop_thread.run(index.upsert(BOB, [item("b1", 4)]))
    assert loop_thread.run(index.count(ALICE)) == 3
    assert loop_thread.run(index.count(BOB)) == 1


@pytest.mark.parametrize("placement", ["partition", "partition_key"])
def test_delete_and_drop_namespace_remove_only_their_own(
    loop_thread: LoopThread, indexes: IndexFactory, placement: str
) -> None:
    index = indexes(placement)
    loop_thread.run(index.upsert(ALICE, [item("a1", 1), item("a2", 2)]))
    loop_thread.run(index.upsert(BOB, [item("b1", 3)]))
    loop_thread.run(index.delete(ALICE, ["a1"]))
    assert ids(loop_thread.run(index.search(ALICE, item("a1", 1).vector, 10, MemoryFilter()))) == ["a2"]
    loop_thread.run(index.drop_namespace(ALICE))
    assert loop_thread.run(index.search(ALICE, item("a2", 2).vector, 10, MemoryFilter())) == []
    assert ids(loop_thread.run(index.search(BOB, item("b1", 3).vector, 10, MemoryFilter()))) == ["b1"]


def _read_after_write_misses(
    loop_thread: LoopThread,
    writer: MilvusVectorIndex,
    reader: MilvusVectorIndex,
    writers: int,
    tries: int,
    new_users: bool,
) -> int:
    """Concurrent writers each add through `writer` and at once search through `reader`; with
    `new_users` every write is a new user's first (a partition created just before)."""

    async def one_writer(w: int) -> int:
        misses = 0
        for i in range(tries):
            user = Namespace("acme", "default", "development", f"raw-{w}-{i}" if new_users else f"raw-{w}")
            fresh = item(f"w{w}-{i}", 1000 * w + i)
            await writer.upsert(user, [fresh])
            hits = await reader.search(user, fresh.vector, 1, MemoryFilter())
            misses += ids(hits) != [fresh.memory_id]
        return misses

    async def run() -> int:
        return sum(await asyncio.gather(*(one_writer(w) for w in range(writers))))

    return loop_thread.run(run())


# Set to "0" to run the same test on plain Bounded searches and watch it fail.
READ_YOUR_WRITES = os.environ.get("MEMSVC_TEST_READ_YOUR_WRITES", "1") == "1"
RAW_TRIES = int(os.environ.get("MEMSVC_TEST_RAW_TRIES", "25"))


@pytest.mark.parametrize("new_users", [False, True], ids=["same-users", "first-writes"])
def test_read_after_write_across_replicas_on_the_server(
    loop_thread: LoopThread, milvus_server: MilvusServer, new_users: bool
) -> None:
    """Replica A acknowledges a write; replica B's next search for that user sees it (not Strong).

    First writes: Milvus 2.3.5 acknowledged a new partition before its proxy knew it, so a new
    user's first write failed ("partition not found") and was only indexed by the reconciler.
    """
    with fresh_schema() as url:
        store = PostgresRecordStore(url)
        loop_thread.run(store.migrate())

        def replica() -> MilvusVectorIndex:
            return MilvusVectorIndex(
                connect_milvus(milvus_server.uri),
                embedding_version="raw@1",
                dimension=DIM,
                placement="partition",
                registry=store,
                embedded=False,
                flush_delay_s=0.2,
                read_your_writes=READ_YOUR_WRITES,
            )

        a, b = replica(), replica()
        try:
            writers = 4
            misses = _read_after_write_misses(loop_thread, a, b, writers, RAW_TRIES, new_users)
            assert misses == 0, f"{misses} of {writers * RAW_TRIES} searches missed the write just acknowledged"
        finally:
            loop_thread.run(a.close())
            loop_thread.run(b.close())
            loop_thread.run(store.close())


def test_searches_started_together_find_what_each_finds_alone(loop_thread: LoopThread, indexes: IndexFactory) -> None:
    # A mode's sub-queries search at once and go to Milvus as one call of several vectors.
    index = indexes()
    items = [item(f"m{i}", i, tier=Tier.COLD if i % 3 == 0 else Tier.HOT) for i in range(30)]
    loop_thread.run(index.upsert(ALICE, items))
    loop_thread.run(index.upsert(BOB, [item("b1", 99)]))
    asks = [
        (ALICE, items[0].vector, 5, MemoryFilter()),
        (ALICE, items[1].vector, 5, MemoryFilter()),
        (ALICE, items[2].vector, 5, MemoryFilter(tier=Tier.COLD)),
        (BOB, items[3].vector, 5, MemoryFilter()),
        (ALICE, items[4].vector, 3, MemoryFilter()),
        (ALICE, items[5].vector, 5, MemoryFilter()),
    ]
    alone = [ids(loop_thread.run(index.search(*ask))) for ask in asks]

    async def together() -> list[list[str]]:
        return [ids(hits) for hits in await asyncio.gather(*(index.search(*ask) for ask in asks))]

    assert loop_thread.run(together()) == alone
    assert alone[0][0] == "m0" and alone[3] == ["b1"] and len(alone[4]) == 3
    assert all(h.startswith("m") and int(h[1:]) % 3 == 0 for h in alone[2])


@pytest.mark.parametrize("engine", ["server"], indirect=True)
def test_the_server_seals_a_collection_some_time_after_its_writes(
    loop_thread: LoopThread, indexes: IndexFactory, milvus_uri: str
) -> None:
    """A user's partition is far below what Milvus seals on its own (16 MB idle, or a day), and a
    growing segment costs every search more: the index seals it `seal_delay_s` after a write.
    `get_collection_stats` counts only sealed, persisted rows."""
    lazy, sealing = indexes(), indexes(placement="partition_key", seal_delay_s=0.3)
    loop_thread.run(lazy.upsert(ALICE, [item("a1", 1)]))
    loop_thread.run(sealing.upsert(ALICE, [item("a1", 1), item("a2", 2)]))
    sealed, unsealed = loop_thread.run(sealing.location(ALICE)), loop_thread.run(lazy.location(ALICE))
    assert sealed is not None and unsealed is not None and sealed.collection != unsealed.collection
    client = MilvusClient(uri=milvus_uri)
    try:
        deadline = time.monotonic() + 60
        while client.get_collection_stats(sealed.collection)["row_count"] < 2:
            assert time.monotonic() < deadline, "the written segment was never sealed"
            time.sleep(0.5)
        assert client.get_collection_stats(unsealed.collection)["row_count"] == 0
    finally:
        client.close()
    # Sealed rows answer searches as before.
    assert ids(loop_thread.run(sealing.search(ALICE, item("a2", 2).vector, 1, MemoryFilter()))) == ["a2"]
