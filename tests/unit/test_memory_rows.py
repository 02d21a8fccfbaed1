"""A record-store row decodes to the memory it holds, sharing the namespace it was read from."""

from __future__ import annotations

import json
import math

from memsvc.domain.models import Namespace, Role, SealedContent
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
