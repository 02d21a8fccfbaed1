"""Graceful operation: readiness follows the database, SIGTERM drains, oversized calls are refused."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import psycopg
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc.crypto.keyring import new_key_b64
from memsvc.stores.records.postgres import PostgresRecordStore
from memsvc.v1 import query_service_pb2, write_service_pb2, write_service_pb2_grpc
from tests.backends import fresh_schema, fresh_schema_with_role, set_login
from tests.conftest import LoopThread, RunningServer, ServerFactory
from tests.e2e.processes import Replica, memsvc, replica_env

pytestmark = pytest.mark.e2e

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def health_of(s: RunningServer, service: str) -> int:
    reply = health_pb2_grpc.HealthStub(s.channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
    return int(reply.status)


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> float:
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout_s, f"{what} did not happen within {timeout_s} s"
        time.sleep(0.1)
    return time.monotonic() - start


@pytest.fixture
def postgres_server(server_factory: ServerFactory, loop_thread: LoopThread) -> Iterator[tuple[RunningServer, str]]:
    with fresh_schema_with_role() as (url, role):

        async def migrate() -> None:
            store = PostgresRecordStore(url)
            try:
                await store.migrate()
            finally:
                await store.close()

        loop_thread.run(migrate())
        server = server_factory(
            record_store_url=url,
            master_keys=f"1:{new_key_b64()}",
            api_key_pepper=new_key_b64(),
            readiness_interval_s=0.2,
            record_store_timeout_s=1.0,
        )
        try:
            yield server, role
        finally:
            set_login(role, True)


def test_readiness_follows_the_database(postgres_server: tuple[RunningServer, str]) -> None:
    server, role = postgres_server
    query_service = "memsvc.v1.QueryService"
    assert health_of(server, query_service) == SERVING
    set_login(role, False)  # the database stops answering this service
    took_s = wait_until(lambda: health_of(server, query_service) == NOT_SERVING, 15, "NOT_SERVING during the outage")
    assert took_s < 4.5  # readiness_interval_s (0.2 s) and the store timeout (1 s), not the 5 s default
    assert health_of(server, "memsvc.v1.WriteService") == NOT_SERVING
    # The process itself is fine: liveness (the overall name) does not restart it.
    assert health_of(server, "") == SERVING
    # Calls fail as UNAVAILABLE (retryable), never INTERNAL.
    with pytest.raises(grpc.RpcError) as info:
        server.queries.Query(
            query_service_pb2.QueryRequest(user_id="alice", query="anything"), metadata=server.md, timeout=10
        )
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    set_login(role, True)
    wait_until(lambda: health_of(server, query_service) == SERVING, 30, "SERVING after recovery")
    server.queries.Query(query_service_pb2.QueryRequest(user_id="alice", query="anything"), metadata=server.md)


def test_too_large_a_request_is_resource_exhausted(server_factory: ServerFactory) -> None:
    server = server_factory(max_message_bytes=64 * 1024)
    request = write_service_pb2.AddMemoriesRequest(
        user_id="alice", memories=[write_service_pb2.NewMemory(content="x" * 30_000) for _ in range(3)]
    )
    with pytest.raises(grpc.RpcError) as info:
        server.writes.AddMemories(request, metadata=server.md, timeout=10)
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


@pytest.mark.slow  # a server process and two CLI runs: tens of seconds on a busy machine
def test_sigterm_drains_in_flight_calls_and_refuses_new_ones(tmp_path: Path) -> None:
    with fresh_schema() as url:
        env = replica_env(record_store_url=url, milvus_uri="", MEMSVC_GRACE_PERIOD_S="30")
        memsvc(["migrate"], env, tmp_path)
        key = memsvc(["keys", "create", "--tenant", "acme"], env, tmp_path).splitlines()[0]
        md = (("authorization", f"Bearer {key}"),)
        replica = Replica("drain", tmp_path, env).start()
        try:
            writes = write_service_pb2_grpc.WriteServiceStub(replica.channel)
            request = write_service_pb2.AddMemoriesRequest(
                user_id="alice", memories=[write_service_pb2.NewMemory(content="Alice keeps bees")]
            )
            with psycopg.connect(url) as blocker:
                # Hold the key table: the call below stays in flight (waiting for its API key)
                # until this transaction ends, however fast or slow the machine is.
                blocker.execute("LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE")
                in_flight = writes.AddMemories.future(request, metadata=md, timeout=60)
                time.sleep(0.5)
                assert not in_flight.done()
                assert replica.process is not None
                replica.process.send_signal(signal.SIGTERM)
                time.sleep(0.5)
                # New calls are refused while the old one drains.
                with grpc.insecure_channel(replica.address) as fresh:
                    with pytest.raises(grpc.RpcError) as info:
                        write_service_pb2_grpc.WriteServiceStub(fresh).GetMemory(
                            write_service_pb2.GetMemoryRequest(user_id="alice", id="0" * 32), metadata=md, timeout=5
                        )
                    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
                assert not in_flight.done()
                blocker.rollback()
            assert [m.content for m in in_flight.result(timeout=30).memories] == ["Alice keeps bees"]
            assert replica.process.wait(30) == 0
        finally:
            replica.stop()


def test_queries_and_writes_work_while_redis_is_down(server_factory: ServerFactory) -> None:
    server = server_factory(redis_url="redis://127.0.0.1:1/0", redis_timeout_s=0.2)
    request = write_service_pb2.AddMemoriesRequest(
        user_id="alice", memories=[write_service_pb2.NewMemory(content="Alice keeps bees in her garden")]
    )
    stored = server.writes.AddMemories(request, metadata=server.md, timeout=10).memories[0]
    query = query_service_pb2.QueryRequest(user_id="alice", query="who keeps bees?")
    for _ in range(2):  # the caches miss (never hit, never fail) instead of failing the query
        response = server.queries.Query(query, metadata=server.md, timeout=10)
        assert [m.memory.id for m in response.memories] == [stored.id]
        assert not response.report.cache_hit
