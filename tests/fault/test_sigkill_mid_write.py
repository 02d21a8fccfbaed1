"""SIGKILL in the middle of a stream of batch writes, then a restart on the same data dir."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from pymilvus import MilvusClient

from memsvc.v1 import memory_pb2, query_service_pb2, query_service_pb2_grpc, write_service_pb2, write_service_pb2_grpc
from tests.e2e.processes import Replica
from tests.fault.support import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

WRITERS = 4
BATCH = 6
USERS = ("ana", "ben", "chloe", "dev")
EVERYTHING = memory_pb2.MemoryFilter(min_importance=0.0, include_inactive=True)


@dataclass
class Ledger:
    """What the writers sent, and what the server acknowledged (memory id per content)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    acknowledged: dict[str, tuple[str, str]] = field(default_factory=dict)  # content -> (user, id)
    unacknowledged: list[tuple[str, list[str]]] = field(default_factory=list)  # (user, batch contents)

    @property
    def count(self) -> int:
        with self.lock:
            return len(self.acknowledged)


def content_of(writer: int, batch: int, item: int, user: str) -> str:
    return f"{user} wrote note w{writer}b{batch}i{item} about topic{writer * 1000 + batch * 10 + item}"


def write_until_killed(address: str, md: tuple[tuple[str, str]], writer: int, ledger: Ledger) -> None:
    with grpc.insecure_channel(address) as channel:
        writes = write_service_pb2_grpc.WriteServiceStub(channel)
        batch = 0
        while True:
            user = USERS[(writer + batch) % len(USERS)]
            contents = [content_of(writer, batch, i, user) for i in range(BATCH)]
            request = write_service_pb2.AddMemoriesRequest(
                user_id=user,
                memories=[
                    write_service_pb2.NewMemory(content=c, idempotency_key=f"w{writer}b{batch}i{i}")
                    for i, c in enumerate(contents)
                ],
            )
            try:
                reply = writes.AddMemories(request, metadata=md, timeout=20)
            except grpc.RpcError:
                with ledger.lock:
                    ledger.unacknowledged.append((user, contents))
                return  # the server is gone
            with ledger.lock:
                for memory in reply.memories:
                    ledger.acknowledged[memory.content] = (user, memory.id)
            batch += 1


def sqlite_counts(db: Path) -> tuple[int, int, int]:
    """(rows, rows without usable ciphertext, rows not yet indexed) in the record store."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0]
        bad = conn.execute(
            "SELECT COUNT(*) FROM memories WHERE ciphertext IS NULL OR length(ciphertext) < 28"
        ).fetchone()[0]
        pending = conn.execute("SELECT COUNT(*) FROM memories WHERE indexed = 0").fetchone()[0]
    return int(rows), int(bad), int(pending)


def listed(writes: write_service_pb2_grpc.WriteServiceStub, md: tuple[tuple[str, str]], user: str) -> dict[str, str]:
    """Every memory of a user (content -> id), through the API: each row decrypts or the call fails."""
    out: dict[str, str] = {}
    token = ""
    while True:
        request = write_service_pb2.ListMemoriesRequest(
            user_id=user, filter=EVERYTHING, page_size=200, page_token=token
        )
        reply = writes.ListMemories(request, metadata=md, timeout=30)
        out.update({m.content: m.id for m in reply.memories})
        token = reply.next_page_token
        if not token:
            return out


def milvus_ids(db_path: Path) -> set[str]:
    client = MilvusClient(uri=str(db_path))
    try:
        ids: set[str] = set()
        for name in client.list_collections():
            client.load_collection(name)
            rows = client.query(name, filter='id != ""', output_fields=["id"], limit=16384, consistency_level="Strong")
            ids |= {str(r["id"]) for r in rows}
        return ids
    finally:
        client.close()


def test_sigkill_mid_stream_loses_no_acknowledged_write_and_half_writes_nothing(tmp_path: Path) -> None:
    env = {
        "MEMSVC_RECONCILE_INTERVAL_S": "0.5",
        "MEMSVC_RECONCILE_MIN_AGE_S": "0",
        "MEMSVC_INDEX_FLUSH_DELAY_S": "0.2",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    replica = Replica("killed", tmp_path, env).start(timeout_s=180)
    data_dir = tmp_path / "killed"
    key = (data_dir / "dev-api-key").read_text().strip()
    md = (("authorization", f"Bearer {key}"),)
    ledger = Ledger()
    writers = [
        threading.Thread(target=write_until_killed, args=(replica.address, md, w, ledger), daemon=True)
        for w in range(WRITERS)
    ]
    for thread in writers:
        thread.start()
    try:
        wait_until(lambda: ledger.count >= 120, 120, "120 acknowledged writes", every_s=0.05)
        assert replica.process is not None
        os.kill(replica.process.pid, signal.SIGKILL)  # mid-stream: other batches are in flight
        replica.process.wait(10)
    finally:
        for thread in writers:
            thread.join(30)
    replica.stop()
    assert ledger.unacknowledged, "some batches were in flight when the server died"

    replica = Replica("killed", tmp_path, env).start(timeout_s=180)  # same name: same data dir
    try:
        assert replica.channel is not None
        writes = write_service_pb2_grpc.WriteServiceStub(replica.channel)
        queries = query_service_pb2_grpc.QueryServiceStub(replica.channel)
        db = data_dir / "memsvc.db"
        wait_until(lambda: sqlite_counts(db)[2] == 0, 120, "the reconciler indexes every row")
        rows, bad, _ = sqlite_counts(db)
        assert bad == 0, f"{bad} rows without a ciphertext"

        stored: dict[str, dict[str, str]] = {user: listed(writes, md, user) for user in USERS}
        assert sum(len(m) for m in stored.values()) == rows, "every row decrypts through the API"
        # Every acknowledged write is present, intact and found by a query for its content.
        for content, (user, memory_id) in ledger.acknowledged.items():
            assert stored[user].get(content) == memory_id, f"acknowledged write lost: {content}"
            got = writes.GetMemory(write_service_pb2.GetMemoryRequest(user_id=user, id=memory_id), metadata=md)
            assert got.memory.content == content
            request = query_service_pb2.QueryRequest(
                user_id=user, query=content, limit=5, filter=EVERYTHING, skip_cache=True
            )
            found = [r.memory.id for r in queries.Query(request, metadata=md, timeout=30).memories]
            assert memory_id in found, f"acknowledged write not queryable: {content}"
        # A batch in flight at the kill is all there or all absent (one transaction), never in part.
        for user, contents in ledger.unacknowledged:
            present = [c in stored[user] for c in contents]
            assert all(present) or not any(present), f"half-written batch: {present}"
        # Nothing stored that nobody sent.
        sent = set(ledger.acknowledged) | {c for _, batch in ledger.unacknowledged for c in batch}
        assert {c for m in stored.values() for c in m} <= sent
        row_ids = {memory_id for m in stored.values() for memory_id in m.values()}
    finally:
        replica.stop()
    # With the server stopped, the index itself: a vector for every row, none without one.
    vector_ids = milvus_ids(data_dir / "milvus.db")
    assert vector_ids == row_ids, (
        f"vectors without rows: {vector_ids - row_ids}; rows without vectors: {row_ids - vector_ids}"
    )
