"""The offline applicability estimate matches words as the lexical index does."""

from __future__ import annotations

import time

import pytest

from memsvc.domain.models import Memory, MemoryKind, Namespace, RankedMemory, ScoreBreakdown
from memsvc.retrieval.applicability import (
    OTHER_SPEAKER_PENALTY,
    TermMatcher,
    analyse_offline,
    combine,
    named_speaker,
    offline_applicability,
    pool_term_weights,
    substance,
)

NS = Namespace("acme", "default", "development", "u1")


def ranked(memory_id: str, content: str) -> RankedMemory:
    return RankedMemory(Memory(id=memory_id, namespace=NS, content=content), 0.5, ScoreBreakdown(semantic=0.5))


def test_terms_are_the_index_stems_with_hyphenated_compounds_joined() -> None:
    terms = TermMatcher()
    found = terms.of("I've been running farther to de-stress")
    assert {"run", "farther", "stress", "destress"} <= found
    assert terms.keys("What does Melanie do to destress?") == ["melani", "destress"]
    assert terms.entities("What does Melanie do to destress?") == {"melani"}


def test_keys_are_the_words_the_index_holds_whole() -> None:
    # The keyword reader splits "18th" into "18" and "th"; no memory holds either as a term.
    assert TermMatcher().keys("How long ago was Caroline's 18th birthday?") == ["carolin", "long", "18th", "birthday"]
    found = TermMatcher().of("A friend made it for my 18th birthday")
    assert {"18th", "birthday"} <= found


def test_a_memory_holding_the_questions_term_as_a_compound_scores_higher() -> None:
    query = "What does Melanie do to destress?"
    analysis = analyse_offline(query, [], time.time())
    terms = TermMatcher()
    answer = ranked("a", "Melanie: running farther helps me de-stress")
    other = ranked("b", "Melanie: work has been so stressful lately")
    words = [terms.of(answer.memory.content), terms.of(other.memory.content)]
    weights = pool_term_weights(query, words, terms)
    # The name is in both, so the pool IDF weighs it below the term that tells them apart.
    assert weights["destress"] > weights["melani"]
    scores = [offline_applicability(r, w, analysis, [], weights) for r, w in zip([answer, other], words, strict=True)]
    assert scores[0] > scores[1]


def test_a_turn_that_states_something_outranks_one_that_only_reacts_and_asks() -> None:
    query = "What has Melanie painted?"
    analysis = analyse_offline(query, [], time.time())
    terms = TermMatcher()
    asks = ranked("a", "Melanie: Wow, that painting is awesome! What inspired you to paint it?")
    states = ranked("b", "Melanie: Here is my horse painting, I did it last week on the old barn wall at the farm")
    words = [terms.of(asks.memory.content), terms.of(states.memory.content)]
    weights = pool_term_weights(query, words, terms)
    assert substance("Wow! What inspired you? Was it hard?") == pytest.approx(1 / 25)
    assert substance(states.memory.content) > substance(asks.memory.content)
    scores = [offline_applicability(r, w, analysis, [], weights) for r, w in zip([asks, states], words, strict=True)]
    assert scores[1] > scores[0]


def test_a_turn_of_a_few_words_is_not_judged_by_its_similarity_alone_while_a_saved_note_is() -> None:
    # A two-word reply seems as close to any question as an answer does; it means what the turn
    # before it says. A note saved on its own means what it says.
    query = "What city does Caleb live in?"
    analysis = analyse_offline(query, [], time.time())
    terms = TermMatcher()

    def alike(memory_id: str, content: str, session: str) -> RankedMemory:
        memory = Memory(id=memory_id, namespace=NS, content=content, kind=MemoryKind.EPISODE, session_id=session)
        return RankedMemory(memory, 0.5, ScoreBreakdown(semantic=0.5))

    reply = alike("a", "ok Tuesday then", "s1")
    answer = alike("b", "we live in a flat in Lawrenceville these days", "s2")
    note = alike("c", "flat in Lawrenceville", "")
    words = [terms.of(r.memory.content) for r in (reply, answer, note)]
    weights = pool_term_weights(query, words, terms)
    scores = [
        offline_applicability(r, w, analysis, [], weights) for r, w in zip([reply, answer, note], words, strict=True)
    ]
    assert scores[0] < scores[1]
    assert scores[0] < scores[2]


def spoken(memory_id: str, speaker: str, content: str) -> RankedMemory:
    ns = Namespace("t", "p", "development", "u")
    memory = Memory(id=memory_id, namespace=ns, content=content, speaker_name=speaker)
    return RankedMemory(memory, 0.5, ScoreBreakdown(decay=1.0))


def test_a_question_about_one_speaker_puts_the_other_speakers_turns_below() -> None:
    terms = TermMatcher()
    pool = [spoken("a", "Melanie", "I paint sunsets"), spoken("b", "Caroline Lee", "I love painting too!")]
    pool.append(spoken("x", "", "Melanie enjoys painting"))  # extracted: no speaker, names its subject
    assert named_speaker(terms.entities("What does Melanie paint?"), pool, terms) == "Melanie"
    assert named_speaker(terms.entities("What did Caroline give Melanie?"), pool, terms) is None  # two named
    assert named_speaker(terms.entities("What do they paint?"), pool, terms) is None
    analysis = analyse_offline("What does Melanie paint?", [], time.time())
    mine, theirs, extracted = (combine(r, 0.5, 0.5, analysis, "Melanie") for r in pool)
    assert theirs == pytest.approx(mine - OTHER_SPEAKER_PENALTY) and extracted == mine
    assert combine(pool[1], 0.5, 0.5, analysis, None) == mine  # no subject: no penalty


def test_compound_keys_name_the_parts_the_postings_hold() -> None:
    terms = TermMatcher()
    assert terms.compounds("What does Caroline do for self-care?") == {"selfcar": [("self", "care")]}
    ways = terms.compounds("What does Melanie do to destress?")
    # Any split of a single word into two terms; never of a name ("caro" + "line").
    assert ("de", "stress") in ways["destress"]
    assert set(ways) == {"destress"}
    assert "2022" not in terms.compounds("What happened in 2022?")  # digits are never split
