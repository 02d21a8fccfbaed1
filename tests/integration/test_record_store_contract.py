"""One contract for every record store: the same tests against SQLite and the real PostgreSQL."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from memsvc.domain.models import (
    ApiKeyRecord,
    MemoryFilter,
    MemoryKind,
    Namespace,
    Permission,
    RecallEvent,
    RetentionStatus,
    Role,
    StoredMemory,
    Tier,
    WrappedDataKey,
    new_memory_id,
)
from memsvc.errors import FailedPrecondition, Unavailable
from memsvc.stores.records.base import IndexTicket, PageCursor, RecordStore
from memsvc.stores.records.migrations import POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS, Migration
from memsvc.stores.records.postgres import PostgresRecordStore
from memsvc.stores.records.sqlite import SqliteRecordStore, fetch_sql
from memsvc.stores.sql import Program, q
from tests.backends import fresh_schema
from tests.conftest import LoopThread

pytestmark = pytest.mark.integration
T = TypeVar("T")

ALICE = Namespace("acme", "default", "development", "alice")
BOB = Namespace("acme", "default", "development", "bob")
OTHER_TENANT_ALICE = Namespace("globex", "default", "development", "alice")


class Store:
    """A store under test with a synchronous face (the store lives on the shared test loop)."""

    def __init__(self, store: RecordStore, loop_thread: LoopThread, migrations: tuple[Migration, ...]) -> None:
        self.store = store
        self._loop = loop_thread
        self.versions = [version for version, _ in migrations]

    def __call__(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._loop.run(coro, timeout_s=60)


def _open(store: RecordStore, loop_thread: LoopThread, migrations: tuple[Migration, ...]) -> Iterator[Store]:
    wrapped = Store(store, loop_thread, migrations)
    try:
        yield wrapped
    finally:
        wrapped(store.close())


@pytest.fixture(params=["sqlite", "postgres"])
def fresh(request: pytest.FixtureRequest, loop_thread: LoopThread, tmp_path: Path) -> Iterator[Store]:
    """A store on an empty database (no migrations yet)."""
    if request.param == "sqlite":
        yield from _open(SqliteRecordStore(tmp_path / "contract.db"), loop_thread, SQLITE_MIGRATIONS)
        return
    with fresh_schema() as url:
        yield from _open(PostgresRecordStore(url), loop_thread, POSTGRES_MIGRATIONS)


@pytest.fixture
def s(fresh: Store) -> Store:
    """A migrated store."""
    fresh(fresh.store.migrate())
    return fresh


def memory(
    namespace: Namespace = ALICE,
    *,
    created_at: float | None = None,
    idempotency_key: str = "",
    tags: tuple[str, ...] = ("travel",),
    **fields: Any,
) -> StoredMemory:
    now = time.time() if created_at is None else created_at
    values: dict[str, Any] = {
        "id": new_memory_id(now),
        "namespace": namespace,
        "ciphertext": b"\x01\x00sealed\xff" + now.hex().encode(),
        "role": Role.USER,
        "kind": MemoryKind.FACT,
        "tags": tags,
        "session_id": "s1",
        "importance": 0.7,
        "tier": Tier.HOT,
        "created_at": now,
        "updated_at": now,
        "usage_count": 0,
        "last_accessed_at": None,
        "quality": 0.8,
        "consistency": 1.0,
        "decay": 1.0,
        "retention_status": RetentionStatus.ACTIVE,
        "embedding_version": "minilm@1",
        "superseded_by": "",
        "idempotency_key": idempotency_key,
        "indexed": False,
    }
    values.update(fields)
    return StoredMemory(**values)


def insert(s: Store, *rows: StoredMemory) -> list[StoredMemory]:
    return [row for row, _ in s(s.store.insert_memories(rows))]


# -- schema -----------------------------------------------------------------------------------


def test_migrations_apply_once_and_are_checked(fresh: Store) -> None:
    with pytest.raises(FailedPrecondition, match="migrat"):
        fresh(fresh.store.check_schema())
    assert fresh(fresh.store.migrate()) == fresh.versions
    assert fresh(fresh.store.migrate()) == []
    fresh(fresh.store.check_schema())
    fresh(fresh.store.ping())


def test_concurrent_migrations_apply_once(fresh: Store) -> None:
    if isinstance(fresh.store, SqliteRecordStore):
        pytest.skip("the embedded default migrates once at start-up; only replicas migrate concurrently")

    async def both() -> list[list[int]]:
        return list(await asyncio.gather(fresh.store.migrate(), fresh.store.migrate()))

    assert sorted(fresh(both())) == [[], fresh.versions]


# -- memories ---------------------------------------------------------------------------------


def test_insert_and_fetch_round_trip_every_field(s: Store) -> None:
    row = memory(tags=("a", "b c", 'quote"d'), last_accessed_at=1.5, usage_count=3, superseded_by="x")
    assert s(s.store.insert_memories([row])) == [(row, True)]
    assert s(s.store.fetch_memories(ALICE, [row.id])) == [row]
    assert s(s.store.fetch_memories(BOB, [row.id])) == []
    assert s(s.store.fetch_memories(OTHER_TENANT_ALICE, [row.id])) == []
    assert s(s.store.fetch_memories(ALICE, [])) == []
    assert s(s.store.fetch_memories(ALICE, ["missing"])) == []


def test_fetch_many_in_one_call(s: Store) -> None:
    rows = insert(s, *(memory() for _ in range(5)), memory(BOB))
    fetched = s(s.store.fetch_memories(ALICE, [r.id for r in rows]))
    assert {r.id for r in fetched} == {r.id for r in rows[:5]}


def migrated_sqlite(loop_thread: LoopThread, tmp_path: Path) -> Path:
    """The path of a new SQLite record store with every migration applied, closed again."""
    path = tmp_path / "plan.db"
    store = SqliteRecordStore(path)
    loop_thread.run(store.migrate())
    loop_thread.run(store.close())
    return path


def test_sqlite_fetches_ids_by_primary_key_not_by_walking_the_namespace(
    loop_thread: LoopThread, tmp_path: Path
) -> None:
    path = migrated_sqlite(loop_thread, tmp_path)
    with sqlite3.connect(path) as conn:
        plan = conn.execute("EXPLAIN QUERY PLAN " + fetch_sql(3), ("ns", "a", "b", "c")).fetchall()
    assert [step[3] for step in plan] == ["SEARCH memories USING INDEX sqlite_autoindex_memories_1 (id=?)"]


def test_sqlite_lists_one_kind_newest_first_from_its_own_index(loop_thread: LoopThread, tmp_path: Path) -> None:
    # The interaction contract's read (the user's instructions) must not walk a long history.
    path = migrated_sqlite(loop_thread, tmp_path)
    sql = (
        "SELECT id FROM memories WHERE ns = ? AND kind IN (?) AND retention_status = ? "
        "ORDER BY created_at DESC, id DESC LIMIT 30"
    )
    with sqlite3.connect(path) as conn:
        plan = conn.execute("EXPLAIN QUERY PLAN " + sql, ("ns", "instruction", "active")).fetchall()
    assert [step[3] for step in plan] == ["SEARCH memories USING INDEX memories_ns_kind_created (ns=? AND kind=?)"]


def test_sqlite_reads_one_session_from_its_own_index(loop_thread: LoopThread, tmp_path: Path) -> None:
    # A conversation's turns (its summary, a result's context window) must not walk a long history.
    path = migrated_sqlite(loop_thread, tmp_path)
    sql = (
        "SELECT id FROM memories WHERE ns = ? AND session_id = ? AND kind IN (?) "
        "ORDER BY created_at DESC, id DESC LIMIT 200"
    )
    neighbours = "SELECT id, created_at, retention_status FROM memories WHERE ns = ? AND session_id IN (?, ?)"
    with sqlite3.connect(path) as conn:
        plans = [
            [step[3] for step in conn.execute("EXPLAIN QUERY PLAN " + sql, ("ns", "s1", "episode"))],
            [step[3] for step in conn.execute("EXPLAIN QUERY PLAN " + neighbours, ("ns", "s1", "s2"))],
        ]
    assert plans == [
        ["SEARCH memories USING INDEX memories_ns_session_created (ns=? AND session_id=?)"],
        ["SEARCH memories USING INDEX memories_ns_session_created (ns=? AND session_id=?)"],
    ]


def test_idempotency_key_returns_the_stored_row(s: Store) -> None:
    first = memory(idempotency_key="req-1")
    assert s(s.store.insert_memories([first])) == [(first, True)]
    retry = memory(idempotency_key="req-1", ciphertext=b"other")
    assert s(s.store.insert_memories([retry])) == [(first, False)]
    # The same key in another namespace is another write.
    elsewhere = memory(BOB, idempotency_key="req-1")
    assert s(s.store.insert_memories([elsewhere])) == [(elsewhere, True)]
    # Within one batch, the second use of a key yields the first row.
    a, b = memory(idempotency_key="req-2"), memory(idempotency_key="req-2")
    assert s(s.store.insert_memories([a, b])) == [(a, True), (a, False)]
    # Rows without a key never collide.
    c, d = memory(), memory()
    assert s(s.store.insert_memories([c, d])) == [(c, True), (d, True)]


def test_idempotency_race_creates_one_row(s: Store) -> None:
    candidates = [memory(idempotency_key="race") for _ in range(8)]

    async def race() -> list[list[tuple[StoredMemory, bool]]]:
        return list(await asyncio.gather(*(s.store.insert_memories([c]) for c in candidates)))

    results = [r[0] for r in s(race())]
    assert sum(created for _, created in results) == 1
    winner = next(row for row, created in results if created)
    assert all(row == winner for row, _ in results)
    listed = s(s.store.list_memories(ALICE, MemoryFilter(), None, 100))
    assert [r.id for r in listed] == [winner.id]


def test_update_bumps_revision_and_requeues(s: Store) -> None:
    row = insert(s, memory())[0]
    s(s.store.mark_indexed([IndexTicket(row.id, row.revision)]))
    later = row.updated_at + 10
    updated = s(
        s.store.update_memory(
            ALICE,
            row.id,
            {
                "tags": ("new",),
                "tier": Tier.COLD,
                "importance": 0.2,
                "ciphertext": b"re-sealed",
                "retention_status": RetentionStatus.SUPERSEDED,
                "superseded_by": "m2",
            },
            later,
        )
    )
    assert updated == row._replace(
        tags=("new",),
        tier=Tier.COLD,
        importance=0.2,
        ciphertext=b"re-sealed",
        retention_status=RetentionStatus.SUPERSEDED,
        superseded_by="m2",
        updated_at=later,
        revision=row.revision + 1,
        indexed=False,
    )
    assert s(s.store.fetch_memories(ALICE, [row.id])) == [updated]
    # An empty change still bumps the revision (a re-embed).
    again = s(s.store.update_memory(ALICE, row.id, {}, later + 1))
    assert again is not None and again.revision == row.revision + 2
    assert s(s.store.update_memory(BOB, row.id, {"importance": 0.9}, later)) is None
    assert s(s.store.update_memory(ALICE, "missing", {"importance": 0.9}, later)) is None
    with pytest.raises(ValueError, match="not updatable"):
        s(s.store.update_memory(ALICE, row.id, {"usage_count": 9}, later))


def test_delete_leaves_a_vector_tombstone(s: Store) -> None:
    keep, gone = insert(s, memory(), memory())
    assert s(s.store.delete_memory(BOB, gone.id)) is None
    assert s(s.store.delete_memory(ALICE, gone.id)) == gone
    assert s(s.store.delete_memory(ALICE, gone.id)) is None
    assert s(s.store.fetch_memories(ALICE, [keep.id, gone.id])) == [keep]
    tombstones = s(s.store.pending_vector_deletes(10))
    assert [(t.memory_id, t.namespace_digest, t.embedding_version) for t in tombstones] == [
        (gone.id, ALICE.digest, gone.embedding_version)
    ]
    s(s.store.clear_vector_tombstones([gone.id]))
    s(s.store.clear_vector_tombstones([]))
    assert s(s.store.pending_vector_deletes(10)) == []


def test_forget_removes_rows_keys_and_leaves_a_namespace_tombstone(s: Store) -> None:
    rows = insert(s, memory(), memory())
    bobs = insert(s, memory(BOB))
    other = insert(s, memory(OTHER_TENANT_ALICE))
    s(s.store.put_data_key_if_absent(ALICE, WrappedDataKey(ALICE.digest, 1, 1, b"k")))
    s(s.store.put_data_key_if_absent(BOB, WrappedDataKey(BOB.digest, 1, 1, b"b")))
    s(s.store.record_recalls([RecallEvent(rows[0].id, ALICE, "req", 0.9, 1, time.time())]))
    s(s.store.note_vector_write(ALICE.digest, "memsvc", 7 << 18))
    s(s.store.note_vector_write(BOB.digest, "memsvc", 9 << 18))
    s(s.store.delete_memory(ALICE, rows[1].id))
    assert s(s.store.forget_namespace(ALICE)) == 1
    assert s(s.store.fetch_memories(ALICE, [r.id for r in rows])) == []
    assert s(s.store.get_data_key(ALICE)) is None
    assert s(s.store.last_vector_write(ALICE.digest, "memsvc")) is None  # erasure leaves no trace
    assert s(s.store.last_vector_write(BOB.digest, "memsvc")) == 9 << 18
    assert s(s.store.pending_vector_deletes(10)) == []  # the namespace drop covers them
    assert [t.namespace for t in s(s.store.pending_namespace_drops(10))] == [ALICE]
    assert s(s.store.fetch_memories(BOB, [bobs[0].id])) == bobs
    assert s(s.store.fetch_memories(OTHER_TENANT_ALICE, [other[0].id])) == other
    assert s(s.store.get_data_key(BOB)) is not None
    assert s(s.store.forget_namespace(ALICE)) == 0  # forgetting twice is harmless
    s(s.store.note_vector_write(ALICE.digest, "memsvc", 8 << 18))  # the vector drop's own write
    s(s.store.clear_namespace_tombstone(ALICE))
    assert s(s.store.pending_namespace_drops(10)) == []
    assert s(s.store.last_vector_write(ALICE.digest, "memsvc")) is None


# -- listing ----------------------------------------------------------------------------------


def test_list_is_newest_first_and_pages_by_cursor(s: Store) -> None:
    base = 1_700_000_000.0
    rows = insert(s, *(memory(created_at=base + i) for i in range(7)))
    # Two rows with the same timestamp are ordered by id.
    twins = insert(s, memory(created_at=base + 3, id="0" * 31 + "a"), memory(created_at=base + 3, id="0" * 31 + "b"))
    expected = sorted([*rows, *twins], key=lambda r: (r.created_at, r.id), reverse=True)
    seen: list[StoredMemory] = []
    cursor: PageCursor | None = None
    while True:
        page = s(s.store.list_memories(ALICE, MemoryFilter(), cursor, 2))
        seen += page
        if len(page) < 2:
            break
        cursor = PageCursor(page[-1].created_at, page[-1].id)
    assert [r.id for r in seen] == [r.id for r in expected]
    assert s(s.store.list_memories(BOB, MemoryFilter(), None, 10)) == []


def test_newest_memory_at_is_the_namespaces_latest_creation_time(s: Store) -> None:
    base = 1_700_000_000.0
    assert s(s.store.newest_memory_at(ALICE)) is None
    insert(s, memory(created_at=base + 5), memory(created_at=base), memory(BOB, created_at=base + 9))
    assert s(s.store.newest_memory_at(ALICE)) == base + 5
    assert s(s.store.newest_memory_at(BOB)) == base + 9


def test_count_memories_counts_one_namespace_in_every_retention_status(s: Store) -> None:
    assert s(s.store.count_memories(ALICE)) == 0
    insert(s, memory(), memory(retention_status=RetentionStatus.ARCHIVED), memory(BOB))
    assert s(s.store.count_memories(ALICE)) == 2
    assert s(s.store.count_memories(BOB)) == 1


def test_list_filters(s: Store) -> None:
    base = 1_700_000_000.0
    a = memory(created_at=base, tags=("food", "travel"), tier=Tier.HOT, importance=0.9)
    b = memory(created_at=base + 1, tags=("work",), tier=Tier.WARM, session_id="s2", role=Role.ASSISTANT)
    c = memory(created_at=base + 2, tags=(), kind=MemoryKind.PREFERENCE, importance=0.3)
    d = memory(created_at=base + 3, tags=("food",), retention_status=RetentionStatus.ARCHIVED)
    e = memory(created_at=base + 4, tags=("it's", 'a"b'))
    insert(s, a, b, c, d, e)

    def ids(**f: Any) -> list[str]:
        return [r.id for r in s(s.store.list_memories(ALICE, MemoryFilter(**f), None, 100))]

    assert ids() == [e.id, c.id, b.id, a.id]
    assert ids(include_inactive=True) == [e.id, d.id, c.id, b.id, a.id]
    assert ids(tags_any=("food",)) == [a.id]
    assert ids(tags_any=("food", "work")) == [b.id, a.id]
    assert ids(tags_any=("food",), include_inactive=True) == [d.id, a.id]
    assert ids(tags_any=("it's", 'a"b')) == [e.id]
    assert ids(tags_any=("foo",)) == []
    assert ids(tier=Tier.WARM) == [b.id]
    assert ids(session_id="s2") == [b.id]
    assert ids(min_importance=0.5) == [e.id, b.id, a.id]
    assert ids(roles=(Role.ASSISTANT,)) == [b.id]
    assert ids(roles=(Role.ASSISTANT, Role.USER)) == [e.id, c.id, b.id, a.id]
    assert ids(kinds=(MemoryKind.PREFERENCE,)) == [c.id]
    assert ids(created_after=base + 1, created_before=base + 4) == [c.id, b.id]
    assert ids(tags_any=("food", "work"), tier=Tier.HOT) == [a.id]


# -- outbox -----------------------------------------------------------------------------------


def test_memories_of_another_embedding_version_are_marked_for_re_embedding(s: Store) -> None:
    old = time.time() - 100
    rows = insert(
        s,
        memory(created_at=old, embedding_version="minilm@1", indexed=True),
        memory(created_at=old + 1, embedding_version="minilm@0", indexed=True),
        memory(BOB, created_at=old + 2, embedding_version="minilm@1+int8", indexed=True),
    )
    for row in rows:
        s(s.store.mark_indexed([IndexTicket(row.id, row.revision)]))
    assert s(s.store.count_pending_index()) == 0
    assert s(s.store.other_embedding_versions("minilm@1+int8")) == ["minilm@0", "minilm@1"]
    assert s(s.store.reembed_as("minilm@1+int8")) == 2
    assert s(s.store.other_embedding_versions("minilm@1+int8")) == []
    # Waiting for the reconciler, in their old order; the row already of this version is untouched.
    assert [r.id for r in s(s.store.pending_index(10, time.time()))] == [rows[0].id, rows[1].id]
    assert {r.embedding_version for r in s(s.store.pending_index(10, time.time()))} == {"minilm@1+int8"}
    assert s(s.store.reembed_as("minilm@1+int8")) == 0


def test_mark_indexed_is_guarded_by_revision(s: Store) -> None:
    row = insert(s, memory(created_at=time.time() - 100))[0]
    assert s(s.store.count_pending_index()) == 1
    stale = IndexTicket(row.id, row.revision)
    updated = s(s.store.update_memory(ALICE, row.id, {"importance": 0.1}, time.time() - 50))
    assert updated is not None
    # A vector written for the old revision must not mark the new one indexed.
    s(s.store.mark_indexed([stale]))
    assert s(s.store.count_pending_index()) == 1
    assert [r.id for r in s(s.store.pending_index(10, time.time()))] == [row.id]
    s(s.store.mark_indexed([IndexTicket(row.id, updated.revision), IndexTicket("missing", 0)]))
    s(s.store.mark_indexed([]))
    assert s(s.store.count_pending_index()) == 0
    assert s(s.store.pending_index(10, time.time())) == []
    assert s(s.store.fetch_memories(ALICE, [row.id]))[0].indexed


def test_pending_index_respects_age_and_limit(s: Store) -> None:
    now = time.time()
    old = insert(s, *(memory(created_at=now - 100 + i) for i in range(3)))
    insert(s, memory(created_at=now))
    assert [r.id for r in s(s.store.pending_index(10, now - 10))] == [r.id for r in old]
    assert [r.id for r in s(s.store.pending_index(2, now - 10))] == [r.id for r in old[:2]]
    assert s(s.store.count_pending_index()) == 4


# -- bookkeeping ------------------------------------------------------------------------------


def test_record_recalls_counts_and_keeps_the_latest_access(s: Store) -> None:
    a, b = insert(s, memory(), memory())
    bobs = insert(s, memory(BOB))[0]
    events = [
        RecallEvent(a.id, ALICE, "r1", 0.9, 1, 1000.0),
        RecallEvent(a.id, ALICE, "r2", 0.8, 1, 3000.0),
        RecallEvent(a.id, ALICE, "r3", 0.7, 2, 2000.0),
        RecallEvent(b.id, ALICE, "r1", 0.5, 2, 1000.0),
        # The namespace guards the row: another user's event never touches it.
        RecallEvent(bobs.id, ALICE, "r1", 0.5, 3, 1000.0),
    ]
    s(s.store.record_recalls(events))
    s(s.store.record_recalls([]))
    got = {r.id: r for r in s(s.store.fetch_memories(ALICE, [a.id, b.id]))}
    assert (got[a.id].usage_count, got[a.id].last_accessed_at) == (3, 3000.0)
    assert (got[b.id].usage_count, got[b.id].last_accessed_at) == (1, 1000.0)
    assert s(s.store.fetch_memories(BOB, [bobs.id]))[0].usage_count == 0

    # One event row per recall, however the counts were batched (DESIGN.md, stage 6).
    def recall_rows() -> Program[list[tuple[Any, ...]]]:
        sql = "SELECT memory_id, request_id, rank FROM memory_events WHERE event = 'recall' ORDER BY request_id, rank"
        return (yield q(sql)).rows

    rows = [tuple(r) for r in s(s.store._read(recall_rows()))]
    assert rows == [(a.id, "r1", 1), (b.id, "r1", 2), (bobs.id, "r1", 3), (a.id, "r2", 1), (a.id, "r3", 2)]


def test_prune_recall_events_deletes_the_old_ones_of_one_namespace_in_bounded_steps(s: Store) -> None:
    a = insert(s, memory())[0]
    bobs = insert(s, memory(BOB))[0]
    s(s.store.record_recalls([RecallEvent(a.id, ALICE, f"r{i}", 0.5, 1, 100.0 + i) for i in range(5)]))
    s(s.store.record_recalls([RecallEvent(bobs.id, BOB, "b", 0.5, 1, 100.0)]))
    s(s.store.record_feedback(ALICE, "r0", [a.id], [], 100.0))

    def left() -> Program[list[tuple[Any, ...]]]:
        return (yield q("SELECT ns, event, request_id FROM memory_events ORDER BY ns, at, event")).rows

    # Older than 104: four of Alice's five, two at a time, oldest first.
    assert s(s.store.prune_recall_events(ALICE, 104.0, 2)) == 2
    assert s(s.store.prune_recall_events(ALICE, 104.0, 2)) == 2
    assert s(s.store.prune_recall_events(ALICE, 104.0, 2)) == 0
    assert sorted(tuple(r[1:]) for r in s(s.store._read(left()))) == [("recall", "b"), ("recall", "r4"), ("used", "r0")]


def test_concurrent_recalls_lose_no_increment(s: Store) -> None:
    row = insert(s, memory())[0]

    async def many() -> None:
        await asyncio.gather(
            *(s.store.record_recalls([RecallEvent(row.id, ALICE, f"r{i}", 0.5, 1, 100.0 + i)]) for i in range(10))
        )

    s(many())
    got = s(s.store.fetch_memories(ALICE, [row.id]))[0]
    assert (got.usage_count, got.last_accessed_at) == (10, 109.0)


# -- API keys ---------------------------------------------------------------------------------


def test_api_keys(s: Store) -> None:
    first = ApiKeyRecord("k1", b"\x00hash", "acme", "default", "development", frozenset(Permission), 10.0)
    second = ApiKeyRecord(
        "k2", b"hash2", "globex", "p", "production", frozenset({Permission.READ}), 20.0, 99.0, None, "ci key"
    )
    assert s(s.store.list_api_keys()) == []
    s(s.store.insert_api_key(second))
    s(s.store.insert_api_key(first))
    assert s(s.store.get_api_key("k1")) == first
    assert s(s.store.get_api_key("k2")) == second
    assert s(s.store.get_api_key("nope")) is None
    assert s(s.store.list_api_keys()) == [first, second]
    assert s(s.store.revoke_api_key("k1", 30.0))
    assert not s(s.store.revoke_api_key("k1", 40.0))
    assert not s(s.store.revoke_api_key("nope", 40.0))
    assert s(s.store.get_api_key("k1")) == dataclasses.replace(first, revoked_at=30.0)


# -- data keys --------------------------------------------------------------------------------


def test_data_keys_first_writer_wins(s: Store) -> None:
    assert s(s.store.get_data_key(ALICE)) is None
    first = WrappedDataKey(ALICE.digest, 1, 1, b"\x00first")
    assert s(s.store.put_data_key_if_absent(ALICE, first)) == first
    assert s(s.store.put_data_key_if_absent(ALICE, WrappedDataKey(ALICE.digest, 1, 2, b"second"))) == first
    assert s(s.store.get_data_key(ALICE)) == first
    assert s(s.store.get_data_key(BOB)) is None
    newer = WrappedDataKey(ALICE.digest, 2, 2, b"rotated")
    assert s(s.store.put_data_key_if_absent(ALICE, newer)) == newer
    assert s(s.store.get_data_key(ALICE)) == newer


def test_data_key_race_agrees_on_one_key(s: Store) -> None:
    async def race() -> list[WrappedDataKey]:
        return list(
            await asyncio.gather(
                *(
                    s.store.put_data_key_if_absent(BOB, WrappedDataKey(BOB.digest, 1, 1, bytes([i]) * 8))
                    for i in range(8)
                )
            )
        )

    results = s(race())
    assert len(set(results)) == 1
    assert s(s.store.get_data_key(BOB)) == results[0]


# -- vector placements ------------------------------------------------------------------------


def test_placements_fill_shards_in_order(s: Store) -> None:
    assert s(s.store.get_placement("d1", "pfx")) is None
    p1 = s(s.store.assign_placement("d1", "pfx", 2))
    assert (p1.collection, p1.partition) == ("pfx_s0000", "p_d1")
    assert s(s.store.assign_placement("d1", "pfx", 2)) == p1
    assert s(s.store.get_placement("d1", "pfx")) == p1
    assert s(s.store.assign_placement("d2", "pfx", 2)).collection == "pfx_s0000"
    assert s(s.store.assign_placement("d3", "pfx", 2)).collection == "pfx_s0001"
    # Another prefix (embedding version) has its own shards.
    assert s(s.store.assign_placement("d1", "other", 2)).collection == "other_s0000"
    assert s(s.store.get_placement("d3", "other")) is None


def test_concurrent_placements_never_overfill_a_shard(s: Store) -> None:
    async def race() -> list[Any]:
        return list(await asyncio.gather(*(s.store.assign_placement(f"n{i}", "race", 3) for i in range(10))))

    placements = s(race())
    per_collection: dict[str, int] = {}
    for p in placements:
        per_collection[p.collection] = per_collection.get(p.collection, 0) + 1
    assert max(per_collection.values()) <= 3
    assert len({p.partition for p in placements}) == 10


# -- sessions ---------------------------------------------------------------------------------


def test_session_neighbors(s: Store) -> None:
    base = 1_700_000_000.0
    s1 = [memory(created_at=base + i, session_id="s1") for i in range(6)]
    other = memory(created_at=base + 2.5, session_id="s2")
    loose = memory(created_at=base + 2.6, session_id="")
    archived = memory(created_at=base + 3.5, session_id="s1", retention_status=RetentionStatus.ARCHIVED)
    bobs = memory(BOB, created_at=base + 2.7, session_id="s1")
    insert(s, *s1, other, loose, archived, bobs)

    def ids(anchors: list[StoredMemory], window: int, include_inactive: bool = False) -> list[str]:
        rows = s(s.store.session_neighbors(ALICE, [a.id for a in anchors], window, include_inactive))
        return [r.id for r in rows]

    # One before and one after, by time; the anchor itself, other sessions and users never.
    assert ids([s1[2]], 1) == [s1[1].id, s1[3].id]
    assert ids([s1[2]], 2) == [s1[0].id, s1[1].id, s1[3].id, s1[4].id]
    assert ids([s1[0]], 1) == [s1[1].id]
    assert ids([s1[3]], 1, include_inactive=True) == [s1[2].id, archived.id]
    assert ids([s1[1], s1[4]], 1) == [s1[0].id, s1[2].id, s1[3].id, s1[5].id]
    assert ids([loose], 3) == []
    assert ids([s1[2]], 0) == []
    assert ids([], 2) == []


# -- master-key rotation ----------------------------------------------------------------------


def test_stale_data_keys_page_in_order_and_rewrap_is_compare_and_set(s: Store) -> None:
    insert(s, memory(ALICE), memory(BOB))
    keys = {
        ns: s(s.store.put_data_key_if_absent(ns, WrappedDataKey(ns.digest, 1, 1, ns.user_id.encode())))
        for ns in (ALICE, BOB)
    }
    orphan = Namespace("acme", "default", "development", "nobody")  # a key without memories
    s(s.store.put_data_key_if_absent(orphan, WrappedDataKey(orphan.digest, 1, 1, b"o")))
    current = Namespace("acme", "default", "development", "current")
    s(s.store.put_data_key_if_absent(current, WrappedDataKey(current.digest, 1, 2, b"c")))

    stale = s(s.store.stale_data_keys(2, ("", 0), 10))
    assert [k.key.namespace_digest for k in stale] == sorted([ALICE.digest, BOB.digest, orphan.digest])
    named = {k.key.namespace_digest: k.namespace for k in stale}
    assert named == {ALICE.digest: ALICE, BOB.digest: BOB, orphan.digest: None}
    first = s(s.store.stale_data_keys(2, ("", 0), 1))
    rest = s(s.store.stale_data_keys(2, (first[0].key.namespace_digest, first[0].key.version), 10))
    assert [*first, *rest] == stale

    alice = keys[ALICE]
    assert s(s.store.rewrap_data_key(alice, 2, b"rewrapped"))
    assert s(s.store.get_data_key(ALICE)) == WrappedDataKey(ALICE.digest, 1, 2, b"rewrapped")
    # A second rotator holding the old wrapping loses: the stored key changed meanwhile.
    assert not s(s.store.rewrap_data_key(alice, 3, b"late"))
    assert s(s.store.get_data_key(ALICE)) == WrappedDataKey(ALICE.digest, 1, 2, b"rewrapped")
    assert ALICE.digest not in [k.key.namespace_digest for k in s(s.store.stale_data_keys(2, ("", 0), 10))]


# -- replicas racing for the maintenance lease -------------------------------------------------


def test_one_of_many_replicas_racing_for_the_lease_wins(s: Store) -> None:
    now = time.time()

    async def race() -> list[bool]:
        return list(
            await asyncio.gather(*(s.store.acquire_lease("maintenance", f"replica-{i}", now, 60) for i in range(8)))
        )

    won = s(race())
    assert won.count(True) == 1
    winner = f"replica-{won.index(True)}"
    assert s(s.store.acquire_lease("maintenance", winner, now + 1, 60))  # renewal
    assert not s(s.store.acquire_lease("maintenance", "late", now + 1, 60))
    assert s(s.store.acquire_lease("maintenance", "late", now + 62, 60))  # after expiry


# -- outages (PostgreSQL) ---------------------------------------------------------------------


def test_an_unreachable_postgres_is_unavailable(loop_thread: LoopThread) -> None:
    store = PostgresRecordStore("postgresql://postgres@127.0.0.1:1/test", timeout_s=1.0)

    async def calls() -> None:
        try:
            for call in (store.ping(), store.check_schema(), store.insert_memories([memory()])):
                with pytest.raises(Unavailable):
                    await call
        finally:
            await store.close()

    loop_thread.run(calls())


def test_a_read_only_postgres_is_unavailable_for_writes(loop_thread: LoopThread) -> None:
    with fresh_schema() as url:
        writable = PostgresRecordStore(url)
        # A standby after a failover: reads answer, writes must be retried elsewhere.
        standby = PostgresRecordStore(url + "%20-cdefault_transaction_read_only%3Don")

        async def calls() -> None:
            try:
                await writable.migrate()
                await standby.ping()
                assert await standby.fetch_memories(ALICE, ["x"]) == []
                with pytest.raises(Unavailable):
                    await standby.insert_memories([memory()])
            finally:
                await writable.close()
                await standby.close()

        loop_thread.run(calls())
