"""Vector index down during writes: writes acknowledged, queries degraded, nothing lost after."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc.errors import Unavailable
from tests.conftest import RunningServer, ServerFactory
from tests.e2e.processes import MilvusLiteServer
from tests.fault.support import (
    MILVUS_LITE_WAL_LEAK,
    LiteIndexOutage,
    add,
    failure,
    namespace,
    query,
    retry_delay_s,
    wait_until,
)

pytestmark = [pytest.mark.e2e, *MILVUS_LITE_WAL_LEAK]

# Each content carries a rare word of its own, so a query by content has one right answer.
WORDS = ["zanzibar", "quokka", "mandolin", "fjord", "origami", "tamarind", "zeppelin", "saffron", "yodel", "kumquat"]


def fact(user: str, i: int) -> str:
    return f"{user} keeps a {WORDS[i % len(WORDS)]} souvenir number {i} from the trip"


def outage_server(server_factory: ServerFactory, **overrides: object) -> tuple[RunningServer, LiteIndexOutage]:
    s = server_factory(
        reconcile_interval_s=0.3,
        reconcile_min_age_s=0.0,
        milvus_reconnect_backoff_s=0.2,
        milvus_reconnect_backoff_max_s=0.5,
        readiness_interval_s=0.3,
        **overrides,
    )
    return s, LiteIndexOutage(s.components.index, s.components.settings.data_dir / "milvus.db")


def readiness(s: RunningServer) -> int:
    request = health_pb2.HealthCheckRequest(service="memsvc.v1.QueryService")
    return int(health_pb2_grpc.HealthStub(s.channel).Check(request, timeout=5).status)


def found(s: RunningServer, user: str, content: str, memory_id: str) -> bool:
    return memory_id in [r.memory.id for r in query(s, user, content, limit=5).memories]


def test_writes_survive_an_index_outage_and_the_reconciler_restores_every_vector(
    server_factory: ServerFactory,
) -> None:
    s, outage = outage_server(server_factory)
    before = {m.id: m.content for m in add(s, "ines", *(fact("ines", i) for i in range(3)))}
    assert not query(s, "ines", fact("ines", 0)).report.degraded

    outage.start()
    try:
        acknowledged = dict(before)
        for user in ("ines", "omar"):
            for i in range(3, 9):
                (memory,) = add(s, user, fact(user, i))  # acknowledged from the record store alone
                acknowledged[memory.id] = memory.content
        assert s.run(s.components.store.count_pending_index()) >= 12, "rows written while down await the index"

        # Queries degrade to the lexical channel, say so, and still find what was written.
        target_id = next(i for i, c in acknowledged.items() if c == fact("omar", 7))
        reply = query(s, "omar", fact("omar", 7))
        assert reply.report.degraded
        assert any("dense" in note and "unavailable" in note for note in reply.report.notes), reply.report.notes
        assert reply.memories and reply.memories[0].memory.id == target_id
        assert {r.memory.user_id for r in reply.memories} == {"omar"}
        # The replica stays in its Service: it still serves, degraded (readiness follows the store).
        time.sleep(1.0)
        assert readiness(s) == health_pb2.HealthCheckResponse.SERVING
    finally:
        outage.restore()

    # Back: the reconciler re-indexes every row written during the outage.
    wait_until(lambda: s.run(s.components.store.count_pending_index()) == 0, 30, "rows re-indexed")
    for user in ("ines", "omar"):
        mine = [i for i, c in acknowledged.items() if c.startswith(user)]
        assert s.run(s.components.index.count(namespace(user))) == len(mine)
    missing = [c for i, c in acknowledged.items() if not found(s, c.split()[0], c, i)]
    assert missing == [], f"acknowledged writes not found after recovery: {missing}"
    reply = query(s, "omar", fact("omar", 4))
    assert not reply.report.degraded and reply.report.notes == []
    assert reply.memories[0].score_breakdown.semantic > 0.5, "the dense channel answers again"


def test_without_a_lexical_channel_an_index_outage_is_unavailable_with_retry_info(
    server_factory: ServerFactory,
) -> None:
    s, outage = outage_server(server_factory, lexical_enabled=False)
    add(s, "pia", fact("pia", 0))
    outage.start()
    try:
        (memory,) = add(s, "pia", fact("pia", 1))  # writes still acknowledged
        error = failure(lambda: query(s, "pia", fact("pia", 1)))
        assert error.code() == grpc.StatusCode.UNAVAILABLE
        delay = retry_delay_s(error)
        assert delay is not None and delay > 0, "UNAVAILABLE carries RetryInfo"
    finally:
        outage.restore()
    wait_until(lambda: s.run(s.components.store.count_pending_index()) == 0, 30, "rows re-indexed")
    assert found(s, "pia", fact("pia", 1), memory.id)


def test_a_killed_milvus_server_process_is_reconnected_and_reconciled(
    server_factory: ServerFactory, tmp_path: Path
) -> None:
    """The index as its own process (as Milvus is in production): SIGKILL it, restart it later."""
    milvus = MilvusLiteServer(tmp_path / "milvus-server").start()
    try:
        # The reconciler leaves rows younger than its minimum age to the write indexing them, as
        # in production (5 s). At 0 it re-upserted the first memory while the write path did:
        # the `milvus-lite server` process does not serialise concurrent writers, their records
        # interleaved in its write-ahead log, and after the SIGKILL its recovery stopped at that
        # torn first batch ("Offset invariant failure"), losing an acknowledged vector (one
        # clean-clone CI run).
        s = server_factory(
            milvus_uri=milvus.uri,
            reconcile_interval_s=0.3,
            reconcile_min_age_s=1.0,
            milvus_reconnect_backoff_s=0.2,
            milvus_reconnect_backoff_max_s=0.5,
        )
        (first,) = add(s, "yan", fact("yan", 0))
        assert milvus.process is not None
        os.kill(milvus.process.pid, signal.SIGKILL)
        milvus.process.wait(10)
        acknowledged = {first.id: first.content}
        for i in range(1, 6):
            (memory,) = add(s, "yan", fact("yan", i))
            acknowledged[memory.id] = memory.content
        reply = query(s, "yan", fact("yan", 3))
        assert reply.report.degraded and reply.memories[0].memory.content == fact("yan", 3)

        milvus = MilvusLiteServer(milvus.data_dir, port=milvus.port).start()  # same address, same data
        wait_until(lambda: s.run(s.components.store.count_pending_index()) == 0, 60, "rows re-indexed")
        assert s.run(s.components.index.count(namespace("yan"))) == len(acknowledged)
        for memory_id, content in acknowledged.items():
            assert found(s, "yan", content, memory_id), content
        assert not query(s, "yan", fact("yan", 2)).report.degraded
    finally:
        milvus.stop()


def answers_ping(s: RunningServer) -> bool:
    try:
        s.run(s.components.index.ping())
    except Unavailable:
        return False
    return True


def test_a_hung_milvus_fails_its_calls_in_time_and_writes_are_still_acknowledged(
    server_factory: ServerFactory, tmp_path: Path
) -> None:
    """A frozen index process (SIGSTOP) answers nothing: calls time out, then fail fast, until SIGCONT."""
    milvus = MilvusLiteServer(tmp_path / "milvus-hung").start()
    assert milvus.process is not None
    try:
        s = server_factory(
            milvus_uri=milvus.uri,
            milvus_call_timeout_s=1.0,
            # No background ping during the outage: only the requests' own behaviour is measured.
            reconcile_interval_s=3600,
            readiness_interval_s=3600,
            reconcile_min_age_s=0.0,
            milvus_reconnect_backoff_s=0.2,
            milvus_reconnect_backoff_max_s=0.5,
        )
        (first,) = add(s, "kai", fact("kai", 0))
        os.kill(milvus.process.pid, signal.SIGSTOP)
        acknowledged = {first.id: first.content}
        took: list[float] = []
        for i in range(1, 6):
            if i > 1:
                # Past the reconnection backoff (0.5 s at most): a request must still not wait for
                # a probe of the frozen index; reconnecting is the background pings' job.
                time.sleep(0.6)
            started = time.monotonic()
            (memory,) = add(s, "kai", fact("kai", i), timeout_s=15)
            took.append(time.monotonic() - started)
            acknowledged[memory.id] = memory.content
        # The first write waits out the call timeout (and the probe); later ones do not wait at all.
        assert max(took[1:]) < 1.5, took
        reply = query(s, "kai", fact("kai", 4), timeout_s=15)
        assert reply.report.degraded and reply.memories[0].memory.content == fact("kai", 4)

        os.kill(milvus.process.pid, signal.SIGCONT)
        # What readiness and the reconciler do in the background: a ping reconnects, a pass re-indexes.
        wait_until(lambda: answers_ping(s), 30, "the index reconnected")
        s.run(s.components.reconciler.run_once(0.0))
        assert s.run(s.components.store.count_pending_index()) == 0
        for memory_id, content in acknowledged.items():
            assert found(s, "kai", content, memory_id), content
        assert not query(s, "kai", fact("kai", 2)).report.degraded
    finally:
        os.kill(milvus.process.pid, signal.SIGCONT)
        milvus.stop()
