"""Writes into the embedded Milvus Lite run one at a time (its engine does not guard its writers).

Concurrent upserts interleave Milvus Lite's write-ahead log, and an upsert that straddles a
flush lands in the log the flush deletes: the vectors stay searchable until the process dies
and are gone after a restart (tests/fault/test_sigkill_mid_write.py saw it under load). This
checks the cause directly: the engine never runs two writes, or a write and a flush, at once.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from milvus_lite.engine.collection import Collection

from memsvc.domain.models import MemoryFilter, MemoryKind, Namespace, RetentionStatus, Role, Tier
from memsvc.stores.records.sqlite import SqliteRecordStore
from memsvc.stores.vectors.base import VectorItem
from memsvc.stores.vectors.milvus import MilvusVectorIndex, connect_milvus
from tests.conftest import LoopThread
from tests.fault.support import MILVUS_LITE_WAL_LEAK

pytestmark = [pytest.mark.integration, *MILVUS_LITE_WAL_LEAK]

USERS = [Namespace("acme", "default", "development", f"user{i}") for i in range(2)]
DIMENSION = 8


class Overlap:
    """Counts the engine's writes and flushes running at the same time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.active = 0
        self.most = 0
        self.calls = 0

    def wrap(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.active += 1
                self.calls += 1
                self.most = max(self.most, self.active)
            try:
                time.sleep(0.002)  # widen the window a second writer would slip into
                return method(*args, **kwargs)
            finally:
                with self._lock:
                    self.active -= 1

        return wrapped


@pytest.fixture
def overlap(monkeypatch: pytest.MonkeyPatch) -> Overlap:
    seen = Overlap()
    monkeypatch.setattr(Collection, "_apply", seen.wrap(Collection._apply))
    monkeypatch.setattr(Collection, "_trigger_flush", seen.wrap(Collection._trigger_flush))
    return seen


@pytest.fixture
def store(loop_thread: LoopThread, tmp_path: Path) -> Iterator[SqliteRecordStore]:
    s = SqliteRecordStore(tmp_path / "records.db")
    loop_thread.run(s.migrate())
    yield s
    loop_thread.run(s.close())


def _item(memory_id: str, rng: np.random.Generator) -> VectorItem:
    return VectorItem(
        memory_id=memory_id,
        vector=rng.random(DIMENSION, dtype=np.float32),
        tier=Tier.HOT,
        tags=(),
        session_id="",
        role=Role.USER,
        kind=MemoryKind.FACT,
        retention_status=RetentionStatus.ACTIVE,
        created_at=time.time(),
    )


def test_concurrent_upserts_and_flushes_reach_the_engine_one_at_a_time(
    loop_thread: LoopThread, store: SqliteRecordStore, tmp_path: Path, overlap: Overlap
) -> None:
    index = MilvusVectorIndex(
        connect_milvus(str(tmp_path / "milvus.db")),
        embedding_version="test@1",
        dimension=DIMENSION,
        placement="partition",
        registry=store,
        flush_delay_s=0.0,  # a flush right behind every write, racing the next ones
    )
    rng = np.random.default_rng(7)
    batches = {
        (user, w, b): [_item(f"u{u}w{w}b{b}i{i}", rng) for i in range(6)]
        for u, user in enumerate(USERS)
        for w in range(4)
        for b in range(8)
    }

    async def writer(user: Namespace, w: int) -> None:
        for b in range(8):
            await index.upsert(user, batches[(user, w, b)])
            await index.search(user, batches[(user, w, b)][0].vector, 5, MemoryFilter())

    async def all_writers() -> None:
        await asyncio.gather(*(writer(user, w) for user in USERS for w in range(4)))

    try:
        loop_thread.run(all_writers())
        expected = sum(len(items) for (user, _, _), items in batches.items() if user == USERS[0])
        assert loop_thread.run(index.count(USERS[0])) == expected
    finally:
        loop_thread.run(index.close())
    assert overlap.calls >= len(batches)
    assert overlap.most == 1, f"{overlap.most} writes or flushes ran in the Milvus Lite engine at once"
