"""Two replicas, one truth: two `memsvc serve` processes on PostgreSQL, Redis and one Milvus
(a `milvus-lite server` process, or the session's C++ `milvus-server`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from memsvc.v1 import memory_pb2, query_service_pb2, query_service_pb2_grpc, write_service_pb2, write_service_pb2_grpc
from tests.backends import REDIS_URL, fresh_schema, redis_prefix
from tests.e2e.processes import MilvusLiteServer, Replica, memsvc, replica_env
from tests.milvus_server import MilvusServer

pytestmark = pytest.mark.e2e


@dataclass
class Deployment:
    a: Replica
    b: Replica
    api_key: str
    env: dict[str, str]

    def add(self, replica: Replica, user: str, *contents: str) -> list[Any]:
        stub = write_service_pb2_grpc.WriteServiceStub(replica.channel)
        request = write_service_pb2.AddMemoriesRequest(
            user_id=user, memories=[write_service_pb2.NewMemory(content=c) for c in contents]
        )
        return list(stub.AddMemories(request, metadata=self.md, timeout=30).memories)

    def query(self, replica: Replica, user: str, text: str) -> Any:
        stub = query_service_pb2_grpc.QueryServiceStub(replica.channel)
        request = query_service_pb2.QueryRequest(
            user_id=user, query=text, filter=memory_pb2.MemoryFilter(min_importance=0.0)
        )
        return stub.Query(request, metadata=self.md, timeout=30)

    def forget(self, replica: Replica, user: str) -> Any:
        stub = write_service_pb2_grpc.WriteServiceStub(replica.channel)
        return stub.ForgetUser(write_service_pb2.ForgetUserRequest(user_id=user), metadata=self.md, timeout=30)

    @property
    def md(self) -> tuple[tuple[str, str]]:
        return (("authorization", f"Bearer {self.api_key}"),)


@pytest.fixture(scope="module", params=[pytest.param("milvus-lite", marks=pytest.mark.slow), "milvus-server"])
def deployment(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    work = tmp_path_factory.mktemp("replicas")
    with fresh_schema() as url, redis_prefix() as prefix:
        lite: MilvusLiteServer | None = None
        if request.param == "milvus-lite":
            lite = MilvusLiteServer(work / "milvus").start()
            milvus_uri = lite.uri
        else:
            # The module's tests share the deployment; no other test runs between them.
            shared: MilvusServer = request.getfixturevalue("milvus_server_session")
            milvus_uri = shared.fresh().uri
        env = replica_env(
            record_store_url=url,
            milvus_uri=milvus_uri,
            redis_url=REDIS_URL,
            redis_prefix=prefix,
            MEMSVC_INDEX_FLUSH_DELAY_S="0.2",
        )
        replicas: list[Replica] = []
        try:
            assert "applied migrations" in memsvc(["migrate"], env, work)
            token = memsvc(
                ["keys", "create", "--tenant", "acme", "--permissions", "read,write"], env, work
            ).splitlines()[0]
            replicas = [Replica(name, work, env) for name in ("a", "b")]
            for replica in replicas:
                replica.launch()
            for replica in replicas:
                replica.wait_ready()
            yield Deployment(replicas[0], replicas[1], token, env)
        finally:
            for replica in replicas:
                replica.stop()
            if lite is not None:
                lite.stop()


def test_a_write_through_a_is_returned_by_b(deployment: Deployment) -> None:
    d = deployment
    stored = d.add(d.a, "alice", "I prefer window seats on long flights", "My sister lives in Lisbon")
    response = d.query(d.b, "alice", "which seat do I like on a plane?")
    assert response.memories[0].memory.id == stored[0].id
    assert response.memories[0].memory.content == "I prefer window seats on long flights"


def test_a_write_on_a_invalidates_results_cached_on_b(deployment: Deployment) -> None:
    d = deployment
    d.add(d.a, "bob", "Bob drinks his coffee black")
    question = "how does bob take his coffee?"
    first = d.query(d.b, "bob", question)
    assert not first.report.cache_hit
    again = d.query(d.b, "bob", question)
    assert again.report.cache_hit
    assert [m.memory.id for m in again.memories] == [m.memory.id for m in first.memories]
    new = d.add(d.a, "bob", "Bob switched to oat milk in his coffee last week")[0]
    after = d.query(d.b, "bob", question)
    assert not after.report.cache_hit
    assert new.id in [m.memory.id for m in after.memories]
    # And A, which never ran the query, serves the result B cached.
    assert d.query(d.a, "bob", question).report.cache_hit


def test_forget_on_a_is_honoured_by_b(deployment: Deployment) -> None:
    d = deployment
    d.add(d.b, "carol", "Carol's locker code is 4711")  # B caches carol's data key
    assert d.query(d.b, "carol", "locker code").memories
    d.forget(d.a, "carol")
    assert not d.query(d.b, "carol", "locker code").memories
    # B must not seal new writes with the destroyed key: they stay readable on both replicas.
    fresh = d.add(d.b, "carol", "Carol's new locker code is 1234")[0]
    for replica in (d.a, d.b):
        found = d.query(replica, "carol", "locker code")
        assert [m.memory.id for m in found.memories] == [fresh.id]
        assert found.memories[0].memory.content == "Carol's new locker code is 1234"


def test_a_retry_through_the_other_replica_stores_once(deployment: Deployment) -> None:
    d = deployment
    request = write_service_pb2.AddMemoriesRequest(
        user_id="dave",
        memories=[write_service_pb2.NewMemory(content="Dave plays the cello", idempotency_key="req-7")],
    )
    calls = [
        write_service_pb2_grpc.WriteServiceStub(r.channel).AddMemories.future(request, metadata=d.md, timeout=30)
        for r in (d.a, d.b, d.a, d.b)
    ]
    responses = [c.result() for c in calls]
    assert len({r.memories[0].id for r in responses}) == 1
    assert sorted(r.created[0] for r in responses) == [False, False, False, True]
