"""The lifecycle methods of the record stores, the same tests against SQLite and PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsvc.domain.models import (
    MemoryChange,
    MemoryKind,
    Namespace,
    RetentionStatus,
    Role,
    StoredMemory,
    StoredVersion,
    Tier,
    new_memory_id,
    new_version_id,
)
from memsvc.stores.records.base import MaintenanceUpdate, RecordStore, UsageStats
from memsvc.stores.records.migrations import POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS, Migration
from memsvc.stores.records.postgres import PostgresRecordStore
from memsvc.stores.records.sqlite import SqliteRecordStore
from tests.backends import fresh_schema
from tests.conftest import LoopThread
from tests.integration.test_record_store_contract import ALICE, BOB, Store, _open

pytestmark = pytest.mark.integration


@pytest.fixture(params=["sqlite", "postgres"])
def s(request: pytest.FixtureRequest, loop_thread: LoopThread, tmp_path: Path) -> Iterator[Store]:
    """A migrated store of each backend."""
    if request.param == "sqlite":
        yield from _migrated(SqliteRecordStore(tmp_path / "lifecycle.db"), loop_thread, SQLITE_MIGRATIONS)
        return
    with fresh_schema() as url:
        yield from _migrated(PostgresRecordStore(url), loop_thread, POSTGRES_MIGRATIONS)


def _migrated(store: RecordStore, loop_thread: LoopThread, migrations: tuple[Migration, ...]) -> Iterator[Store]:
    for opened in _open(store, loop_thread, migrations):
        opened(opened.store.migrate())
        yield opened


def row(namespace: Namespace = ALICE, key: str = "", created_at: float | None = None) -> StoredMemory:
    now = time.time() if created_at is None else created_at
    return StoredMemory(
        id=new_memory_id(now),
        namespace=namespace,
        ciphertext=b"sealed",
        role=Role.USER,
        kind=MemoryKind.FACT,
        tags=(),
        session_id="",
        importance=0.6,
        tier=Tier.HOT,
        created_at=now,
        updated_at=now,
        usage_count=0,
        last_accessed_at=None,
        quality=0.5,
        consistency=1.0,
        decay=1.0,
        retention_status=RetentionStatus.ACTIVE,
        embedding_version="v1",
        superseded_by="",
        idempotency_key=key,
        indexed=True,
        expires_at=now + 3600,
        score_reasons={"importance": "set by the caller"},
    )


def version(memory_id: str, change: MemoryChange, namespace: Namespace = ALICE, content: bool = True) -> StoredVersion:
    return StoredVersion(
        id=new_version_id(),
        memory_id=memory_id,
        namespace=namespace,
        at=time.time(),
        actor="key1",
        change=change,
        fields=("content",),
        description=change.value,
        tier=Tier.HOT,
        retention_status=RetentionStatus.ACTIVE,
        importance=0.6,
        ciphertext=b"v" if content else None,
    )


def test_new_columns_round_trip_and_versions_go_with_inserted_rows_only(s: Store) -> None:
    first = row(key="k")
    s(s.store.insert_memories([first], [version(first.id, MemoryChange.CREATE)]))
    replay = row(key="k")
    s(s.store.insert_memories([replay], [version(replay.id, MemoryChange.CREATE)]))
    got = s(s.store.fetch_memories(ALICE, [first.id]))[0]
    assert got.expires_at == pytest.approx(first.expires_at)
    assert got.confirmation_count == 1 and got.vitality == 1.0
    assert got.score_reasons == {"importance": "set by the caller"}
    assert [v.version for v in s(s.store.list_versions(ALICE, [first.id], 0, 10))] == [1]
    assert s(s.store.list_versions(ALICE, [replay.id], 0, 10)) == []
    assert [r.id for r in s(s.store.fetch_by_idempotency_keys(ALICE, ["k", "nope"]))] == [first.id]
    assert s(s.store.existing_memory_ids([first.id, replay.id])) == {first.id}


def test_confirm_supersede_and_delete_keep_a_numbered_history(s: Store) -> None:
    old, new = row(), row()
    s(s.store.insert_memories([old, new], [version(old.id, MemoryChange.CREATE), version(new.id, MemoryChange.CREATE)]))
    confirmed = s(s.store.confirm_memory(ALICE, old.id, time.time(), version(old.id, MemoryChange.CONFIRM)))
    assert confirmed is not None and confirmed.confirmation_count == 2
    assert s(s.store.confirm_memory(BOB, old.id, time.time(), version(old.id, MemoryChange.CONFIRM, BOB))) is None
    changes = {
        "retention_status": RetentionStatus.SUPERSEDED,
        "superseded_by": new.id,
        "consistency": 0.5,
        "score_reasons": {"consistency": "contradicted"},
    }
    updated = s(s.store.update_memory(ALICE, old.id, changes, time.time(), version(old.id, MemoryChange.SUPERSEDE)))
    assert updated is not None and updated.superseded_by == new.id and updated.consistency == 0.5
    assert s(s.store.superseded_ids(ALICE, new.id)) == [old.id]
    versions = s(s.store.list_versions(ALICE, [old.id], 0, 10))
    assert [(v.version, v.change) for v in versions] == [
        (1, MemoryChange.CREATE),
        (2, MemoryChange.CONFIRM),
        (3, MemoryChange.SUPERSEDE),
    ]
    assert [v.version for v in s(s.store.list_versions(ALICE, [old.id], 1, 1))] == [2]
    assert s(s.store.list_versions(BOB, [old.id], 0, 10)) == []
    s(s.store.delete_memory(ALICE, old.id, version(old.id, MemoryChange.DELETE, content=False)))
    trail = s(s.store.list_versions(ALICE, [old.id], 0, 10))
    assert [(v.change, v.ciphertext) for v in trail] == [(MemoryChange.DELETE, None)]
    s(s.store.forget_namespace(ALICE))
    assert s(s.store.list_versions(ALICE, [old.id, new.id], 0, 10)) == []


def test_feedback_is_recorded_once_per_request_and_lowers_vitality(s: Store) -> None:
    m = row()
    s(s.store.insert_memories([m]))
    assert s(s.store.record_feedback(ALICE, "req_1", [], [m.id, "f" * 32], time.time())) == [m.id]
    assert s(s.store.record_feedback(ALICE, "req_1", [m.id], [], time.time())) == []
    assert s(s.store.record_feedback(BOB, "req_2", [], [m.id], time.time())) == []
    vitality = s(s.store.fetch_memories(ALICE, [m.id]))[0].vitality
    assert vitality == pytest.approx(1 - 0.7 * 1 / 3)


def test_the_lease_admits_one_holder_until_it_expires(s: Store) -> None:
    now = time.time()
    assert s(s.store.acquire_lease("maintenance", "a", now, 60))
    assert not s(s.store.acquire_lease("maintenance", "b", now + 1, 60))
    assert s(s.store.acquire_lease("maintenance", "a", now + 2, 60))  # renewal
    assert s(s.store.acquire_lease("maintenance", "b", now + 120, 60))  # expired: taken over
    s(s.store.release_lease("maintenance", "a"))  # not the holder: no effect
    assert not s(s.store.acquire_lease("maintenance", "a", now + 121, 60))
    s(s.store.release_lease("maintenance", "b"))
    assert s(s.store.acquire_lease("maintenance", "a", now + 122, 60))


def test_maintenance_updates_are_compare_and_set(s: Store) -> None:
    a, b = row(), row(BOB)
    s(s.store.insert_memories([a, b]))
    scanned = s(s.store.scan_memories("", 10))
    assert {r.id for r in scanned} == {a.id, b.id}
    assert [r.id for r in s(s.store.scan_memories(min(a.id, b.id), 10))] == [max(a.id, b.id)]
    move = MaintenanceUpdate(a.id, ALICE.digest, a.revision, 0.4, Tier.COLD, version(a.id, MemoryChange.TIER_MOVE))
    decay_only = MaintenanceUpdate(b.id, BOB.digest, b.revision, 0.7)
    moved = s(s.store.apply_maintenance([move, decay_only], time.time()))
    assert [(r.id, r.tier, r.decay, r.indexed, r.revision) for r in moved] == [(a.id, Tier.COLD, 0.4, False, 1)]
    assert s(s.store.fetch_memories(BOB, [b.id]))[0].decay == 0.7
    # A second replica with the old revision changes nothing and records no version.
    assert s(s.store.apply_maintenance([move], time.time())) == []
    assert len(s(s.store.list_versions(ALICE, [a.id], 0, 10))) == 1


def test_usage_stats_are_kept_per_tenant(s: Store) -> None:
    assert s(s.store.get_usage_stats("acme")) is None
    s(s.store.put_usage_stats([UsageStats("acme", 1, 8, 40, 10, 1.0)]))
    s(s.store.put_usage_stats([UsageStats("acme", 2, 9, 41, 11, 2.0)]))
    assert s(s.store.get_usage_stats("acme")) == UsageStats("acme", 2, 9, 41, 11, 2.0)
