"""The AddMemories walk on in-memory stores: creates, repeats, contradictions, replays.

The e2e suites drive the same path through gRPC on the real stores; these pin the walk's own
decisions quickly, and that nothing it has just sealed is decrypted again.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from memsvc.config import Settings
from memsvc.deadline import Deadline
from memsvc.domain.models import MemoryChange, NewMemory, Permission, Principal, RetentionStatus
from memsvc.memories.changes import NamespaceChanges
from memsvc.memories.codec import MemoryCodec
from memsvc.memories.indexer import Indexer
from memsvc.pipeline.validation import Limits
from memsvc.pipeline.write import facts
from memsvc.pipeline.write.path import AddResult, WriteOutcome, WritePath
from memsvc.pipeline.write.review import RuleDetector, WriteReview
from tests.fakes import FakeRecordStore, FakeVectorIndex, HashEmbedder, codec_over

PRINCIPAL = Principal("key-1", "acme", "default", "development", frozenset(Permission))


class RecordingChanges(NamespaceChanges):
    def __init__(self) -> None:
        self.changed_namespaces: list[Any] = []

    async def changed(self, namespace: Any) -> None:
        self.changed_namespaces.append(namespace)


@dataclass
class Walk:
    store: FakeRecordStore
    index: FakeVectorIndex
    codec: MemoryCodec
    changes: RecordingChanges
    writes: WritePath
    opened: list[str]

    def add(self, *contents: str, user: str = "u1", **fields: Any) -> list[AddResult]:
        items = [NewMemory(content=c, **fields) for c in contents]
        return asyncio.run(self.writes.add_detailed(PRINCIPAL, user, items, Deadline(None)))


@pytest.fixture
def walk() -> Walk:
    store = FakeRecordStore()
    index = FakeVectorIndex()
    codec = codec_over(store)
    opened: list[str] = []
    real_open = codec.open

    async def counting_open(row: Any) -> Any:
        opened.append(row.id)
        return await real_open(row)

    codec.open = counting_open  # type: ignore[method-assign]
    changes = RecordingChanges()
    embedder = HashEmbedder()
    writes = WritePath(
        store=store,  # type: ignore[arg-type]
        embedder=embedder,
        codec=codec,
        indexer=Indexer(store, index, embedder, None),  # type: ignore[arg-type]
        changes=changes,
        limits=Limits.from_settings(Settings()),
        review=WriteReview(store=store, index=index, codec=codec, detector=RuleDetector()),  # type: ignore[arg-type]
    )
    return Walk(store, index, codec, changes, writes, opened)


def test_new_memories_are_stored_indexed_and_never_decrypted_after_sealing(walk: Walk) -> None:
    results = walk.add("I prefer window seats on long flights", "My sister Ana lives in Lisbon")

    assert [r.outcome for r in results] == [WriteOutcome.CREATED, WriteOutcome.CREATED]
    assert [r.memory.content for r in results] == [
        "I prefer window seats on long flights",
        "My sister Ana lives in Lisbon",
    ]
    rows = walk.store.rows
    assert set(rows) == {r.memory.id for r in results}
    assert all(row.indexed for row in rows.values())
    assert set(walk.index.items[results[0].memory.namespace]) == set(rows)
    assert [v.change for v in walk.store.versions] == [MemoryChange.CREATE, MemoryChange.CREATE]
    assert walk.opened == [], "the walk decrypted rows it had just sealed"
    # What is stored is ciphertext that opens to what was written.
    stored = asyncio.run(walk.codec.open(rows[results[1].memory.id]))
    assert stored.content == "My sister Ana lives in Lisbon"
    assert len(walk.changes.changed_namespaces) == 1


def test_a_write_parses_each_text_for_claims_once(walk: Walk, monkeypatch: pytest.MonkeyPatch) -> None:
    """Importance, the repeat check and the contradiction check all read a text's claims; the
    call's cache parses each once (and is dropped with the call, as plaintext must be)."""
    parsed: list[str] = []
    real = facts._sentence_claims

    def counting(sentence: str, own: bool) -> Any:
        parsed.append(sentence)
        return real(sentence, own)

    monkeypatch.setattr(facts, "_sentence_claims", counting)  # under every way in to the parser
    walk.add("I live in Lisbon")
    parsed.clear()
    # The stored memory is a candidate of both new texts, and the first new text is the same.
    repeat, moved = walk.add("I live in Lisbon", "I live in Porto")

    assert repeat.outcome is WriteOutcome.CONFIRMED_EXISTING
    assert moved.superseded_ids == (repeat.memory.id,)
    assert sorted(parsed) == ["I live in Lisbon", "I live in Porto"]


def test_a_repeat_within_one_call_confirms_the_first_item(walk: Walk) -> None:
    first, repeat = walk.add("I am allergic to peanuts", "I am allergic to peanuts")

    assert first.outcome is WriteOutcome.CREATED
    assert repeat.outcome is WriteOutcome.CONFIRMED_EXISTING
    assert repeat.memory.id == first.memory.id
    assert "of the same request" in repeat.reason
    (row,) = walk.store.rows.values()
    assert row.confirmation_count == 2
    assert [(v.change, v.version) for v in walk.store.versions] == [(MemoryChange.CREATE, 1), (MemoryChange.CONFIRM, 2)]
    assert walk.opened == []


def test_a_repeat_of_a_stored_memory_confirms_it_without_a_new_row(walk: Walk) -> None:
    (first,) = walk.add("I am allergic to peanuts")
    (again,) = walk.add("I am allergic to peanuts")

    assert again.outcome is WriteOutcome.CONFIRMED_EXISTING
    assert again.memory.id == first.memory.id
    assert again.memory.confirmation_count == 2
    assert again.memory.content == "I am allergic to peanuts"
    assert len(walk.store.rows) == 1


def test_a_contradiction_supersedes_the_older_memory(walk: Walk) -> None:
    (old,) = walk.add("My sister lives in Lisbon")
    (new,) = walk.add("My sister moved to Madrid")

    assert new.outcome is WriteOutcome.CREATED
    assert new.superseded_ids == (old.memory.id,)
    replaced = walk.store.rows[old.memory.id]
    assert replaced.retention_status is RetentionStatus.SUPERSEDED
    assert replaced.superseded_by == new.memory.id
    # The index follows the row, so recall's default filter no longer finds the old one.
    assert walk.index.items[old.memory.namespace][old.memory.id].retention_status is RetentionStatus.SUPERSEDED


def test_a_replayed_idempotency_key_returns_the_stored_memory_and_writes_nothing(walk: Walk) -> None:
    (first,) = walk.add("Book the dentist for Tuesday", idempotency_key="req-1")
    versions_before = len(walk.store.versions)
    (replay,) = walk.add("Book the dentist for Tuesday", idempotency_key="req-1")

    assert replay.outcome is WriteOutcome.IDEMPOTENT_REPLAY
    assert replay.memory.id == first.memory.id
    assert len(walk.store.rows) == 1
    assert len(walk.store.versions) == versions_before


def test_users_do_not_review_against_each_other(walk: Walk) -> None:
    (mine,) = walk.add("I am allergic to peanuts", user="alice")
    (theirs,) = walk.add("I am allergic to peanuts", user="bob")

    assert theirs.outcome is WriteOutcome.CREATED
    assert theirs.memory.id != mine.memory.id


def test_a_contradiction_within_one_call_is_found_past_replays_and_unrelated_items(walk: Walk) -> None:
    (kept,) = walk.add("I keep bees", idempotency_key="bees")
    # A replay (no new vector), an unrelated item, then the contradiction of the second item.
    replay, lisbon, colour, porto = asyncio.run(
        walk.writes.add_detailed(
            PRINCIPAL,
            "u1",
            [
                NewMemory(content="I keep bees", idempotency_key="bees"),
                NewMemory(content="I live in Lisbon"),
                NewMemory(content="My favourite colour is green"),
                NewMemory(content="I live in Porto"),
            ],
            Deadline(None),
        )
    )

    assert replay.outcome is WriteOutcome.IDEMPOTENT_REPLAY
    assert replay.memory.id == kept.memory.id
    assert porto.superseded_ids == (lisbon.memory.id,)
    assert colour.superseded_ids == ()
    assert walk.store.rows[lisbon.memory.id].retention_status is RetentionStatus.SUPERSEDED


def test_only_what_a_review_can_use_is_decrypted(walk: Walk) -> None:
    """Near stored memories are read for a statement with a claim to contradict, or when they
    are near enough to be repeated; a claim-less statement leaves the others sealed."""
    (harbour,) = walk.add("The harbour was grey and quiet this morning")
    (lisbon,) = walk.add("I live in Lisbon")
    walk.opened.clear()

    (evening,) = walk.add("The harbour was grey and busy this evening")
    assert evening.outcome is WriteOutcome.CREATED
    assert walk.opened == []

    (porto,) = walk.add("I live in Porto")
    assert porto.superseded_ids == (lisbon.memory.id,)
    assert lisbon.memory.id in walk.opened

    walk.opened.clear()
    (again,) = walk.add("The harbour was grey and quiet this morning")
    assert again.outcome is WriteOutcome.CONFIRMED_EXISTING and again.memory.id == harbour.memory.id
    assert harbour.memory.id in walk.opened
