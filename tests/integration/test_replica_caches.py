"""What one replica caches must not outlive another replica's ForgetUser: data keys, partitions."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from memsvc.crypto.envelope import EnvelopeCipher
from memsvc.crypto.keyring import MasterKeyRing, new_key_b64
from memsvc.domain.models import MemoryFilter, MemoryKind, Namespace, RetentionStatus, Role, Tier
from memsvc.stores.records.sqlite import SqliteRecordStore
from memsvc.stores.vectors.base import VectorItem
from memsvc.stores.vectors.milvus import MilvusVectorIndex, connect_milvus
from tests.conftest import LoopThread

pytestmark = pytest.mark.integration

CAROL = Namespace("acme", "default", "development", "carol")


@pytest.fixture
def store(loop_thread: LoopThread, tmp_path: Path) -> Iterator[SqliteRecordStore]:
    s = SqliteRecordStore(tmp_path / "records.db")
    loop_thread.run(s.migrate())
    yield s
    loop_thread.run(s.close())


def test_a_replica_never_seals_with_a_key_another_replica_destroyed(
    loop_thread: LoopThread, store: SqliteRecordStore
) -> None:
    ring = MasterKeyRing.parse(f"1:{new_key_b64()}")
    a, b = EnvelopeCipher(ring, store), EnvelopeCipher(ring, store)

    async def scenario() -> None:
        # Each block runs in its own task, as each RPC does.
        old = await loop_thread.loop.create_task(b.seal(CAROL, "m1", b"old secret"))
        assert await a.open(CAROL, "m1", old) == b"old secret"
        await store.forget_namespace(CAROL)  # replica A forgets carol ...
        a.forget(CAROL)
        # ... and B, whose cache still holds carol's old key, writes for her again at once.
        new = await loop_thread.loop.create_task(b.seal(CAROL, "m2", b"new secret"))
        assert await a.open(CAROL, "m2", new) == b"new secret"
        assert await b.open(CAROL, "m2", new) == b"new secret"

    loop_thread.run(scenario())


def test_a_replica_opens_what_another_sealed_under_a_recreated_key(
    loop_thread: LoopThread, store: SqliteRecordStore
) -> None:
    ring = MasterKeyRing.parse(f"1:{new_key_b64()}")
    a, b = EnvelopeCipher(ring, store), EnvelopeCipher(ring, store)

    async def scenario() -> None:
        old = await b.seal(CAROL, "m1", b"old")
        assert await b.open(CAROL, "m1", old) == b"old"
        await store.forget_namespace(CAROL)
        a.forget(CAROL)
        new = await loop_thread.loop.create_task(a.seal(CAROL, "m2", b"new"))  # version 1 again, new bytes
        assert await b.open(CAROL, "m2", new) == b"new"

    loop_thread.run(scenario())


def _item(memory_id: str, seed: int) -> VectorItem:
    vector = np.random.default_rng(seed).standard_normal(8).astype(np.float32)
    return VectorItem(
        memory_id, vector, Tier.HOT, (), "", Role.USER, MemoryKind.FACT, RetentionStatus.ACTIVE, time.time()
    )


def test_an_upsert_recovers_after_another_replica_dropped_the_partition(
    loop_thread: LoopThread, store: SqliteRecordStore, tmp_path: Path
) -> None:
    uri = str(tmp_path / "milvus.db")

    def index() -> MilvusVectorIndex:
        # Two clients of the same Lite file in one process share its server, as replicas share Milvus.
        return MilvusVectorIndex(
            connect_milvus(uri), embedding_version="test@1", dimension=8, placement="partition", registry=store
        )

    a, b = index(), index()
    try:
        item = _item("m1", 1)
        loop_thread.run(b.upsert(CAROL, [item]))
        assert [h.memory_id for h in loop_thread.run(b.search(CAROL, item.vector, 5, MemoryFilter()))] == ["m1"]
        loop_thread.run(a.drop_namespace(CAROL))
        # B still believes the partition exists: a search finds nothing, an upsert recreates it.
        assert loop_thread.run(b.search(CAROL, item.vector, 5, MemoryFilter())) == []
        fresh = _item("m2", 2)
        loop_thread.run(b.upsert(CAROL, [fresh]))
        hits = loop_thread.run(a.search(CAROL, fresh.vector, 5, MemoryFilter()))
        assert [h.memory_id for h in hits] == ["m2"]
    finally:
        loop_thread.run(a.close())
        loop_thread.run(b.close())
