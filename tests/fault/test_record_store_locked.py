"""Record store unavailable (SQLite locked by another connection): UNAVAILABLE, NOT_SERVING, recovery."""

from __future__ import annotations

import sqlite3
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.conftest import RunningServer, ServerFactory
from tests.fault.support import add, failure, query, retry_delay_s, wait_until

pytestmark = pytest.mark.e2e

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICES = ("memsvc.v1.WriteService", "memsvc.v1.QueryService")


def health(s: RunningServer, service: str) -> int:
    request = health_pb2.HealthCheckRequest(service=service)
    return int(health_pb2_grpc.HealthStub(s.channel).Check(request, timeout=5).status)


def test_a_locked_record_store_is_unavailable_not_ready_and_recovers_without_restart(
    server_factory: ServerFactory,
) -> None:
    s = server_factory(sqlite_busy_timeout_ms=200, readiness_interval_s=0.2)
    (before,) = add(s, "lena", "Lena grows chillies on the balcony")
    assert all(health(s, name) == SERVING for name in SERVICES)

    blocker = sqlite3.connect(s.components.settings.sqlite_path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")  # held far longer than the server's 200 ms busy timeout
    try:
        started = time.monotonic()
        error = failure(lambda: add(s, "lena", "Lena learns the cello"))
        assert error.code() == grpc.StatusCode.UNAVAILABLE, error
        assert time.monotonic() - started < 10, "the write gave up after the busy timeout, not later"
        delay = retry_delay_s(error)
        assert delay is not None and delay > 0, "UNAVAILABLE carries RetryInfo"
        for name in SERVICES:
            wait_until(lambda name=name: health(s, name) == NOT_SERVING, 10, f"{name} NOT_SERVING")
        assert health(s, "") == SERVING, "liveness stays up: the process is fine, its database is not"
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()

    # The lock is gone: readiness and writes come back in the same process.
    for name in SERVICES:
        wait_until(lambda name=name: health(s, name) == SERVING, 10, f"{name} SERVING again")
    (after,) = add(s, "lena", "Lena learns the cello")
    ids = [r.memory.id for r in query(s, "lena", "which instrument does Lena learn?", limit=5).memories]
    assert after.id in ids and before.id != after.id
