"""AddConversation over gRPC against a real server (Milvus Lite, SQLite, the local model)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import grpc
import numpy as np
import pytest
from google.protobuf import timestamp_pb2

from memsvc.domain.models import Namespace
from memsvc.v1 import memory_pb2, query_service_pb2, write_service_pb2
from tests.conftest import RunningServer, ServerFactory
from tests.e2e.test_core import all_filter, error_of, query
from tests.e2e.test_retrieval_modes import ScriptedLlm

pytestmark = pytest.mark.e2e

DAY = 86_400.0
MAY_8_2023 = 1_683_540_000.0  # 8 May 2023, 10:00 UTC


def ts(seconds: float) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromNanoseconds(int(seconds * 1e9))
    return out


def turn(content: str, name: str = "", role: int = memory_pb2.ROLE_USER, at: float | None = None) -> Any:
    msg = query_service_pb2.ConversationTurn(role=role, content=content, name=name)
    if at is not None:
        msg.create_time.CopyFrom(ts(at))
    return msg


def add_conversation(s: RunningServer, user: str, session: str, turns: list[Any], first: int = 0) -> Any:
    request = write_service_pb2.AddConversationRequest(
        user_id=user, session_id=session, turns=turns, first_turn_index=first
    )
    return s.writes.AddConversation(request, metadata=s.md)


def record_embeds(embedder: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text the shared model embeds from now on, in order."""
    embedded: list[str] = []
    real_embed = embedder.embed

    async def recording_embed(texts: list[str]) -> Any:
        embedded.extend(texts)
        return await real_embed(texts)

    monkeypatch.setattr(embedder, "embed", recording_embed)
    return embedded


# Chatter around the exchange under test, so that a query cannot return everything.
CHATTER = [
    "I started a pottery class on Tuesdays and made a lopsided bowl.",
    "The weather has been rainy all week, so I stayed in and read.",
    "My brother is visiting next month and we plan to go camping.",
    "Work has been busy, we are launching a new product in June.",
    "I baked sourdough bread for the first time, it came out dense.",
    "We watched a documentary about volcanoes in Iceland last night.",
    "I have been learning to play the guitar, chords are hard.",
    "The neighbours are renovating their kitchen and it is noisy.",
    "I signed up for a half marathon in the autumn.",
    "Our book club is reading a novel set in Tokyo.",
]


def chatter(at: float) -> list[Any]:
    return [turn(c, "Caroline" if i % 2 else "Melanie", at=at + i) for i, c in enumerate(CHATTER)]


PETS = [
    turn("Hey Mel! What are the names of your pets?", "Caroline", at=MAY_8_2023),
    turn("Luna and Oliver! They are both cats.", "Melanie", at=MAY_8_2023 + 60),
    turn("So cute. I went hiking near the lake yesterday.", "Caroline", at=MAY_8_2023 + 120),
]


def test_every_turn_is_kept_as_evidence_with_its_role_session_time_and_speaker(server: RunningServer) -> None:
    response = add_conversation(server, "mel", "s1", PETS)
    assert [m.content for m in response.turns] == [t.content for t in PETS]
    assert all(r.outcome == write_service_pb2.WRITE_OUTCOME_CREATED for r in response.turn_results)
    reply = response.turns[1]
    assert reply.kind == memory_pb2.MEMORY_KIND_EPISODE
    assert reply.session_id == "s1" and reply.speaker_name == "Melanie"
    assert reply.create_time.seconds == int(MAY_8_2023 + 60)
    fetched = server.writes.GetMemory(
        write_service_pb2.GetMemoryRequest(user_id="mel", id=reply.id), metadata=server.md
    )
    assert fetched.memory.content == "Luna and Oliver! They are both cats."  # the bare turn, not the index text
    assert fetched.memory.speaker_name == "Melanie"
    listed = server.writes.ListMemories(
        write_service_pb2.ListMemoriesRequest(user_id="mel", page_size=50, filter=all_filter()), metadata=server.md
    )
    assert {m.id for m in listed.memories} >= {m.id for m in response.turns}


def test_a_reply_is_found_by_the_words_of_the_question_it_answers(server: RunningServer) -> None:
    add_conversation(server, "mel", "s0", chatter(MAY_8_2023 - DAY))
    turns = add_conversation(server, "mel", "s1", PETS).turns
    found = query(server, "mel", "What are Melanie's pets' names?", filter=all_filter(), limit=2)
    assert turns[1].id in [r.memory.id for r in found.memories]
    # A reply in a later call still gets the question of the stored turn before it as context.
    later = add_conversation(
        server, "mel", "s2", [turn("Which city did you move to last spring?", "Caroline", at=MAY_8_2023 + DAY)]
    )
    reply = add_conversation(server, "mel", "s2", [turn("Porto, finally!", "Melanie", at=MAY_8_2023 + DAY)], first=1)
    found = query(server, "mel", "Which city did Melanie move to?", filter=all_filter(), limit=2)
    assert reply.turns[0].id in [r.memory.id for r in found.memories]
    assert later.turns[0].id != reply.turns[0].id


# The other side of a conversation addresses a speaker by name; the speaker's own turns never say it.
ADDRESSED = [
    turn("Melanie, you always look so calm! Melanie, how was your week?", "Caroline", at=MAY_8_2023),
    turn("Busy! I swim laps at dawn before work, the quiet water clears my head.", "Melanie", at=MAY_8_2023 + 60),
    turn("Melanie, that is impressive. I can never get up that early, Melanie!", "Caroline", at=MAY_8_2023 + 120),
    turn("My boss moved our deadline again, so the team is stressed.", "Caroline", at=MAY_8_2023 + 180),
]


def test_a_speakers_name_is_searched_by_its_words_not_by_meaning(server: RunningServer) -> None:
    add_conversation(server, "calm", "s0", chatter(MAY_8_2023 - DAY))
    turns = add_conversation(server, "calm", "s1", ADDRESSED).turns
    # The turns alone: the session's summary, which quotes them, would stand for them.
    turns_only = memory_pb2.MemoryFilter(min_importance=0.0, kinds=[memory_pb2.MEMORY_KIND_EPISODE])
    found = query(server, "calm", "How does Melanie unwind?", filter=turns_only, limit=10)
    assert "recall: searched by meaning without the speaker name(s) Melanie" in found.report.notes
    ranked = [r.memory.id for r in found.memories]
    # What Melanie said about it ranks above what was said to her.
    assert turns[1].id in ranked
    assert all(ranked.index(turns[1].id) < ranked.index(t.id) for t in (turns[0], turns[2]) if t.id in ranked)
    # Where Melanie is only talked about, her name is no speaker's: it stays in the search by meaning.
    server.writes.AddMemories(
        write_service_pb2.AddMemoriesRequest(
            user_id="talked-about", memories=[write_service_pb2.NewMemory(content="Melanie swims laps at dawn.")]
        ),
        metadata=server.md,
    )
    other = query(server, "talked-about", "How does Melanie unwind?", filter=all_filter())
    assert not [n for n in other.report.notes if "speaker name" in n]


# A reply that hands the word back: the question it ends on is about the other speaker.
ASKED_BACK = [
    turn("I adopted a rescue greyhound named Pepper last month.", "Caroline", at=MAY_8_2023),
    turn("Aww, congrats! Did you ever think about getting a cat or a parrot instead?", "Melanie", at=MAY_8_2023 + 60),
    turn("Not really, my landlord only allows one animal.", "Caroline", at=MAY_8_2023 + 120),
]


def test_a_turn_is_searched_by_meaning_for_what_it_states_not_the_question_it_hands_back(
    server: RunningServer, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_conversation(server, "pepper", "s0", chatter(MAY_8_2023 - DAY))
    embedded = record_embeds(embedder, monkeypatch)
    turns = add_conversation(server, "pepper", "s1", ASKED_BACK).turns
    assert "Melanie: Aww, congrats!" in embedded
    found = query(server, "pepper", "What pets does Caroline have?", filter=all_filter(), limit=50, min_relevance=0.0)
    ranked = list(found.memories)
    stated = [i for i, r in enumerate(ranked) if turns[0].id in (r.memory.id, *r.memory.source_memory_ids)]
    asked = [i for i, r in enumerate(ranked) if r.memory.id == turns[1].id]
    assert stated and asked  # with no floor and room for 50, every memory of the user is returned
    # By meaning the reaction is as far from the question as unrelated chatter (a cosine below
    # 0.15, what the rank stage takes as unrelated; 0.32 while its question about a cat or a
    # parrot was in its vector, nearer than Caroline's own extracted statement at 0.29).
    assert ranked[asked[0]].score_breakdown.semantic < 0.15
    assert stated[0] < asked[0]
    # The stored turn is still the whole turn.
    assert turns[1].content == ASKED_BACK[1].content
    # A user's turn to an assistant names no speaker: the question it ends on is a request, and stays.
    add_conversation(server, "pepper", "s2", [turn("I like quiet hotels. Can you recommend one in Lisbon?")])
    assert "I like quiet hotels. Can you recommend one in Lisbon?" in embedded


def test_resending_a_session_stores_each_turn_once(server: RunningServer) -> None:
    first = add_conversation(server, "mel", "s1", PETS[:2])
    again = add_conversation(server, "mel", "s1", PETS)
    assert [m.id for m in again.turns[:2]] == [m.id for m in first.turns]
    outcomes = [r.outcome for r in again.turn_results]
    assert outcomes == [write_service_pb2.WRITE_OUTCOME_IDEMPOTENT_REPLAY] * 2 + [
        write_service_pb2.WRITE_OUTCOME_CREATED
    ]
    listed = server.writes.ListMemories(
        write_service_pb2.ListMemoriesRequest(user_id="mel", page_size=50, filter=all_filter()), metadata=server.md
    )
    turns = [m for m in listed.memories if m.kind == memory_pb2.MEMORY_KIND_EPISODE and not m.source_memory_ids]
    assert sorted(m.content for m in turns) == sorted(t.content for t in PETS)


def test_a_resent_session_embeds_only_its_new_turns(
    server: RunningServer, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_conversation(server, "mel", "s1", PETS[:2])
    embedded = record_embeds(embedder, monkeypatch)
    again = add_conversation(server, "mel", "s1", PETS)
    assert [r.outcome for r in again.turn_results][:2] == [write_service_pb2.WRITE_OUTCOME_IDEMPOTENT_REPLAY] * 2
    assert f"Caroline: {PETS[2].content}" in embedded
    assert not [t for t in embedded if PETS[0].content in t or PETS[1].content in t]
    # A replayed turn is still found by its stored vector.
    found = query(server, "mel", "What are the names of Melanie's cats?", filter=all_filter(), limit=3)
    assert again.turns[1].id in [r.memory.id for r in found.memories]


def test_turns_are_evidence_never_merged_with_each_other(server: RunningServer) -> None:
    response = add_conversation(server, "mel", "s3", [turn("ok"), turn("ok"), turn("ok")])
    assert len({m.id for m in response.turns}) == 3
    assert all(r.outcome == write_service_pb2.WRITE_OUTCOME_CREATED for r in response.turn_results)


def test_bad_conversations_are_invalid_arguments_naming_the_field_and_store_nothing(server: RunningServer) -> None:
    now = time.time()
    cases: list[tuple[dict[str, Any], str]] = [
        ({"session_id": ""}, "session_id"),
        ({"session_id": "bad session!"}, "session_id"),
        ({"turns": []}, "turns"),
        ({"turns": [turn("fine"), turn("   ")]}, "turns[1].content"),
        ({"turns": [turn("late", at=now), turn("early", at=now - 60)]}, "turns[1].create_time"),
        ({"turns": [turn("from the future", at=now + 10 * DAY)]}, "turns[0].create_time"),
        ({"turns": [turn("x", role=9)]}, "turns[0].role"),
        ({"turns": [turn("x", name=" padded ")]}, "turns[0].name"),
        ({"turns": [turn("x")] * 257}, "turns"),
        ({"first_turn_index": -1}, "first_turn_index"),
        ({"user_id": ""}, "user_id"),
    ]
    for change, field in cases:
        fields: dict[str, Any] = {"user_id": "eve", "session_id": "s1", "turns": [turn("hello there")]}
        fields.update(change)
        request = write_service_pb2.AddConversationRequest(**fields)
        code, violations, _ = error_of(lambda r=request: server.writes.AddConversation(r, metadata=server.md))
        assert code == grpc.StatusCode.INVALID_ARGUMENT, change
        assert field in violations, (change, violations)
    listed = server.writes.ListMemories(
        write_service_pb2.ListMemoriesRequest(user_id="eve", page_size=50, filter=all_filter()), metadata=server.md
    )
    assert list(listed.memories) == []


def test_the_index_text_is_sealed_like_the_content(server: RunningServer) -> None:
    canary = "quokka-canary-5521"
    add_conversation(server, "mel", "s9", [turn(f"Do you remember the {canary}?", "Caroline"), turn("Yes!", "Mel")])
    server.run(server.components.index.close())
    for path in server.components.settings.data_dir.rglob("*"):
        if path.is_file():
            assert canary.encode() not in path.read_bytes(), f"plaintext found in {path}"


SESSION = [
    turn("Hi Mel! How was your week?", "Caroline", at=MAY_8_2023),
    turn("I went to a pottery workshop yesterday and made a bowl.", "Melanie", at=MAY_8_2023 + 10),
    turn("That sounds lovely. I'm planning to visit Sweden next month with my mom.", "Caroline", at=MAY_8_2023 + 20),
    turn(
        "My favourite place there is Gothenburg. You should try the fika at Da Matteo.", "Melanie", at=MAY_8_2023 + 30
    ),
    turn("haha yes!", "Caroline", at=MAY_8_2023 + 40),
    turn("I love painting sunsets with my kids on weekends.", "Melanie", at=MAY_8_2023 + 50),
]


def test_extracted_memories_name_their_source_turns_with_the_speaker_and_dates_resolved(server: RunningServer) -> None:
    response = add_conversation(server, "mel", "s1", SESSION)
    assert response.extractor == write_service_pb2.EXTRACTOR_RULES
    turn_ids = [m.id for m in response.turns]
    extracted = {m.content: m for m in response.extracted}
    pottery = extracted["Melanie went to a pottery workshop yesterday (7 May 2023) and made a bowl."]
    assert list(pottery.source_memory_ids) == [turn_ids[1]]
    assert pottery.kind == memory_pb2.MEMORY_KIND_EPISODE
    plan = next(m for m in response.extracted if m.kind == memory_pb2.MEMORY_KIND_COMMITMENT)
    assert plan.content == "Caroline is planning to visit Sweden next month (June 2023) with Caroline's mom."
    assert list(plan.source_memory_ids) == [turn_ids[2]]
    kinds = {m.kind for m in response.extracted}
    assert {memory_pb2.MEMORY_KIND_PREFERENCE, memory_pb2.MEMORY_KIND_RECOMMENDATION} <= kinds
    assert all(r.outcome == write_service_pb2.WRITE_OUTCOME_CREATED for r in response.extracted_results)
    # Visible through GetMemory with its sources, and findable by Query.
    got = server.writes.GetMemory(write_service_pb2.GetMemoryRequest(user_id="mel", id=plan.id), metadata=server.md)
    assert list(got.memory.source_memory_ids) == [turn_ids[2]]
    found = query(server, "mel", "When is Caroline going to Sweden?", filter=all_filter(), limit=3)
    assert plan.id in [r.memory.id for r in found.memories]


def test_extracted_memories_go_through_the_write_review(server: RunningServer) -> None:
    first = add_conversation(server, "mel", "s1", [turn("I love painting sunsets with my kids.", "Melanie")])
    [statement] = first.extracted
    again = add_conversation(server, "mel", "s2", [turn("I love painting sunsets with my kids!", "Melanie")])
    assert again.extracted_results[0].outcome == write_service_pb2.WRITE_OUTCOME_CONFIRMED_EXISTING
    assert again.extracted[0].id == statement.id and again.extracted[0].confirmation_count == 2
    moved = add_conversation(server, "mel", "s3", [turn("I live in Boston with my family.", "Melanie", at=MAY_8_2023)])
    later = add_conversation(
        server, "mel", "s4", [turn("I live in Denver with my family now.", "Melanie", at=MAY_8_2023 + 30 * DAY)]
    )
    assert list(later.extracted_results[0].superseded_ids) == [moved.extracted[0].id]


def test_a_session_summary_quotes_its_distinctive_turns_and_grows_with_the_session(server: RunningServer) -> None:
    response = add_conversation(server, "mel", "s1", SESSION)
    summary = response.summary
    assert summary.kind == memory_pb2.MEMORY_KIND_SUMMARY and summary.session_id == "s1"
    assert summary.content.startswith("Conversation s1 on 8 May 2023 between Caroline and Melanie:")
    turn_ids = [m.id for m in response.turns]
    assert set(summary.source_memory_ids) <= set(turn_ids) and summary.source_memory_ids
    assert turn_ids[4] not in summary.source_memory_ids  # "haha yes!" is not summary material
    more = [
        turn("We adopted a puppy named Biscuit from the shelter in Portland.", "Melanie", at=MAY_8_2023 + 60),
        turn("Biscuit chewed through my running shoes on Sunday.", "Melanie", at=MAY_8_2023 + 70),
        turn("Next month I start a new job as a nurse at Mercy Hospital.", "Caroline", at=MAY_8_2023 + 80),
        turn("Congratulations on the nursing job at Mercy!", "Melanie", at=MAY_8_2023 + 90),
    ]
    grown = add_conversation(server, "mel", "s1", more, first=len(SESSION))
    assert grown.summary.id == summary.id  # one summary per session, refreshed
    assert set(grown.summary.source_memory_ids) & {m.id for m in grown.turns}
    history = server.writes.GetMemoryHistory(
        write_service_pb2.GetMemoryHistoryRequest(user_id="mel", id=summary.id), metadata=server.md
    )
    assert [v.change for v in history.versions] == [memory_pb2.MEMORY_CHANGE_CREATE, memory_pb2.MEMORY_CHANGE_UPDATE]
    assert "source_memory_ids" in history.versions[1].changed_fields


def test_a_summary_of_quotes_gets_its_vector_from_the_quoted_turns_not_from_the_model(
    server: RunningServer, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedded = record_embeds(embedder, monkeypatch)
    response = add_conversation(server, "mel", "s1", SESSION)
    summary = response.summary
    assert summary.content not in embedded  # nor refreshed below
    namespace = Namespace("acme", "default", "development", "mel")
    ids = list(summary.source_memory_ids)
    stored = server.run(server.components.index.vectors(namespace, [summary.id, *ids]))
    quotes = summary.content.splitlines()[1:]
    words = [len(line.split(": ", 1)[1].split()) for line in quotes]
    composed = sum(w * stored[i] for i, w in zip(ids, words, strict=True))
    composed = composed / np.linalg.norm(composed)
    assert float(np.dot(stored[summary.id], composed)) > 0.9999
    # Close to what the model makes of the summary's text, which it replaces.
    assert float(np.dot(stored[summary.id], embedder.encode([summary.content])[0])) > 0.8
    # A refreshed summary too.
    more = [turn("We adopted a puppy named Biscuit from the shelter in Portland.", "Melanie", at=MAY_8_2023 + 60)]
    grown = add_conversation(server, "mel", "s1", more, first=len(SESSION))
    assert grown.summary.content != summary.content and grown.summary.content not in embedded
    # A quoted turn the index lacks (an outage, say): the model embeds the summary's text.
    server.run(server.components.index.delete(namespace, [m.id for m in response.turns]))
    last = [turn("Biscuit now sleeps on my running shoes every night.", "Melanie", at=MAY_8_2023 + 70)]
    again = add_conversation(server, "mel", "s1", last, first=len(SESSION) + 1)
    assert again.summary.content != grown.summary.content and again.summary.content in embedded


def test_what_a_crash_left_underived_is_finished_by_the_reconciler(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memsvc.errors import Unavailable

    conversations = server.components.conversations

    async def crash(*args: Any, **kwargs: Any) -> Any:
        raise Unavailable("the process died here")

    with monkeypatch.context() as patch:
        patch.setattr(conversations, "_derive", crash)
        code, _, _ = error_of(lambda: add_conversation(server, "mel", "s1", SESSION))
    assert code == grpc.StatusCode.UNAVAILABLE
    listed = server.writes.ListMemories(
        write_service_pb2.ListMemoriesRequest(user_id="mel", page_size=50, filter=all_filter()), metadata=server.md
    )
    assert len(listed.memories) == len(SESSION)  # the turns stand, nothing derived yet
    # A retry finds every turn stored and derives nothing itself; the reconciler does.
    retry = add_conversation(server, "mel", "s1", SESSION)
    assert retry.extractor == write_service_pb2.EXTRACTOR_NONE
    result = server.run(server.components.reconciler.run_once(min_age_s=0))
    assert result.turns_extracted == len(SESSION)
    listed = server.writes.ListMemories(
        write_service_pb2.ListMemoriesRequest(user_id="mel", page_size=50, filter=all_filter()), metadata=server.md
    )
    kinds = [m.kind for m in listed.memories]
    assert kinds.count(memory_pb2.MEMORY_KIND_SUMMARY) == 1
    derived = [m for m in listed.memories if m.source_memory_ids]
    assert len(derived) > 2
    assert server.run(server.components.reconciler.run_once(min_age_s=0)).turns_extracted == 0


# -- the LLM extractor against a scripted OpenAI-compatible endpoint -------------------------------


@pytest.fixture
def llm() -> Iterator[ScriptedLlm]:
    scripted = ScriptedLlm()
    yield scripted
    scripted.close()


def extraction_calls(llm: ScriptedLlm) -> list[dict[str, Any]]:
    return [c for c in llm.calls if "long-term memory keeps" in c["messages"][0]["content"]]


GOOD = {
    "memories": [
        {
            "content": "Melanie went to a pottery workshop on 7 May 2023 and made a bowl.",
            "kind": "episode",
            "speaker": "Melanie",
            "source_turns": [2],
        },
        {
            "content": "Caroline plans to visit Sweden in June 2023 with her mother.",
            "kind": "commitment",
            "speaker": "Caroline",
            "source_turns": [3],
        },
    ]
}


SECOND_BATCH = {
    "memories": [
        {
            "content": "Melanie loves painting sunsets with her kids on weekends.",
            "kind": "preference",
            "speaker": "Melanie",
            "source_turns": [2],
        }
    ]
}


def test_the_llm_extracts_one_call_per_batch_with_the_schema_and_counts_tokens(
    server_factory: ServerFactory, llm: ScriptedLlm
) -> None:
    def script(system: str, user: str) -> tuple[str, float]:
        if "long-term memory keeps" not in system:
            return '{"contradicted": []}', 0.0
        return json.dumps(GOOD if "[3]" in user else SECOND_BATCH), 0.0

    llm.script = script
    s = server_factory(llm_base_url=llm.base_url, llm_model="scripted", extraction_batch_turns=4)
    response = add_conversation(s, "mel", "s1", SESSION)
    assert response.extractor == write_service_pb2.EXTRACTOR_LLM and not response.extractor_reason
    calls = extraction_calls(llm)
    assert len(calls) == 2  # six turns in batches of four: never one call per turn
    assert calls[0]["response_format"]["type"] == "json_schema"
    assert "[2] (08 May 2023 10:00) Melanie (user): I went to a pottery workshop" in calls[0]["messages"][1]["content"]
    assert response.llm_tokens == 2 * 120
    turn_ids = [m.id for m in response.turns]
    got = {m.content: list(m.source_memory_ids) for m in response.extracted}
    assert got["Melanie went to a pottery workshop on 7 May 2023 and made a bowl."] == [turn_ids[1]]
    assert got["Caroline plans to visit Sweden in June 2023 with her mother."] == [turn_ids[2]]
    assert got["Melanie loves painting sunsets with her kids on weekends."] == [turn_ids[5]]


def reply_for_rules_fallback(text: str, delay: float = 0.0) -> Any:
    def script(system: str, user: str) -> tuple[str, float]:
        if "long-term memory keeps" in system:
            return text, delay
        return '{"contradicted": []}', 0.0

    return script


@pytest.mark.parametrize(
    ("reply", "delay", "why"),
    [
        ("Sure! Melanie likes pottery.", 0.0, "malformed reply"),
        (
            json.dumps({"memories": [{"content": "x", "kind": "mood", "speaker": "Melanie", "source_turns": [2]}]}),
            0.0,
            "kind",
        ),
        ('{"memories": []}', 3.0, "timeout"),
        (
            json.dumps(
                {
                    "memories": [
                        {
                            "content": "Caroline made a bowl.",
                            "kind": "episode",
                            "speaker": "Caroline",
                            "source_turns": [2],
                        }
                    ]
                }
            ),
            0.0,
            "names 'Caroline' as its speaker, but turns [2] were said by Melanie",
        ),
        (
            json.dumps({"memories": [{"content": "x", "kind": "fact", "speaker": "Melanie", "source_turns": [9]}]}),
            0.0,
            "not all new turns",
        ),
    ],
    ids=["malformed-json", "unknown-kind", "timeout", "wrong-speaker", "cites-unknown-turn"],
)
def test_a_bad_or_failing_llm_answer_falls_back_to_the_rules_never_to_a_lost_turn(
    server_factory: ServerFactory, llm: ScriptedLlm, reply: str, delay: float, why: str
) -> None:
    llm.script = reply_for_rules_fallback(reply, delay)
    s = server_factory(llm_base_url=llm.base_url, extraction_timeout_s=0.5)
    response = add_conversation(s, "mel", "s1", SESSION)
    assert response.extractor == write_service_pb2.EXTRACTOR_RULES_AFTER_LLM_FAILURE
    assert why in response.extractor_reason
    assert len(response.turns) == len(SESSION)
    contents = [m.content for m in response.extracted]
    assert "Melanie went to a pottery workshop yesterday (7 May 2023) and made a bowl." in contents


def test_a_query_returns_what_a_derived_memory_came_from_when_asked(server: RunningServer) -> None:
    response = add_conversation(server, "mel", "s1", SESSION)
    plan = next(m for m in response.extracted if m.kind == memory_pb2.MEMORY_KIND_COMMITMENT)
    asked = query(server, "mel", "When is Caroline going to Sweden?", filter=all_filter(), include_sources=True)
    found = next(r for r in asked.memories if r.memory.id == plan.id)
    assert [s.content for s in found.sources] == [SESSION[2].content]
    assert [s.speaker_name for s in found.sources] == ["Caroline"]
    plain = query(server, "mel", "When is Caroline going to Sweden?", filter=all_filter())
    assert all(not r.sources for r in plain.memories)


def test_a_summary_goes_stale_when_what_it_quotes_is_superseded_or_deleted_and_fresh_when_rewritten(
    server: RunningServer,
) -> None:
    boston = turn("I live in Boston near Fenway Park with my family and our dog Rex.", "Melanie", at=MAY_8_2023)
    first = add_conversation(
        server,
        "mel",
        "s1",
        [
            turn("hi!", "Caroline", at=MAY_8_2023),
            boston,
            turn("nice", "Caroline", at=MAY_8_2023 + 1),
            turn("I work as a pediatric nurse at Mercy Hospital on Tuesdays.", "Melanie", at=MAY_8_2023 + 2),
        ],
    )
    summary = first.summary
    assert first.turns[1].id in summary.source_memory_ids and not summary.stale

    def get(memory_id: str) -> Any:
        request = write_service_pb2.GetMemoryRequest(user_id="mel", id=memory_id)
        return server.writes.GetMemory(request, metadata=server.md).memory

    later = add_conversation(
        server, "mel", "s2", [turn("I live in Denver with my family now.", "Melanie", at=MAY_8_2023 + 60 * DAY)]
    )
    assert later.extracted_results[0].superseded_ids  # "lives in Boston" gave way to "lives in Denver"
    assert get(summary.id).stale
    # The session's next call rewrites its summary from the session as it is now.
    grown = add_conversation(server, "mel", "s1", [turn("bye!", "Caroline", at=MAY_8_2023 + 3)], first=4)
    assert grown.summary.id == summary.id and not grown.summary.stale and not get(summary.id).stale
    quoted = next(i for i in grown.summary.source_memory_ids if i != first.turns[1].id)
    server.writes.DeleteMemory(write_service_pb2.DeleteMemoryRequest(user_id="mel", id=quoted), metadata=server.md)
    assert get(summary.id).stale


# Other people's chats about books before Melanie's: a user's long history.
OTHERS_ON_BOOKS = [
    ("Omar", "Rosa, which books have you read this year? I read three novels."),
    ("Rosa", "I read 'Dune' and a book of short stories, both great reads."),
    ("Omar", "I have read every book by Le Guin, the novels are wonderful."),
    ("Rosa", "My book club read a mystery novel last month, I loved reading it."),
    ("Omar", "Reading history books is my favourite way to spend a weekend."),
    ("Rosa", "Have you read any good books lately? I need a new novel to read."),
]
# Four pairs of other people, each having the same chat (the same sentence said by one speaker
# twice is returned once: `rank.unrepeated`).
OTHER_PEOPLE = [("Omar", "Rosa"), ("Lars", "Nora"), ("Hiro", "Vera"), ("Kofi", "Zara")]


def add_other_peoples_chats(s: RunningServer, chat: list[tuple[str, str]]) -> None:
    """`chat` (Omar and Rosa's) had by each pair of OTHER_PEOPLE, in the days before May 8, 2023."""
    for n, (first, second) in enumerate(OTHER_PEOPLE):
        people = {"Omar": first, "Rosa": second}
        spoken = [
            turn(text.replace("Rosa", second), people[name], at=MAY_8_2023 - (10 - n) * DAY + i)
            for i, (name, text) in enumerate(chat)
        ]
        add_conversation(s, "long", f"older-{n}", spoken)


def asked_after_other_peoples_chats(
    s: RunningServer, others: list[tuple[str, str]], conversation: list[Any], question: str
) -> tuple[list[Any], list[str]]:
    """The stored turns of `conversation`, written after other people's chats (`others`), and
    the ids of the first five turns `question` finds."""
    add_other_peoples_chats(s, others)
    turns = list(add_conversation(s, "long", "s1", conversation).turns)
    turns_only = memory_pb2.MemoryFilter(min_importance=0.0, kinds=[memory_pb2.MEMORY_KIND_EPISODE])
    found = query(s, "long", question, filter=turns_only, limit=5)
    return turns, [r.memory.id for r in found.memories]


MELANIE_ON_BOOKS = [
    turn("Any good novels lately, Mel?", "Caroline", at=MAY_8_2023),
    turn("Finished 'Becoming' by Michelle Obama, so inspiring!", "Melanie", at=MAY_8_2023 + 60),
]


@pytest.mark.parametrize("depth_factor", [1, 4], ids=["meaning-alone", "named-first"])
def test_what_involves_a_named_speaker_comes_before_other_peoples_chats_about_the_same(
    server_factory: ServerFactory, depth_factor: int
) -> None:
    s = server_factory(named_recall_depth_factor=depth_factor)
    turns, ranked = asked_after_other_peoples_chats(
        s, OTHERS_ON_BOOKS, MELANIE_ON_BOOKS, "What books has Melanie read?"
    )
    said = turns[1]
    # By meaning alone (the name is not embedded) two dozen turns about reading books outrank hers.
    assert (said.id in ranked[:3]) == (depth_factor > 1)


@pytest.mark.parametrize("common_terms_from", [100_000, 10], ids=["short-history", "long-history"])
def test_applicability_matches_a_named_speaker_by_who_took_part_in_a_long_history(
    server_factory: ServerFactory, common_terms_from: int
) -> None:
    s = server_factory(lexical_common_terms_from=common_terms_from)
    add_other_peoples_chats(s, OTHERS_ON_BOOKS)
    said = list(add_conversation(s, "long", "s1", MELANIE_ON_BOOKS).turns)[1]
    turns_only = memory_pb2.MemoryFilter(min_importance=0.0, kinds=[memory_pb2.MEMORY_KIND_EPISODE])
    mode = query_service_pb2.QUERY_MODE_APPLICABILITY
    found = query(s, "long", "What books has Melanie read?", filter=turns_only, limit=5, mode=mode)
    assert said.id in [r.memory.id for r in found.memories[:3]]
    # In a short history the name stays in what is embedded (it finds more of a lone
    # conversation's evidence); in a long one it is matched by who took part, as in DIRECT.
    left_out = "recall: searched by meaning without the speaker name(s) Melanie" in found.report.notes
    assert left_out == (common_terms_from == 10), list(found.report.notes)


OTHERS_ON_POTTERY = [
    ("Omar", "Rosa, I signed up for a pottery class on Thursday evenings!"),
    ("Rosa", "A pottery class? I signed up for one at the community centre too."),
    ("Omar", "Which pottery class did you sign up for, the wheel or hand building?"),
    ("Rosa", "The beginners' pottery class, I sign up for every term."),
]
MELANIE_SIGNS_UP = [
    turn("Guess what I finally did this week!", "Melanie", at=MAY_8_2023),
    turn("Let me guess: the Thursday evening pottery class at the community centre?", "Caroline", at=MAY_8_2023 + 60),
    turn("Yes, you know me too well!", "Melanie", at=MAY_8_2023 + 120),
]


@pytest.mark.parametrize("depth_factor", [1, 4], ids=["words-alone", "their-conversation-first"])
def test_words_said_in_a_named_speakers_conversation_come_before_other_peoples_chats(
    server_factory: ServerFactory, depth_factor: int
) -> None:
    s = server_factory(named_recall_depth_factor=depth_factor)
    question = "Which pottery class did Melanie sign up for?"
    turns, ranked = asked_after_other_peoples_chats(s, OTHERS_ON_POTTERY, MELANIE_SIGNS_UP, question)
    guessed = turns[1]
    # Caroline's turn neither names Melanie nor is hers, but it is from their conversation: the
    # lexical channel puts it before other people's turns with more of the question's words.
    assert (guessed.id in ranked[:3]) == (depth_factor > 1)


OTHERS_ON_TRAVEL = [
    ("Omar", "Rosa, which cities have you visited this year?"),
    ("Rosa", "I visited Lisbon and Porto, both lovely cities to visit."),
    ("Omar", "I have visited Berlin twice, my favourite of the cities I visited."),
    ("Rosa", "Visiting new cities is the best part of my job."),
]
JON_TRAVELS = [
    turn("Jon! How was your week?", "Gina", at=MAY_8_2023),
    turn("Took a short trip to Rome to clear my head, the ruins were amazing.", "Jon", at=MAY_8_2023 + 60),
    turn("Good for you, Jon. I'm stuck at the store all week.", "Gina", at=MAY_8_2023 + 120),
]


@pytest.mark.parametrize("elsewhere_weight", [1.0, 0.5], ids=["elsewhere-level", "elsewhere-counts-half"])
def test_a_named_speakers_own_answer_comes_before_their_name_and_other_peoples_chats(
    server_factory: ServerFactory, elsewhere_weight: float
) -> None:
    # A history long enough that common terms are weighed, not scanned (here from 10 memories),
    # in which the question's other words are not common.
    s = server_factory(named_elsewhere_weight=elsewhere_weight, lexical_common_terms_from=10)
    for n in range(8):
        add_conversation(s, "long", f"chatter-{n}", chatter(MAY_8_2023 - (30 + n) * DAY))
    turns, ranked = asked_after_other_peoples_chats(s, OTHERS_ON_TRAVEL, JON_TRAVELS, "Which cities has Jon visited?")
    # The name is not embedded and, in a history this long, finds nothing as a word, so by
    # either channel the other people's talk of cities they visited matches best; only Jon's own
    # account answers, and it leads once the chats without him count for less. Gina saying his
    # name answers nothing.
    assert (ranked[:1] == [turns[1].id]) == (elsewhere_weight < 1)


@pytest.mark.parametrize("depth_factor", [1, 4], ids=["meaning-alone", "within-their-conversations"])
def test_a_named_speaker_among_many_conversations_is_looked_for_within_theirs(
    engine_server_factory: ServerFactory, depth_factor: int
) -> None:
    s = engine_server_factory(recall_candidates=4, named_recall_depth_factor=depth_factor)
    for n, (first, second) in enumerate(OTHER_PEOPLE):
        for topic, chat in (("books", OTHERS_ON_BOOKS), ("travel", OTHERS_ON_TRAVEL)):
            people = {"Omar": first, "Rosa": second}
            at = MAY_8_2023 - (10 - n) * DAY
            spoken = [
                turn(text.replace("Rosa", second), people[name], at=at + i) for i, (name, text) in enumerate(chat)
            ]
            add_conversation(s, "many", f"{topic}-{n}", spoken)
    # Her conversation holds more memories than a search's depth, a small share of all.
    said = list(add_conversation(s, "many", "s1", [*chatter(MAY_8_2023 - DAY), *MELANIE_ON_BOOKS]).turns)[-1]
    turns_only = memory_pb2.MemoryFilter(min_importance=0.0, kinds=[memory_pb2.MEMORY_KIND_EPISODE])
    found = query(s, "many", "What books has Melanie read?", filter=turns_only, limit=3)
    ranked = [r.memory.id for r in found.memories]
    within = "recall: searched by meaning within the conversations of Melanie" in found.report.notes
    assert within == (depth_factor > 1), list(found.report.notes)
    # By meaning alone (the name is not embedded) other people's talk of books outranks hers.
    assert (said.id in ranked) == (depth_factor > 1), [r.memory.content for r in found.memories]


def test_a_user_who_last_spoke_a_year_ago_finds_what_they_said_last_first(server: RunningServer) -> None:
    year_ago = time.time() - 365 * DAY
    for n, back in enumerate((700, 350, 0)):
        at = year_ago - back * DAY
        said = f"We adopted a rescue greyhound called {('Pixel', 'Biscuit', 'Nova')[n]}."
        add_conversation(server, "away", f"s{n}", [turn(said, "Melanie", at=at), *chatter(at + 10)])
    found = query(server, "away", "What is the name of Melanie's dog?", filter=all_filter(), limit=5)
    top = found.memories[0]
    # Counted from now, all three had lost their recency alike; counted in the user's own time,
    # what they said last has all of it.
    assert "Nova" in top.memory.content and top.score_breakdown.recency == pytest.approx(1.0, abs=1e-3)
    older = next(r for r in found.memories if "Biscuit" in r.memory.content)
    assert older.score_breakdown.recency == pytest.approx(0.5 ** (350 / 365), abs=0.01)


@pytest.mark.parametrize("mode", ["QUERY_MODE_DIRECT", "QUERY_MODE_APPLICABILITY"])
def test_a_sentence_said_in_several_chats_is_returned_once_and_its_place_goes_to_the_next(
    server: RunningServer, mode: str
) -> None:
    said = "We adopted a rescue greyhound called Pixel."
    for n in range(3):
        at = MAY_8_2023 + n * 30 * DAY
        add_conversation(server, "again", f"s{n}", [turn(said, "Melanie", at=at), *chatter(at + 10)])
    walks = add_conversation(
        server,
        "again",
        "s3",
        [turn("Pixel the greyhound loves our morning walks.", "Melanie", at=MAY_8_2023 + 99 * DAY)],
    ).turns[0]
    found = query(server, "again", "What is the name of Melanie's dog?", filter=all_filter(), limit=3, mode=mode)
    contents = [r.memory.content for r in found.memories]
    # The three copies would fill the three places; once, they leave two to what else matches.
    assert contents.count(said) == 1
    assert walks.id in [r.memory.id for r in found.memories]


@pytest.mark.parametrize("mode", [query_service_pb2.QUERY_MODE_DIRECT, query_service_pb2.QUERY_MODE_APPLICABILITY])
def test_a_long_sentence_copied_by_another_speaker_is_returned_once(server: RunningServer, mode: str) -> None:
    # An assistant's draft, pasted back word for word by the user in a later chat.
    draft = "Dear Sam, thank you so much for the lovely evening and the wonderful paella."
    add_conversation(
        server,
        "copied",
        "s0",
        [
            turn("Can you write a thank you note to Sam for dinner?", "Melanie", at=MAY_8_2023),
            turn(draft, role=memory_pb2.ROLE_ASSISTANT, at=MAY_8_2023 + 60),
        ],
    )
    add_conversation(
        server,
        "copied",
        "s1",
        [turn(draft, "Melanie", at=MAY_8_2023 + 9 * DAY)],
    )
    found = query(server, "copied", "thank you note for the paella dinner", filter=all_filter(), limit=5, mode=mode)
    contents = [r.memory.content for r in found.memories]
    assert contents.count(draft) == 1, contents
