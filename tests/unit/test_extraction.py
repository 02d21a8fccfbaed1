"""The offline extraction rules and the extractive summarizer: pure logic, no model."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from memsvc.domain.models import Memory, MemoryKind, Namespace, RankedMemory, Role, ScoreBreakdown, SpokenTurn
from memsvc.llm.dates import resolve_date_phrase
from memsvc.pipeline.write.extraction import StoredTurn, extract_by_rules
from memsvc.pipeline.write.summary import ExtractiveSummarizer
from memsvc.pipeline.write.third_person import as_said_by
from memsvc.retrieval.compose import compose_context

MAY_8_2023 = 1_683_540_000.0


def stored(content: str, name: str = "", role: Role = Role.USER, n: int = 0) -> StoredTurn:
    return StoredTurn(f"{n:032x}", SpokenTurn(role, content, MAY_8_2023, name), MAY_8_2023)


@pytest.mark.parametrize(
    ("sentence", "told"),
    [
        ("I love my cats.", "Mel loves Mel's cats."),
        ("I'm a nurse and I work nights.", "Mel is a nurse and Mel works nights."),
        ("I really enjoy baking for me and my kids.", "Mel really enjoys baking for Mel and Mel's kids."),
        ("I've been running and I'll keep going.", "Mel has been running and Mel will keep going."),
        ("I went home and I need to rest.", "Mel went home and Mel needs to rest."),
        ("I watch movies.", "Mel watches movies."),
    ],
)
def test_first_person_is_told_of_the_speaker(sentence: str, told: str) -> None:
    assert as_said_by(sentence, "Mel") == told


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I went hiking yesterday", ("yesterday", "7 May 2023")),
        ("we move next month", ("next month", "June 2023")),
        ("tomorrow is the day", ("tomorrow", "9 May 2023")),
        ("I ran last Saturday", ("last Saturday", "6 May 2023")),
        ("two weeks ago I moved", ("two weeks ago", "about 24 April 2023")),
        ("last year was hard", ("last year", "2022")),
        ("on 3 May 2023 I flew", None),
        ("recently I read a lot", None),
        # A plan's weekday is the coming one; a past statement's the last one (8 May is a Monday).
        ("I will see her on Saturday", ("on Saturday", "13 May 2023")),
        ("I saw her on Saturday", ("on Saturday", "6 May 2023")),
        ("we'll meet this Monday", ("this Monday", "8 May 2023")),
        ("I'm going to call on Monday", ("on Monday", "15 May 2023")),
    ],
)
def test_relative_dates_resolve_against_the_time_said(text: str, expected: tuple[str, str] | None) -> None:
    assert resolve_date_phrase(text, MAY_8_2023) == expected


def test_the_rules_extract_what_they_reliably_can_and_nothing_else() -> None:
    turns = [
        stored("Hey! What have you been up to?", "Caroline", n=1),
        stored("Oh, I love pottery. I'm planning to take a class next week. haha", "Melanie", n=2),
        stored("You should try the studio on Elm Street, it is great.", "Caroline", n=3),
        stored("The weather is nice today.", "Melanie", n=4),
        stored("I prefer aisle seats on long flights.", n=5),
        stored("Sure, I would suggest booking the earlier train.", role=Role.ASSISTANT, n=6),
    ]
    found = [(m.kind, m.content, m.source_ids) for m in extract_by_rules(turns, [])]
    assert found == [
        (MemoryKind.PREFERENCE, "Melanie loves pottery.", (f"{2:032x}",)),
        (
            MemoryKind.COMMITMENT,
            "Melanie is planning to take a class next week (15 May 2023 to 21 May 2023).",
            (f"{2:032x}",),
        ),
        (
            MemoryKind.RECOMMENDATION,
            "Caroline recommended to Melanie: You should try the studio on Elm Street, it is great.",
            (f"{3:032x}",),
        ),
        (MemoryKind.PREFERENCE, "I prefer aisle seats on long flights.", (f"{5:032x}",)),
        (
            MemoryKind.RECOMMENDATION,
            "The assistant recommended: I would suggest booking the earlier train.",
            (f"{6:032x}",),
        ),
    ]


@pytest.mark.parametrize(
    ("content", "kind", "told"),
    [
        ("I just signed up for a pottery class.", MemoryKind.FACT, "Mel just signed up for a pottery class."),
        (
            "I finally decided to open my own studio.",
            MemoryKind.DECISION,
            "Mel finally decided to open Mel's own studio.",
        ),
        ("I actually love hiking.", MemoryKind.PREFERENCE, "Mel actually loves hiking."),
    ],
)
def test_an_adverb_between_i_and_the_verb_does_not_hide_the_statement(
    content: str, kind: MemoryKind, told: str
) -> None:
    (found,) = extract_by_rules([stored(content, "Mel", n=1)], [])
    assert (found.kind, found.content) == (kind, told)


@pytest.mark.parametrize(
    ("content", "told"),
    [
        # A state held for a while is as much a fact of the speaker's as one held now.
        ("I've been vegetarian since college.", "Mel has been vegetarian since college."),
        ("ive been a nurse since 2015", "Mel has been a nurse since 2015."),
        # "We" is the speaker's household.
        ("we finally moved to Otley.", "Mel said: we finally moved to Otley."),
    ],
)
def test_a_state_held_for_a_while_and_what_the_household_did_are_facts(content: str, told: str) -> None:
    (found,) = extract_by_rules([stored(content, "Mel", n=1)], [])
    assert (found.kind, found.content) == (MemoryKind.FACT, told)


@pytest.mark.parametrize(
    "content",
    [
        "I love to.",  # no object
        "Oh I love it too!",  # only a pronoun for what is loved
        "I'll keep you posted on how it goes.",  # managing the conversation
        "I will let you know when I hear back.",
        "I'd love to try it sometime!",  # "try" that is no advice
        "Excited to try this recipe out.",
    ],
)
def test_the_rules_skip_sentences_that_say_nothing_on_their_own(content: str) -> None:
    turns = [stored("Have you been to the new pottery studio?", "Caroline", n=1), stored(content, "Melanie", n=2)]
    assert extract_by_rules(turns, []) == []


def test_a_turn_that_only_acknowledges_extracts_nothing() -> None:
    said = "Splendid. I will look for one."
    assert extract_by_rules([stored(said, "Harold")], []) != []  # read on its own, it plans something
    assert extract_by_rules([replace(stored(said, "Harold"), acknowledgement=True)], []) == []


def test_the_pronoun_typed_in_lower_case_is_read_as_written() -> None:
    said = "best compression socks? im a pharmacist at walgreens and ive got 12 hr shifts"
    assert [m.content for m in extract_by_rules([stored(said, "Nadia")], [])] == [
        "Nadia is a pharmacist at walgreens and Nadia has got 12 hr shifts."
    ]


def test_talking_to_an_assistant_the_summary_quotes_what_the_user_said_before_its_answers() -> None:
    assistant = Role.ASSISTANT
    turns = [
        stored("my cat mochi is 9 and throws up hairballs twice a week", "Ellie", n=1),
        stored(
            "Occasional hairballs are normal; try Sockwell brushes, Furminator gloves or Hill's food.", "", assistant, 2
        ),
        stored("she hates the brush", "Ellie", n=3),
        stored("Try a grooming glove: Lots of cats who hate brushes love being petted clean.", "", assistant, 4),
        stored("ooh", "Ellie", n=5),
        stored("Worth a shot!", "", assistant, 6),
    ]
    summary = asyncio.run(ExtractiveSummarizer().summarize("s1", turns))
    assert summary is not None
    assert summary.source_ids[0] == f"{1:032x}"
    assert summary.content.splitlines()[1] == "Ellie: my cat mochi is 9 and throws up hairballs twice a week"
    # An acknowledgement is never quoted, however many words it has.
    acknowledged = [replace(t, acknowledgement=True) if t.memory_id == f"{1:032x}" else t for t in turns]
    again = asyncio.run(ExtractiveSummarizer().summarize("s1", acknowledged))
    assert again is not None and f"{1:032x}" not in again.source_ids


def test_the_summary_quotes_distinctive_turns_in_order_and_skips_small_talk() -> None:
    turns = [
        stored("Hi there, how are you doing today?", "Ana", n=1),
        stored("Good! We adopted a greyhound named Pepper from the Lisbon shelter.", "Ben", n=2),
        stored("haha nice", "Ana", n=3),
        stored("I got promoted to head chef at Cervejaria Ramiro last week.", "Ana", n=4),
        stored("Congrats, how are you doing with the new hours?", "Ben", n=5),
        stored("Tiring but good, how are you doing?", "Ana", n=6),
        stored("Pepper already knows how to sit and fetch.", "Ben", n=7),
        stored("ok", "Ana", n=8),
        stored("good good", "Ben", n=9),
        stored("fine thanks", "Ana", n=10),
    ]
    summary = asyncio.run(ExtractiveSummarizer().summarize("s7", turns))
    assert summary is not None
    assert summary.content.splitlines() == [
        "Conversation s7 on 8 May 2023 between Ana and Ben:",
        "Ben: Good! We adopted a greyhound named Pepper from the Lisbon shelter.",
        "Ana: I got promoted to head chef at Cervejaria Ramiro last week.",
    ]
    assert summary.source_ids == (f"{2:032x}", f"{4:032x}")
    assert asyncio.run(ExtractiveSummarizer().summarize("s7", turns[:3])) is None


def _ranked(memory_id: str, content: str, **fields: object) -> RankedMemory:
    memory = Memory(id=memory_id, namespace=Namespace("t", "p", "e", "u"), content=content, **fields)  # type: ignore[arg-type]
    return RankedMemory(memory, 1.0, ScoreBreakdown())


def test_a_stale_summary_gives_way_to_its_own_source_turn_in_the_context_block() -> None:
    turn = _ranked("t1", "I live in Denver now.", kind=MemoryKind.EPISODE)
    summary = _ranked(
        "s1", "Conversation s1: Mel: I live in Boston.", kind=MemoryKind.SUMMARY, source_ids=("t1",), stale=True
    )
    composed = compose_context([summary, turn], 1_000)
    assert "Boston" not in composed.text and "Denver" in composed.text and composed.left_out == 1
    alone = compose_context([summary], 1_000).text
    assert "summary, may be outdated] Conversation s1" in alone
    fresh = compose_context([replace(summary, memory=summary.memory._replace(stale=False)), turn], 1_000).text
    assert "Boston" in fresh and "Denver" in fresh


@pytest.mark.parametrize(
    ("said", "told"),
    [
        # A question typed after the statement without its question mark is asked, not stated.
        ("i just started at the hospital, any tips for night shifts", "Nadia just started at the hospital."),
        ("I work at Acme, how do I ask for a raise", "Nadia works at Acme."),
        # ... and so is a yes/no question after one.
        ("I'm allergic to penicillin, is amoxicillin ok for my ear infection?", "Nadia is allergic to penicillin."),
        # ... while a clause that goes on about what was named stays.
        ("I moved to Leeds, where I work now", "Nadia moved to Leeds, where Nadia works now."),
    ],
)
def test_a_question_typed_after_a_statement_is_left_out_of_what_is_extracted(said: str, told: str) -> None:
    assert [m.content for m in extract_by_rules([stored(said, "Nadia")], [])] == [told]
