"""SIGKILL while sessions are being ingested, then a restart: every turn derived from, none lost."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest

from memsvc.v1 import memory_pb2, query_service_pb2, write_service_pb2, write_service_pb2_grpc
from tests.e2e.processes import Replica
from tests.fault.support import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

WRITERS = 3
TURNS = 8
USERS = ("ana", "ben", "chloe")


@dataclass
class Sessions:
    """Sessions the writers sent, acknowledged or not: (user, session id) -> turn contents."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    acknowledged: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    unacknowledged: dict[tuple[str, str], list[str]] = field(default_factory=dict)


def turns_of(writer: int, n: int) -> list[str]:
    pet = f"Rex{writer}x{n}"
    lines = [
        f"I adopted a greyhound named {pet} from the shelter in Porto.",
        f"I love walking {pet} along the river every morning.",
        "haha yes",
        f"I'm planning to take {pet} to the beach in Nazare next month.",
    ]
    return [lines[i % len(lines)] + ("" if i < len(lines) else f" (again {i})") for i in range(TURNS)]


def ingest_until_killed(address: str, md: tuple[tuple[str, str]], writer: int, sessions: Sessions) -> None:
    with grpc.insecure_channel(address) as channel:
        writes = write_service_pb2_grpc.WriteServiceStub(channel)
        n = 0
        while True:
            user = USERS[(writer + n) % len(USERS)]
            session = f"w{writer}s{n}"
            contents = turns_of(writer, n)
            request = write_service_pb2.AddConversationRequest(
                user_id=user,
                session_id=session,
                turns=[query_service_pb2.ConversationTurn(content=c, name=user.title()) for c in contents],
            )
            try:
                writes.AddConversation(request, metadata=md, timeout=30)
            except grpc.RpcError:
                with sessions.lock:
                    sessions.unacknowledged[(user, session)] = contents
                return  # the server is gone
            with sessions.lock:
                sessions.acknowledged[(user, session)] = contents
            n += 1


def outstanding(db: Path) -> int:
    """Rows still waiting for their vector or their extraction."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        row = conn.execute("SELECT COUNT(*) FROM memories WHERE indexed = 0 OR extraction_pending = 1").fetchone()
    return int(row[0])


def test_sigkill_mid_ingestion_loses_no_turn_and_leaves_none_underived(tmp_path: Path) -> None:
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
    sessions = Sessions()
    writers = [
        threading.Thread(target=ingest_until_killed, args=(replica.address, md, w, sessions), daemon=True)
        for w in range(WRITERS)
    ]
    for thread in writers:
        thread.start()
    try:
        wait_until(lambda: len(sessions.acknowledged) >= 12, 180, "12 acknowledged sessions", every_s=0.05)
        assert replica.process is not None
        os.kill(replica.process.pid, signal.SIGKILL)  # other sessions are in flight
        replica.process.wait(10)
    finally:
        for thread in writers:
            thread.join(60)
    replica.stop()
    assert sessions.unacknowledged, "some sessions were in flight when the server died"

    replica = Replica("killed", tmp_path, env).start(timeout_s=180)  # same data dir
    try:
        assert replica.channel is not None
        writes = write_service_pb2_grpc.WriteServiceStub(replica.channel)
        wait_until(lambda: outstanding(data_dir / "memsvc.db") == 0, 180, "every turn indexed and derived from")
        for user in USERS:
            memories = listed_memories(writes, md, user)
            turns = {
                (m.session_id, m.content)
                for m in memories
                if m.kind == memory_pb2.MEMORY_KIND_EPISODE and not m.source_memory_ids
            }
            summaries = {m.session_id for m in memories if m.kind == memory_pb2.MEMORY_KIND_SUMMARY}
            derived_sessions = {
                m.session_id for m in memories if m.source_memory_ids and m.kind != memory_pb2.MEMORY_KIND_SUMMARY
            }
            sent = {**sessions.acknowledged, **sessions.unacknowledged}
            for (owner, session), contents in sent.items():
                if owner != user:
                    continue
                present = [(session, c) in turns for c in contents]
                if (owner, session) in sessions.acknowledged:
                    assert all(present), f"acknowledged turns lost in {session}: {present}"
                assert all(present) or not any(present), f"half-written session {session}: {present}"
                if any(present):  # stored turns always get their summary and extracted memories
                    assert session in summaries, f"session {session} has no summary"
                    assert session in derived_sessions, f"nothing extracted from session {session}"
            assert {s for s, _ in turns} <= {s for (u, s) in sent if u == user}
    finally:
        replica.stop()


def listed_memories(
    writes: write_service_pb2_grpc.WriteServiceStub, md: tuple[tuple[str, str]], user: str
) -> list[memory_pb2.Memory]:
    out: list[memory_pb2.Memory] = []
    token = ""
    everything = memory_pb2.MemoryFilter(min_importance=0.0, include_inactive=True)
    while True:
        request = write_service_pb2.ListMemoriesRequest(
            user_id=user, filter=everything, page_size=200, page_token=token
        )
        reply = writes.ListMemories(request, metadata=md, timeout=30)
        out += list(reply.memories)
        token = reply.next_page_token
        if not token:
            return out
