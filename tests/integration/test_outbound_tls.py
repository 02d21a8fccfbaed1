"""memsvc's own connections over TLS, through the gRPC API: PostgreSQL with sslmode=verify-full and
Redis with a client certificate, each a private server that speaks nothing but TLS."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from memsvc.config import Settings
from memsvc.crypto.keyring import new_key_b64
from memsvc.errors import FailedPrecondition, Unavailable
from memsvc.server import build_components, build_record_store
from memsvc.v1 import query_service_pb2, write_service_pb2
from tests.conftest import LoopThread, RunningServer, ServerFactory
from tests.private_servers import UNNAMED_LOOPBACK, PrivatePostgres, private_postgres, private_redis
from tests.tls_certs import Pki

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def postgres(pki: Pki) -> Iterator[PrivatePostgres]:
    with private_postgres(pki.ca, pki.server) as server:
        yield server


def remember(s: RunningServer, user: str) -> str:
    added = s.writes.AddMemories(
        write_service_pb2.AddMemoriesRequest(
            user_id=user, memories=[write_service_pb2.NewMemory(content="Our wedding anniversary is on 14 June")]
        ),
        metadata=s.md,
        timeout=60,
    )
    return str(added.memories[0].id)


def recall(s: RunningServer, user: str, memory_id: str) -> query_service_pb2.QueryReport:
    """The report of a query that must find the memory."""
    found = s.queries.Query(
        query_service_pb2.QueryRequest(user_id=user, query="when is our anniversary?"), metadata=s.md, timeout=60
    )
    assert memory_id in [r.memory.id for r in found.memories]
    report: query_service_pb2.QueryReport = found.report
    return report


def test_the_record_store_over_tls_with_verify_full(
    server_factory: ServerFactory, postgres: PrivatePostgres, pki: Pki, loop_thread: LoopThread, embedder: Any
) -> None:
    with pytest.raises(psycopg.OperationalError, match="no encryption"):
        psycopg.connect(postgres.url(sslmode="disable"), connect_timeout=5)

    url = postgres.url()
    secrets = {"master_keys": f"1:{new_key_b64()}", "api_key_pepper": "pepper"}
    store = build_record_store(Settings(record_store_url=url))
    try:
        assert loop_thread.run(store.migrate())
    finally:
        loop_thread.run(store.close())
    s = server_factory(record_store_url=url, **secrets)
    recall(s, "wendy", remember(s, "wendy"))
    with psycopg.connect(url, connect_timeout=5) as conn:
        encrypted = conn.execute(
            "SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) "
            "WHERE ssl AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchone()
    assert encrypted is not None and encrypted[0] >= 1, "the server's pooled connections are not TLS"

    # A certificate the URL's CA did not sign, or one that does not name the host connected to,
    # stops the start-up and says why; verify-ca alone would have taken the second.
    for bad_url, why in (
        (postgres.url(ca_file=pki.other_ca.cert_file), "certificate verify failed"),
        (postgres.url(host=UNNAMED_LOOPBACK), "does not match host name"),
    ):
        with pytest.raises(Unavailable, match=why):
            loop_thread.run(
                build_components(
                    Settings(data_dir=s.components.settings.data_dir, record_store_url=bad_url, **secrets),
                    embedder=embedder,
                )
            )
    with psycopg.connect(postgres.url(host=UNNAMED_LOOPBACK, sslmode="verify-ca"), connect_timeout=5) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def redis_keys(port: int, pki: Pki, prefix: str) -> list[bytes]:
    client = redis.Redis(
        host="127.0.0.1",
        port=port,
        ssl=True,
        ssl_ca_certs=str(pki.ca.cert_file),
        ssl_certfile=str(pki.client.cert_file),
        ssl_keyfile=str(pki.client.key_file),
        socket_timeout=5,
    )
    try:
        return list(client.scan_iter(f"{prefix}:*"))
    finally:
        client.close()


def test_the_shared_caches_over_tls_with_a_client_certificate(
    server_factory: ServerFactory, pki: Pki, tmp_path: Path, loop_thread: LoopThread, embedder: Any
) -> None:
    with private_redis(pki.ca, pki.server, tmp_path) as server:
        with pytest.raises(redis.ConnectionError):
            redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=2).ping()
        tls = {
            "redis_ca_file": pki.ca.cert_file,
            "redis_cert_file": pki.client.cert_file,
            "redis_key_file": pki.client.key_file,
        }
        s = server_factory(redis_url=f"rediss://127.0.0.1:{server.port}/0", redis_key_prefix="trusted", **tls)
        memory_id = remember(s, "xena")
        assert not recall(s, "xena", memory_id).cache_hit
        assert recall(s, "xena", memory_id).cache_hit
        assert redis_keys(server.port, pki, "trusted"), "nothing reached Redis over TLS"

        # Another CA, another host name, no client certificate: Redis is skipped (the queries
        # still answer, uncached) and nothing is written to it.
        refused = {
            "other-ca": {**tls, "redis_ca_file": pki.other_ca.cert_file},
            "unnamed-host": {**tls, "redis_url": f"rediss://{UNNAMED_LOOPBACK}:{server.port}/0"},
            "no-client-cert": {"redis_ca_file": pki.ca.cert_file},
        }
        for prefix, settings in refused.items():
            other = server_factory(
                **{"redis_url": f"rediss://127.0.0.1:{server.port}/0", **settings}, redis_key_prefix=prefix
            )
            memory_id = remember(other, "yuri")
            recall(other, "yuri", memory_id)
            assert not recall(other, "yuri", memory_id).cache_hit, prefix
            assert redis_keys(server.port, pki, prefix) == [], prefix

    with pytest.raises(FailedPrecondition, match="MEMSVC_REDIS_CA_FILE"):
        loop_thread.run(
            build_components(
                Settings(
                    data_dir=tmp_path / "plain", redis_url="redis://127.0.0.1:6379/0", redis_ca_file=pki.ca.cert_file
                ),
                embedder=embedder,
            )
        )
