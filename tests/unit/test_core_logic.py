"""Fast tests of the core's pure logic: crypto, validation, paging, ranking, expressions."""

from __future__ import annotations

import asyncio
import base64
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsvc.config import RankWeights
from memsvc.crypto.envelope import DecryptionError, EnvelopeCipher
from memsvc.crypto.keyring import MasterKeyRing
from memsvc.domain.models import (
    Memory,
    MemoryFilter,
    MemoryKind,
    Namespace,
    NewMemory,
    RankedMemory,
    Role,
    ScoreBreakdown,
    Tier,
    WrappedDataKey,
    metadata_matches,
)
from memsvc.errors import FailedPrecondition, InvalidArgument
from memsvc.llm.dates import TimeWindow
from memsvc.pipeline.paging import PageTokens
from memsvc.pipeline.query.hydrate import Hydrated
from memsvc.pipeline.query.rank import RankStage, explain, recency_reference, unrepeated
from memsvc.pipeline.query.recall import Candidate
from memsvc.pipeline.validation import Limits, validate_new_memories, validate_query
from memsvc.pipeline.write.scoring import estimate_importance, estimate_quality
from memsvc.stores.records.base import PageCursor
from memsvc.stores.vectors.milvus import filter_expression, quote

ALICE = Namespace("acme", "web", "production", "alice")
BOB = Namespace("acme", "web", "production", "bob")
LIMITS = Limits(
    max_content_chars=100,
    max_batch_items=3,
    max_query_chars=50,
    max_results=100,
    max_tags=4,
    max_metadata_bytes=64,
    max_page_size=10,
)


class DictKeyStore:
    def __init__(self) -> None:
        self.keys: dict[str, WrappedDataKey] = {}

    async def get_data_key(self, namespace: Namespace) -> WrappedDataKey | None:
        return self.keys.get(namespace.digest)

    async def put_data_key_if_absent(self, namespace: Namespace, key: WrappedDataKey) -> WrappedDataKey:
        return self.keys.setdefault(namespace.digest, key)


def ring() -> MasterKeyRing:
    return MasterKeyRing.parse("1:" + base64.b64encode(os.urandom(32)).decode())


def test_envelope_round_trip_and_binding() -> None:
    store = DictKeyStore()
    cipher = EnvelopeCipher(ring(), store)

    async def scenario() -> None:
        sealed = await cipher.seal(ALICE, "m1", b"secret text")
        assert b"secret text" not in sealed
        assert await cipher.open(ALICE, "m1", sealed) == b"secret text"
        with pytest.raises(DecryptionError):
            await cipher.open(ALICE, "m2", sealed)  # moved to another row
        await cipher.seal(BOB, "m1", b"x")
        with pytest.raises(DecryptionError):
            await cipher.open(BOB, "m1", sealed)  # moved to another user
        del store.keys[ALICE.digest]  # crypto-shredding
        cipher.forget(ALICE)
        with pytest.raises(DecryptionError):
            await cipher.open(ALICE, "m1", sealed)

    asyncio.run(scenario())


def test_data_key_does_not_unwrap_under_another_master_key() -> None:
    store = DictKeyStore()

    async def scenario() -> None:
        sealed = await EnvelopeCipher(ring(), store).seal(ALICE, "m1", b"text")
        with pytest.raises(DecryptionError):
            await EnvelopeCipher(ring(), store).open(ALICE, "m1", sealed)

    asyncio.run(scenario())


def test_master_key_ring_parsing() -> None:
    k1, k2 = (base64.b64encode(os.urandom(32)).decode() for _ in range(2))
    parsed = MasterKeyRing.parse(f"2:{k2}, 1:{k1}")
    assert parsed.primary_version == 2
    assert set(parsed.keys) == {1, 2}
    for bad in ("", "x:abc", f"1:{base64.b64encode(b'short').decode()}"):
        with pytest.raises(FailedPrecondition):
            MasterKeyRing.parse(bad)


def test_validation_names_each_field() -> None:
    items = [
        NewMemory(content=""),
        NewMemory(content="ok", tags=("fine", "not fine")),
        NewMemory(content="ok", importance=1.5, session_id="bad session"),
        NewMemory(content="ok", created_at=4_000_000_000.0),
    ]
    with pytest.raises(InvalidArgument) as info:
        validate_new_memories("u", items, LIMITS, now=1_700_000_000.0)
    fields = {v.field for v in info.value.violations}
    assert {
        "memories",
        "memories[0].content",
        "memories[1].tags[1]",
        "memories[2].importance",
        "memories[2].session_id",
    } <= fields
    with pytest.raises(InvalidArgument) as info:
        validate_query("u", "q" * 51, 0, MemoryFilter(min_importance=-1), LIMITS)
    assert {v.field for v in info.value.violations} == {"query", "limit", "filter.min_importance"}


def test_page_tokens_bind_namespace_and_filter() -> None:
    tokens = PageTokens(b"k" * 32)
    cursor = PageCursor(1_700_000_000.5, "ab" * 16)
    token = tokens.encode(ALICE, "f1", cursor)
    assert tokens.decode(token, ALICE, "f1") == cursor
    for namespace, fingerprint, text in ((BOB, "f1", token), (ALICE, "f2", token), (ALICE, "f1", token[:-2] + "AA")):
        with pytest.raises(InvalidArgument):
            tokens.decode(text, namespace, fingerprint)
    with pytest.raises(InvalidArgument):
        PageTokens(b"o" * 32).decode(token, ALICE, "f1")


def memory(importance: float = 0.6, created_at: float = 1_000.0, usage: int = 0) -> Memory:
    return Memory(
        id="m" * 32, namespace=ALICE, content="c", importance=importance, created_at=created_at, usage_count=usage
    )


def test_rank_weights_gate_and_explanation() -> None:
    stage = RankStage(RankWeights(), recency_half_life_days=30, usage_saturation=10)
    now = 1_000.0 + 30 * 86_400
    items = [
        Hydrated(memory(0.9), Candidate("a", similarity=0.9)),
        Hydrated(memory(0.2), Candidate("b", similarity=0.99)),
        Hydrated(memory(0.6, created_at=now), Candidate("c", similarity=0.5)),
    ]
    ordering = stage.order(items, min_importance=0.5, now=now)
    assert ordering.dropped_by_importance == 1
    top = ordering.scored[0]
    assert top.breakdown.recency == pytest.approx(0.5)
    assert top.breakdown.semantic == pytest.approx(0.9)
    assert 0 <= top.score <= 1
    assert explain(ordering.scored, now).startswith("Top match is a fact")
    assert stage.order(items, min_importance=0.0, now=now).dropped_by_importance == 0


def test_recency_counts_from_the_users_newest_memory_never_from_the_future() -> None:
    now = 1_000.0 + 400 * 86_400
    assert recency_reference(1_000.0, now) == 1_000.0  # a user who last spoke 400 days ago
    assert recency_reference(None, now) == now  # no memory yet
    assert recency_reference(now + 86_400, now) == now  # a memory dated tomorrow
    stage = RankStage(RankWeights(), recency_half_life_days=365, usage_saturation=10)
    items = [
        Hydrated(memory(created_at=1_000.0), Candidate("a", similarity=0.8)),
        Hydrated(memory(created_at=1_000.0 - 365 * 86_400), Candidate("b", similarity=0.8)),
    ]
    ordering = stage.order(items, min_importance=0.0, now=recency_reference(1_000.0, now))
    assert [s.breakdown.recency for s in ordering.scored] == pytest.approx([1.0, 0.5])
    # "Where did I live before I moved?" asks for the older: recency does not prefer the newest.
    before = stage.order(items, min_importance=0.0, now=1_000.0, about_the_past=True)
    assert [s.breakdown.recency for s in before.scored] == [1.0, 1.0]


def test_a_time_the_query_names_makes_recency_nearness_to_it() -> None:
    day = 86_400.0
    stage = RankStage(RankWeights(), recency_half_life_days=365, usage_saturation=10, named_time_half_life_days=14)
    june = TimeWindow(100 * day, 130 * day, "in June")
    items = [
        Hydrated(memory(created_at=300 * day)._replace(id="newest"), Candidate("newest", similarity=0.8)),
        Hydrated(memory(created_at=115 * day)._replace(id="in june"), Candidate("in june", similarity=0.8)),
        Hydrated(
            memory(created_at=144 * day)._replace(id="two weeks after"), Candidate("two weeks after", similarity=0.8)
        ),
    ]
    ordering = stage.order(items, min_importance=0.0, now=300 * day, named_time=june)
    recency = {s.memory.id: s.breakdown.recency for s in ordering.scored}
    assert recency["in june"] == 1.0
    assert recency["two weeks after"] == pytest.approx(0.5)
    assert recency["newest"] < 0.01
    assert ordering.scored[0].memory.id == "in june"
    # Without a named time the newest leads, as before.
    assert stage.order(items, min_importance=0.0, now=300 * day).scored[0].memory.id == "newest"


def test_a_sentence_said_again_by_the_same_speaker_or_copied_by_another_is_returned_once() -> None:
    def said(
        memory_id: str, content: str, speaker: str = "Mel", role: Role = Role.USER, at: float = 1_000.0
    ) -> RankedMemory:
        m = Memory(id=memory_id, namespace=ALICE, content=content, speaker_name=speaker, role=role, created_at=at)
        return RankedMemory(m, 1 - ord(memory_id) / 1000, ScoreBreakdown())

    ranked = [
        said("a", "I went camping in the mountains."),
        said("b", "I went  camping in the Mountains. ", at=2_000.0),  # the same words, said later
        said("c", "I went camping in the mountains.", speaker="Caro"),  # someone else said it
        said("d", "I went camping in the mountains.", speaker="", role=Role.ASSISTANT),
        said("e", "I went camping by the lake."),
    ]
    once = unrepeated(ranked)
    # The newest telling stands for both, in the higher one's place and with its score.
    assert [r.memory.id for r in once] == ["b", "c", "d", "e"]
    assert once[0].score == ranked[0].score
    # A long sentence said word for word by another speaker or role was copied: the higher
    # telling is the one result.
    draft = "Dear Sam, thank you for the lovely evening and the wonderful food."
    copied = [
        said("f", draft, speaker="", role=Role.ASSISTANT),
        said("g", draft, at=3_000.0),
        said("h", "Sounds good."),
    ]
    assert [r.memory.id for r in unrepeated(copied)] == ["f", "h"]


@given(st.text(max_size=40))
def test_milvus_literals_cannot_break_out(value: str) -> None:
    literal = quote(value)
    assert literal.startswith('"')
    assert literal.endswith('"')
    body = literal[1:-1]
    # Every double quote inside the literal is escaped by an odd run of backslashes.
    i = 0
    while i < len(body):
        if body[i] == "\\":
            i += 2
            continue
        assert body[i] != '"'
        i += 1


def test_filter_expression_terms() -> None:
    terms = filter_expression(
        MemoryFilter(tier=Tier.HOT, tags_any=("a", 'b"'), session_id="s", roles=(Role.ASSISTANT,))
    )
    assert terms == [
        'tier == "hot"',
        'ARRAY_CONTAINS_ANY(tags, ["a", "b\\""])',
        'session_id == "s"',
        'role in ["assistant"]',
        'status == "active"',
    ]
    assert filter_expression(MemoryFilter(include_inactive=True)) == []


def test_metadata_filter_matches_nested_subsets() -> None:
    meta = {"source": "chat", "ctx": {"app": "mail", "lang": "en"}, "n": 1.0}
    assert metadata_matches(meta, {"ctx": {"app": "mail"}})
    assert metadata_matches(meta, {"n": 1})
    assert not metadata_matches(meta, {"ctx": {"app": "web"}})
    assert not metadata_matches(meta, {"missing": True})


def test_write_time_estimates() -> None:
    assert estimate_importance("thanks!", Role.USER, MemoryKind.FACT).value < 0.5
    preference = estimate_importance("I really prefer aisle seats on night trains", Role.USER, MemoryKind.PREFERENCE)
    assert preference.value >= 0.75
    advice = estimate_importance("I recommend trying magnesium before bed", Role.ASSISTANT, MemoryKind.RECOMMENDATION)
    assert advice.value >= 0.75
    rich = estimate_quality("On 3 May 2024 Ana moved from Lisbon to Berlin to join Siemens as an engineer")
    poor = estimate_quality("ok cool")
    assert 0 <= poor.value < rich.value <= 1
