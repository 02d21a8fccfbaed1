"""The record store's session-neighbour query (context expansion) on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from memsvc.domain.models import RetentionStatus
from tests.integration.test_record_store_contract import (  # noqa: F401 - fixtures used by name
    ALICE,
    BOB,
    Store,
    fresh,
    insert,
    memory,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def s(fresh: Store) -> Store:  # noqa: F811 - the imported fixture, requested by name
    """A migrated store, SQLite and PostgreSQL."""
    fresh(fresh.store.migrate())
    return fresh


def test_neighbors_are_the_turns_around_each_anchor_in_its_session(s: Store) -> None:
    base = 1_700_000_000.0
    session = insert(s, *[memory(created_at=base + i, session_id="s1") for i in range(7)])
    other = insert(s, *[memory(created_at=base + i, session_id="s2") for i in range(3)])
    insert(s, memory(BOB, created_at=base + 3.5, session_id="s1"))  # same session name, other user
    got = s(s.store.session_neighbors(ALICE, [session[3].id, other[0].id], 1))
    assert [r.id for r in got] == [other[1].id, session[2].id, session[4].id]  # by created_at
    wider = s(s.store.session_neighbors(ALICE, [session[3].id], 2))
    assert [r.id for r in wider] == [session[1].id, session[2].id, session[4].id, session[5].id]
    # Two anchors next to each other: neither comes back as the other's neighbour.
    pair = s(s.store.session_neighbors(ALICE, [session[0].id, session[1].id], 1))
    assert [r.id for r in pair] == [session[2].id]


def test_neighbors_skip_sessionless_and_inactive_rows(s: Store) -> None:
    base = 1_700_000_000.0
    rows = insert(
        s,
        memory(created_at=base, session_id="s1"),
        memory(created_at=base + 1, session_id="s1", retention_status=RetentionStatus.ARCHIVED),
        memory(created_at=base + 2, session_id="s1"),
        memory(created_at=base + 3, session_id=""),
    )
    assert [r.id for r in s(s.store.session_neighbors(ALICE, [rows[0].id], 1))] == [rows[2].id]
    assert [r.id for r in s(s.store.session_neighbors(ALICE, [rows[0].id], 1, include_inactive=True))] == [rows[1].id]
    assert s(s.store.session_neighbors(ALICE, [rows[3].id], 2)) == []
    assert s(s.store.session_neighbors(ALICE, [], 2)) == []
