"""A record-store row decodes to the memory it holds, sharing the namespace it was read from."""

from __future__ import annotations

import json
import math

import pytest

from memsvc.domain.models import (
    Memory,
    MemoryKind,
    Namespace,
    RetentionStatus,
    Role,
    SealedContent,
    StoredMemory,
    Tier,
)
from memsvc.memories.codec import memory_of
from memsvc.stores.records.rows import MEMORY_COLUMNS, memory_from_row

ALICE = Namespace("acme", "default", "development", "alice")


def row_of(namespace: Namespace, **columns: object) -> tuple[object, ...]:
    values: dict[str, object] = {
        "id": "m1",
        "tenant": namespace.tenant,
        "project": namespace.project,
        "environment": namespace.environment,
        "user_id": namespace.user_id,
        "ciphertext": b"sealed",
        "role": "user",
        "kind": "fact",
        "tags": '["travel"]',
        "session_id": "s1",
        "importance": 0.7,
        "tier": "hot",
        "created_at": 1.0,
        "updated_at": 2.0,
        "usage_count": 3,
        "last_accessed_at": None,
        "quality": 0.5,
        "consistency": 1.0,
        "decay": 1.0,
        "retention_status": "active",
        "embedding_version": "v1",
        "superseded_by": "",
        "idempotency_key": None,
        "indexed": 1,
        "revision": 4,
        "expires_at": None,
        "confirmation_count": 1,
        "score_reasons": json.dumps({"importance": "set by the caller"}),
        "vitality": 1.0,
        "source_ids": "[]",
        "extraction_pending": 0,
        "stale": 0,
        "acknowledgement": 0,
    }
    values.update(columns)
    return tuple(values[name] for name in MEMORY_COLUMNS.split(", "))


def test_a_row_of_the_namespace_read_shares_its_instance() -> None:
    memory = memory_from_row(row_of(ALICE), ALICE)
    assert memory.namespace is ALICE
    assert (memory.id, memory.role, memory.tags, memory.usage_count, memory.idempotency_key) == (
        "m1",
        Role.USER,
        ("travel",),
        3,
        "",
    )
    assert memory.score_reasons == {"importance": "set by the caller"}


def test_a_row_of_another_namespace_keeps_its_own() -> None:
    for other in (
        Namespace("acme", "default", "development", "bob"),
        Namespace("other", "default", "development", "alice"),
        Namespace("acme", "web", "development", "alice"),
        Namespace("acme", "default", "production", "alice"),
    ):
        memory = memory_from_row(row_of(other), ALICE)
        assert memory.namespace == other and memory.namespace.digest == other.digest
    assert memory_from_row(row_of(ALICE)).namespace == ALICE


def test_sealed_content_reads_back_everything_it_writes() -> None:
    # orjson reads the common case; NaN and Infinity, which json.dumps writes and orjson
    # refuses, still read back (metadata imported from JSON Lines may hold them).
    plain = SealedContent('café ☕ "quoted"', {"n": 1.5, "list": [1, "two"]}, "Ana", "index text")
    assert SealedContent.from_bytes(plain.to_bytes()) == plain
    odd = SealedContent("x", {"nan": float("nan"), "inf": float("inf")})
    back = SealedContent.from_bytes(odd.to_bytes())
    assert math.isnan(back.metadata["nan"]) and back.metadata["inf"] == float("inf")


# A value per column that no other column holds, so a decoder that puts one in the wrong field
# (both memories are built positionally) fails.
DISTINCT_COLUMNS: dict[str, object] = {
    "id": "m7",
    "ciphertext": b"sealed-7",
    "role": "assistant",
    "kind": "preference",
    "tags": '["t8"]',
    "session_id": "s9",
    "importance": 0.10,
    "tier": "warm",
    "created_at": 12.0,
    "updated_at": 13.0,
    "usage_count": 14,
    "last_accessed_at": 15.0,
    "quality": 0.16,
    "consistency": 0.17,
    "decay": 0.18,
    "retention_status": "superseded",
    "embedding_version": "e20",
    "superseded_by": "m21",
    "idempotency_key": "k22",
    "revision": 24,
    "expires_at": 25.0,
    "confirmation_count": 26,
    "score_reasons": json.dumps({"quality": "r27"}),
    "vitality": 0.28,
    "source_ids": '["m29"]',
}
DECODED: dict[str, object] = {
    **DISTINCT_COLUMNS,
    "role": Role.ASSISTANT,
    "kind": MemoryKind.PREFERENCE,
    "tags": ("t8",),
    "tier": Tier.WARM,
    "retention_status": RetentionStatus.SUPERSEDED,
    "score_reasons": {"quality": "r27"},
    "source_ids": ("m29",),
}


@pytest.mark.parametrize("flags", [(1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1)])
def test_every_column_reaches_its_own_field_of_the_row_and_of_the_opened_memory(
    flags: tuple[int, int, int, int],
) -> None:
    indexed, pending, stale, acknowledgement = flags
    stored = memory_from_row(
        row_of(
            ALICE,
            **DISTINCT_COLUMNS,
            indexed=indexed,
            extraction_pending=pending,
            stale=stale,
            acknowledgement=acknowledgement,
        ),
        ALICE,
    )
    expected = {
        **DECODED,
        "indexed": bool(indexed),
        "extraction_pending": bool(pending),
        "stale": bool(stale),
        "acknowledgement": bool(acknowledgement),
    }
    assert {name: getattr(stored, name) for name in expected} == expected
    assert set(StoredMemory._fields) == {*expected, "namespace"}

    memory = memory_of(stored, SealedContent("text", {"k": 1}, "Ana", "index text"))
    shared = set(Memory._fields) & set(StoredMemory._fields)
    assert {name: getattr(memory, name) for name in shared} == {name: getattr(stored, name) for name in shared}
    assert (memory.content, memory.metadata, memory.speaker_name, memory.index_text) == (
        "text",
        {"k": 1},
        "Ana",
        "index text",
    )
    assert set(Memory._fields) - shared == {"content", "metadata", "speaker_name", "index_text"}
