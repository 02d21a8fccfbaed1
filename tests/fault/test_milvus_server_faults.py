"""The C++ Milvus server killed or frozen under a memsvc server: writes acknowledged, nothing lost.

Both tests use the session's shared `milvus-server`: the kill test restarts it in place (same
data directory, same ports), the freeze test resumes it, so the tests after them find it as
before (the `milvus_server` fixture also restarts or resumes one a failed test left behind).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import grpc
import pytest
from pymilvus import MilvusClient

from tests.conftest import RunningServer, ServerFactory
from tests.fault.support import add, namespace, query, wait_until
from tests.milvus_server import MilvusServer

pytestmark = pytest.mark.e2e

USERS = ("lena", "milo", "nora")
# Each content carries a token of its own, so a query by content has one right answer.
WORDS = ["zanzibar", "quokka", "mandolin", "fjord", "origami", "tamarind", "zeppelin", "saffron", "yodel", "kumquat"]


def content_of(writer: int, i: int) -> str:
    user = USERS[writer % len(USERS)]
    return f"{user} keeps a {WORDS[i % len(WORDS)]} souvenir marked w{writer}n{i} from the trip"


@dataclass
class Ledger:
    """What the writers had acknowledged (memory id -> (user, content)), and any write refused."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    acknowledged: dict[str, tuple[str, str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        with self.lock:
            return len(self.acknowledged)


def write_until(s: RunningServer, writer: int, ledger: Ledger, stop: threading.Event) -> None:
    user = USERS[writer % len(USERS)]
    i = 0
    while not stop.is_set():
        content = content_of(writer, i)
        try:
            (memory,) = add(s, user, content, timeout_s=60)
        except grpc.RpcError as error:
            with ledger.lock:
                ledger.errors.append(f"{error.code()}: {error.details()}")  # type: ignore[attr-defined]
            return
        with ledger.lock:
            ledger.acknowledged[memory.id] = (user, content)
        i += 1


def server_vector_ids(uri: str) -> list[str]:
    """Every vector id in every collection of the server (a list: a duplicate would show)."""
    client = MilvusClient(uri=uri)
    try:
        ids: list[str] = []
        for name in client.list_collections():
            client.load_collection(name)
            rows = client.query(name, filter='id != ""', output_fields=["id"], limit=16384, consistency_level="Strong")
            ids += [str(r["id"]) for r in rows]
        return ids
    finally:
        client.close()


def fault_server(server_factory: ServerFactory, milvus: MilvusServer, **overrides: object) -> RunningServer:
    return server_factory(
        milvus_uri=milvus.uri,
        reconcile_interval_s=0.3,
        reconcile_min_age_s=0.0,
        milvus_reconnect_backoff_s=0.2,
        milvus_reconnect_backoff_max_s=1.0,
        readiness_interval_s=0.3,
        **overrides,
    )


def assert_all_indexed_and_found(
    s: RunningServer, milvus: MilvusServer, acknowledged: dict[str, tuple[str, str]]
) -> None:
    wait_until(lambda: s.run(s.components.store.count_pending_index()) == 0, 180, "rows re-indexed", every_s=0.3)
    # One vector per acknowledged write, none lost by the kill, none twice, none that nobody wrote.
    # Read without a deadline first: a server just restarted may take a while to serve Strong reads.
    ids = server_vector_ids(milvus.uri)
    assert sorted(ids) == sorted(acknowledged), (
        f"vectors without a write: {set(ids) - set(acknowledged)}; writes without a vector: "
        f"{set(acknowledged) - set(ids)}; duplicates: {len(ids) - len(set(ids))}"
    )
    for user in USERS:
        mine = [i for i, (u, _) in acknowledged.items() if u == user]
        assert s.run(s.components.index.count(namespace(user))) == len(mine), user
    for memory_id, (user, content) in acknowledged.items():
        reply = query(s, user, content, limit=5)
        assert not reply.report.degraded, reply.report.notes
        assert memory_id in [r.memory.id for r in reply.memories], f"acknowledged write not found: {content}"


@pytest.mark.slow  # about 100 s: the restart alone takes 30-90 s on a busy machine
def test_a_milvus_server_killed_mid_write_stream_loses_no_acknowledged_write(
    server_factory: ServerFactory, milvus_server: MilvusServer
) -> None:
    """SIGKILL the server while writers stream AddMemories, restart it on its data directory."""
    s = fault_server(server_factory, milvus_server)
    ledger, stop = Ledger(), threading.Event()
    writers = [threading.Thread(target=write_until, args=(s, w, ledger, stop), daemon=True) for w in range(3)]
    for thread in writers:
        thread.start()
    try:
        wait_until(lambda: ledger.count >= 15, 120, "15 writes acknowledged before the kill", every_s=0.05)
        milvus_server.kill()  # writes are in flight: some reached Milvus, some were on their way
        at_kill = ledger.count
        wait_until(lambda: ledger.count >= at_kill + 15, 120, "15 writes acknowledged while Milvus is dead")
        with ledger.lock:
            memory_id, (user, content) = next(reversed(ledger.acknowledged.items()))
        reply = query(s, user, content, limit=5)
        assert reply.report.degraded and memory_id in [r.memory.id for r in reply.memories]
        milvus_server.restart()  # same data directory, same ports: the same URI for memsvc
        at_restart = ledger.count
        wait_until(lambda: ledger.count >= at_restart + 15, 180, "15 writes acknowledged after the restart")
    finally:
        stop.set()
        for thread in writers:
            thread.join(90)
    assert ledger.errors == [], ledger.errors[:3]
    assert_all_indexed_and_found(s, milvus_server, ledger.acknowledged)


def test_a_frozen_milvus_server_degrades_queries_in_time_and_still_acknowledges_writes(
    server_factory: ServerFactory, milvus_server: MilvusServer
) -> None:
    """SIGSTOP the server: each call gives up after the call timeout; after SIGCONT all is reconciled."""
    s = fault_server(server_factory, milvus_server, milvus_call_timeout_s=1.0)
    acknowledged = {m.id: ("lena", m.content) for m in add(s, "lena", content_of(0, 0))}
    milvus_server.pause()
    try:
        for i in range(1, 6):
            for user_index, user in enumerate(USERS):
                content = content_of(user_index, i)
                (memory,) = add(s, user, content, timeout_s=15)
                acknowledged[memory.id] = (user, content)
        for user_index, user in enumerate(USERS):
            started = time.monotonic()
            reply = query(s, user, content_of(user_index, 3), timeout_s=15)
            assert time.monotonic() - started < 15
            assert reply.report.degraded
            assert any("dense" in note and "unavailable" in note for note in reply.report.notes), reply.report.notes
            assert reply.memories[0].memory.content == content_of(user_index, 3)
            assert {r.memory.user_id for r in reply.memories} == {user}
    finally:
        milvus_server.resume()
    assert_all_indexed_and_found(s, milvus_server, acknowledged)
