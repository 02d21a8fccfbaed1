"""Encryption at rest over gRPC: no plaintext in rows, files, logs, spans or caches; bound
ciphertexts; master-key rotation without downtime; crypto-shredding by ForgetUser."""

from __future__ import annotations

import base64
import logging
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from pymilvus import MilvusClient

from memsvc.crypto.envelope import DecryptionError
from memsvc.crypto.keyring import MasterKeyRing
from memsvc.crypto.rotation import rotate_master_key
from memsvc.domain.models import MemoryFilter, Namespace
from memsvc.server import build_record_store
from memsvc.v1 import write_service_pb2
from tests.conftest import LoopThread, RunningServer, ServerFactory
from tests.milvus_server import MilvusServer
from tests.security.support import add, everything, expect_failure, get, query

pytestmark = pytest.mark.e2e

CONTENT_CANARY = "canary-content-5c1d-osprey"
META_CANARY = "canary-meta-88e2-heron"
UPDATE_CANARY = "canary-update-03b7-kestrel"
QUERY_CANARY = "canary-query-41f0-plover"
CANARIES = (CONTENT_CANARY, META_CANARY, UPDATE_CANARY, QUERY_CANARY)


def _strings(value: Any, seen: set[int] | None = None, depth: int = 0) -> Iterator[str]:
    """Every string and byte string reachable from an object (caches, span attributes)."""
    seen = set() if seen is None else seen
    if id(value) in seen or depth > 40:
        return
    seen.add(id(value))
    if isinstance(value, str):
        yield value
    elif isinstance(value, bytes | bytearray | memoryview):
        yield bytes(value).decode("latin-1")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k, seen, depth + 1)
            yield from _strings(v, seen, depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from _strings(item, seen, depth + 1)
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        yield from _strings(vars(value), seen, depth + 1)
    elif hasattr(value, "__slots__"):
        for name in value.__slots__:
            yield from _strings(getattr(value, name, None), seen, depth + 1)


def _sqlite_rows(path: Path) -> Iterator[tuple[str, Any]]:
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                for column in row:
                    yield table, column


def write_canaries(server: RunningServer) -> tuple[Any, Any]:
    """Carol's two memories with every canary: content, metadata, a query (asked twice, so the
    second is a cache hit) and an update."""
    key = server.api_key
    first, second = add(
        server,
        key,
        "carol",
        f"Carol's locker code is {CONTENT_CANARY}",
        "Carol swims on Tuesdays",
        metadata={"note": META_CANARY},
    )
    for _ in range(2):
        found = query(server, key, "carol", f"locker code {QUERY_CANARY}", filter=everything())
        assert any(CONTENT_CANARY in m.memory.content for m in found.memories)
    server.writes.UpdateMemory(
        write_service_pb2.UpdateMemoryRequest(
            user_id="carol",
            id=second.id,
            memory={"content": f"Carol swims at {UPDATE_CANARY}"},
            update_mask={"paths": ["content"]},
        ),
        metadata=server.md,
    )
    return first, second


def test_no_plaintext_at_rest_in_rows_files_logs_spans_or_caches(
    server: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    key = server.api_key
    first, _ = write_canaries(server)
    assert get(server, key, "carol", first.id).metadata["note"] == META_CANARY
    listed = server.writes.ListMemories(write_service_pb2.ListMemoriesRequest(user_id="carol"), metadata=server.md)
    assert len(listed.memories) == 2
    components = server.components

    # Caches (in-process): ids, scores, vectors and sealed texts only.
    for cache in (components.pipeline, components.writes, components.reads):
        cached = "\n".join(_strings(cache))
        for canary in CANARIES:
            assert canary not in cached, f"{canary} is held in memory by {type(cache).__name__}"
    # Spans: every attribute and event of every span.
    span_text = "\n".join(
        "\n".join(_strings(dict(span.attributes or {}))) + "\n".join(str(e.attributes) for e in span.events)
        for span in server.spans.get_finished_spans()
    )
    # Logs: every record the server emitted during the test.
    log_text = caplog.text + "\n".join(str(r.args) for r in caplog.records)
    # Rows: every column of every table, through SQLite itself.
    row_text = "\n".join(
        c if isinstance(c, str) else bytes(c).decode("latin-1") if isinstance(c, bytes) else ""
        for _, c in _sqlite_rows(components.settings.sqlite_path)
    )
    for canary in CANARIES:
        assert canary not in span_text, f"{canary} in a span"
        assert canary not in log_text, f"{canary} in the log"
        assert canary not in row_text, f"{canary} in a SQLite row"
    # Files: the database, its WAL, and Milvus Lite's files (flushed by closing the index).
    data_dir = components.settings.data_dir
    wal = [p for p in data_dir.rglob("*-wal")]
    server.run(components.index.close())
    files = [p for p in data_dir.rglob("*") if p.is_file()]
    assert wal and any("milvus" in str(p) for p in files)
    for path in files:
        raw = path.read_bytes()
        for canary in CANARIES:
            assert canary.encode() not in raw, f"{canary} in {path}"


@pytest.mark.parametrize("placement", ["partition", "partition_key"])
def test_no_plaintext_in_the_milvus_server_data_directory(
    server_factory: ServerFactory, milvus_server: MilvusServer, placement: str
) -> None:
    """The C++ server's own files (etcd, its message log, segment binlogs) hold no memory text."""
    s = server_factory(milvus_uri=milvus_server.uri, vector_placement=placement)
    first, second = write_canaries(s)
    # A flush seals the growing segments: the vectors' fields are written as binlogs too.
    client = MilvusClient(uri=milvus_server.uri)
    try:
        collections = client.list_collections()
        assert collections
        for name in collections:
            client.flush(name)
    finally:
        client.close()
    files = [p for p in milvus_server.data_dir.rglob("*") if p.is_file()]
    ids_seen: set[str] = set()
    for path in files:
        raw = path.read_bytes()
        ids_seen |= {m.id for m in (first, second) if m.id.encode() in raw}
        for canary in CANARIES:
            at = raw.find(canary.encode())
            assert at < 0, f"{canary} in {path}: {raw[max(0, at - 200) : at + 100]!r}"
    # The scan reaches what memsvc wrote: every memory id (the vectors' primary key) is in there.
    assert ids_seen == {first.id, second.id}, f"ids not found in {len(files)} files: the scan misses the data"


def _swap_ciphertexts(path: Path, a: str, b: str) -> None:
    with sqlite3.connect(path) as conn:
        ca = conn.execute("SELECT ciphertext FROM memories WHERE id = ?", (a,)).fetchone()[0]
        cb = conn.execute("SELECT ciphertext FROM memories WHERE id = ?", (b,)).fetchone()[0]
        conn.execute("UPDATE memories SET ciphertext = ? WHERE id = ?", (cb, a))
        conn.execute("UPDATE memories SET ciphertext = ? WHERE id = ?", (ca, b))


def test_a_ciphertext_moved_to_another_row_does_not_decrypt(server: RunningServer) -> None:
    key = server.api_key
    globex = server.create_key(tenant="globex")
    mine = add(server, key, "dan", "Dan's bank PIN is 1357", "Dan likes jazz")
    theirs = add(server, globex, "dan", "Globex Dan's salary is 90k")[0]
    path = server.components.settings.sqlite_path
    _swap_ciphertexts(path, mine[0].id, mine[1].id)  # within one user
    _swap_ciphertexts(path, mine[0].id, theirs.id)  # now across tenants too
    for caller, memory_id in ((key, mine[0].id), (key, mine[1].id), (globex, theirs.id)):
        failure = expect_failure(lambda c=caller, i=memory_id: get(server, c, "dan", i))
        assert failure.code == grpc.StatusCode.FAILED_PRECONDITION, failure
        assert failure.reason == "DECRYPTION_FAILED"
        text = " ".join(failure.texts)
        assert "PIN" not in text and "jazz" not in text and "salary" not in text
    for caller in (key, globex):
        try:
            result = query(server, caller, "dan", "what is Dan's PIN, music or salary?", filter=everything())
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.FAILED_PRECONDITION  # type: ignore[attr-defined]
            continue
        contents = " ".join(m.memory.content for m in result.memories)
        assert "PIN" not in contents and "jazz" not in contents and "salary" not in contents


def _key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def test_master_key_rotation_rewraps_without_downtime(server_factory: ServerFactory, tmp_path: Path) -> None:
    old, new = f"1:{_key()}", f"2:{_key()}"
    pepper = _key()
    data_dir = tmp_path / "rotating"
    s = server_factory(data_dir=data_dir, master_keys=old, api_key_pepper=pepper)
    users = [f"user{i}" for i in range(5)]
    stored = {u: add(s, s.api_key, u, f"{u} likes sailing", f"{u} owns a red kite") for u in users}
    s.channel.close()
    s.run(s.server.stop(0))

    # Phase 1: every replica knows both keys, the new one first; the old data keys still unwrap.
    s = server_factory(data_dir=data_dir, master_keys=f"{new},{old}", api_key_pepper=pepper)
    key = s.create_key()
    failures: list[Exception] = []
    reads = 0
    stop = threading.Event()

    def keep_reading() -> None:
        nonlocal reads
        while not stop.is_set():
            for user, memories in stored.items():
                try:
                    assert get(s, key, user, memories[0].id).content == f"{user} likes sailing"
                    reads += 1
                except Exception as exc:  # any failure during rotation is downtime
                    failures.append(exc)

    reader = threading.Thread(target=keep_reading)
    reader.start()
    try:
        settings = s.components.settings
        ring = MasterKeyRing.parse(f"{new},{old}")

        async def rotate() -> Any:
            store = build_record_store(settings)  # what `memsvc keys rotate-master` opens
            try:
                return await rotate_master_key(store, ring, batch_size=2)
            finally:
                await store.close()

        report = s.run(rotate())
        add(s, key, "user0", "user0 added this during the rotation")
        again = s.run(rotate())
    finally:
        stop.set()
        reader.join(30)
    assert not failures, failures[:3]
    assert reads > 0
    assert report.rewrapped == len(users) and report.unreadable == 0 and report.orphaned == 0
    assert again.rewrapped == 0  # idempotent: nothing left under the old key
    with sqlite3.connect(s.components.settings.sqlite_path) as conn:
        assert {r[0] for r in conn.execute("SELECT master_version FROM data_keys")} == {2}
    s.channel.close()
    s.run(s.server.stop(0))

    # Phase 2: the old key is gone; everything still decrypts.
    s = server_factory(data_dir=data_dir, master_keys=new, api_key_pepper=pepper)
    for user, memories in stored.items():
        for memory in memories:
            assert get(s, key, user, memory.id).content == memory.content
        found = query(s, key, user, "what does this user like?", filter=everything())
        assert {m.memory.id for m in found.memories} >= {memories[0].id}
    listed = s.writes.ListMemories(write_service_pb2.ListMemoriesRequest(user_id="user0"), metadata=s.auth(key))
    assert len(listed.memories) == 3


def test_the_cli_rotates_master_keys(
    server_factory: ServerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memsvc.cli import main

    old, new = f"1:{_key()}", f"7:{_key()}"
    pepper = _key()
    data_dir = tmp_path / "cli"
    s = server_factory(data_dir=data_dir, master_keys=old, api_key_pepper=pepper)
    memory = add(s, s.api_key, "erin", "Erin's favourite tea is genmaicha")[0]
    s.channel.close()
    s.run(s.server.stop(0))
    monkeypatch.setenv("MEMSVC_DATA_DIR", str(data_dir))
    monkeypatch.setenv("MEMSVC_MASTER_KEYS", f"{new},{old}")
    monkeypatch.setenv("MEMSVC_API_KEY_PEPPER", pepper)
    assert main(["keys", "rotate-master"]) == 0
    s = server_factory(data_dir=data_dir, master_keys=new, api_key_pepper=pepper)
    assert get(s, s.api_key, "erin", memory.id).content == memory.content


@pytest.fixture(params=["milvus-lite", "milvus-server/partition", "milvus-server/partition_key"])
def engine_server(request: pytest.FixtureRequest, server_factory: ServerFactory) -> RunningServer:
    """A server on Milvus Lite in process, or on the session's C++ Milvus server in either placement."""
    if request.param == "milvus-lite":
        return server_factory()
    milvus: MilvusServer = request.getfixturevalue("milvus_server")
    return server_factory(milvus_uri=milvus.uri, vector_placement=request.param.partition("/")[2])


def test_forget_user_shreds_rows_vectors_keys_and_cached_answers(engine_server: RunningServer) -> None:
    server = engine_server
    key = server.api_key
    memories = add(server, key, "gina", "Gina's passport number is X1234567", "Gina lives in Oslo")
    before = query(server, key, "gina", "where does Gina live?", filter=everything())
    assert before.memories and not before.report.cache_hit
    assert query(server, key, "gina", "where does Gina live?", filter=everything()).report.cache_hit
    namespace = Namespace("acme", "default", "development", "gina")
    components = server.components
    with sqlite3.connect(components.settings.sqlite_path) as conn:
        rows = conn.execute("SELECT id, ciphertext FROM memories WHERE ns = ?", (namespace.digest,))
        ciphertexts = {r[0]: bytes(r[1]) for r in rows}
    assert len(ciphertexts) == 2
    vectors = server.run(components.index.vectors(namespace, [m.id for m in memories]))
    assert set(vectors) == {m.id for m in memories}

    forgotten = server.writes.ForgetUser(write_service_pb2.ForgetUserRequest(user_id="gina"), metadata=server.md)
    assert forgotten.deleted_count == 2
    after = query(server, key, "gina", "where does Gina live?", filter=everything())
    assert not after.report.cache_hit and not after.memories
    assert server.run(components.store.get_data_key(namespace)) is None
    assert server.run(components.index.count(namespace)) == 0
    with sqlite3.connect(components.settings.sqlite_path) as conn:
        left = conn.execute("SELECT count(*) FROM memories WHERE ns = ?", (namespace.digest,)).fetchone()[0]
        keys_left = conn.execute("SELECT count(*) FROM data_keys WHERE ns = ?", (namespace.digest,)).fetchone()[0]
    assert left == 0 and keys_left == 0
    # A ciphertext kept elsewhere (a backup, a replica lagging behind) no longer opens.
    for memory_id, ciphertext in ciphertexts.items():
        with pytest.raises(DecryptionError):
            server.run(components.cipher.open(namespace, memory_id, ciphertext))
    for memory in memories:
        assert expect_failure(lambda i=memory.id: get(server, key, "gina", i)).code == grpc.StatusCode.NOT_FOUND
    # The vectors are gone from the index itself, not only hidden by the record store.
    for vector in vectors.values():
        assert server.run(components.index.search(namespace, vector, 10, MemoryFilter())) == []


def test_lexical_recall_survives_retiring_the_oldest_master_key(server_factory: ServerFactory, tmp_path: Path) -> None:
    old, new, pepper = f"1:{_key()}", f"2:{_key()}", _key()
    data_dir = tmp_path / "lexical"
    s = server_factory(data_dir=data_dir, master_keys=old, api_key_pepper=pepper)
    memory = add(s, s.api_key, "hal", "Hal's cat is called Quetzalcoatl")[0]
    assert query(s, s.api_key, "hal", "Quetzalcoatl", filter=everything()).memories[0].score_breakdown.lexical_rank
    s.channel.close()
    s.run(s.server.stop(0))
    ring = MasterKeyRing.parse(f"{new},{old}")

    async def rotate() -> Any:
        store = build_record_store(s.components.settings)
        try:
            return await rotate_master_key(store, ring)
        finally:
            await store.close()

    report = s.run(rotate())
    assert report.rewrapped == 1 and report.root_rewrapped
    s = server_factory(data_dir=data_dir, master_keys=new, api_key_pepper=pepper)
    key = s.create_key()
    found = query(s, key, "hal", "Quetzalcoatl", filter=everything()).memories
    assert found[0].memory.id == memory.id
    assert found[0].score_breakdown.lexical_rank > 0


def test_no_plaintext_in_postgres_rows(server_factory: ServerFactory, loop_thread: LoopThread) -> None:
    import psycopg

    from memsvc.config import Settings
    from tests.backends import fresh_schema

    with fresh_schema() as url:

        async def migrate() -> None:
            store = build_record_store(Settings(record_store_url=url))
            try:
                await store.migrate()
            finally:
                await store.close()

        settings = {"record_store_url": url, "master_keys": f"1:{_key()}", "api_key_pepper": _key()}
        loop_thread.run(migrate())
        s = server_factory(**settings)
        add(s, s.api_key, "ivy", f"Ivy's locker code is {CONTENT_CANARY}", metadata={"note": META_CANARY})
        found = query(s, s.api_key, "ivy", f"locker code {QUERY_CANARY}", filter=everything())
        assert CONTENT_CANARY in found.memories[0].memory.content
        with psycopg.connect(url) as conn:
            tables = [
                r[0]
                for r in conn.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
                )
            ]
            assert "memories" in tables
            text = []
            for table in tables:
                for row in conn.execute(f'SELECT * FROM "{table}"'):
                    text += [bytes(c).decode("latin-1") if isinstance(c, bytes | memoryview) else str(c) for c in row]
        joined = "\n".join(text)
        for canary in CANARIES:
            assert canary not in joined, f"{canary} in a PostgreSQL row"
        s.channel.close()
        s.run(s.server.stop(0))


def test_no_plaintext_in_the_shared_redis_caches(server_factory: ServerFactory) -> None:
    import redis

    from tests.backends import REDIS_URL, redis_prefix

    with redis_prefix() as prefix:
        s = server_factory(redis_url=REDIS_URL, redis_key_prefix=prefix)
        add(s, s.api_key, "jo", f"Jo's locker code is {CONTENT_CANARY}", metadata={"note": META_CANARY})
        for _ in range(2):
            found = query(s, s.api_key, "jo", f"locker code {QUERY_CANARY}", filter=everything())
        assert found.report.cache_hit and CONTENT_CANARY in found.memories[0].memory.content
        client = redis.Redis.from_url(REDIS_URL)
        try:
            keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
            assert any(b":res:" in k for k in keys), keys  # a result was cached
            values: list[bytes] = list(keys)
            for k in keys:  # read values as values (DUMP may LZF-compress them and hide a canary)
                kind = client.type(k)
                if kind == b"string":
                    values.append(client.get(k) or b"")
                elif kind == b"hash":
                    values += [x for pair in client.hgetall(k).items() for x in pair]
                elif kind == b"list":
                    values += client.lrange(k, 0, -1)
                elif kind in (b"set", b"zset"):
                    values += list(client.smembers(k)) if kind == b"set" else client.zrange(k, 0, -1)
            blob = b"\n".join(values)
        finally:
            client.close()
        for canary in CANARIES:
            at = blob.find(canary.encode())
            assert at < 0, f"{canary} in Redis: {blob[max(0, at - 300) : at + 100]!r}"


def test_query_text_is_sealed_in_result_caches_and_served_back(server: RunningServer) -> None:
    add(server, server.api_key, "kim", "Kim's bike lock combination is 2468")
    text = f"bike lock {QUERY_CANARY}"
    first = query(server, server.api_key, "kim", text, filter=everything(), additional_queries=["lock code"])
    second = query(server, server.api_key, "kim", text, filter=everything(), additional_queries=["lock code"])
    assert second.report.cache_hit and not first.report.cache_hit
    assert any(QUERY_CANARY in q for m in first.memories for q in m.matched_queries)
    # A cache hit answers exactly what the fresh query did, texts included.
    assert [(m.memory.id, list(m.matched_queries)) for m in second.memories] == [
        (m.memory.id, list(m.matched_queries)) for m in first.memories
    ]
    assert second.explanation == first.explanation
    assert QUERY_CANARY not in "\n".join(_strings(server.components.pipeline))
