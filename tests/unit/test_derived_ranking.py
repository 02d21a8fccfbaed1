"""Ranking with derived memories: a memory and what it came from are one piece of evidence."""

from __future__ import annotations

import pytest

from memsvc.domain.models import Memory, Namespace, RankedMemory, ScoreBreakdown
from memsvc.llm.needs import detect_needs
from memsvc.pipeline.query.rank import CLEAR_MATCH, distinct, results

NS = Namespace("t", "p", "e", "u")


def ranked(memory_id: str, *sources: str) -> RankedMemory:
    return RankedMemory(Memory(memory_id, NS, memory_id, source_ids=sources), 1.0, ScoreBreakdown())


def ids(results: list[RankedMemory]) -> list[str]:
    return [r.memory.id for r in results]


def test_a_turn_below_its_extracted_memory_and_a_summary_below_all_its_sources_are_left_out() -> None:
    order = [
        ranked("fact", "turn1"),
        ranked("turn2"),
        ranked("turn1"),  # said by "fact" already
        ranked("summary", "turn1", "turn2"),  # every source already above
        ranked("summary2", "turn2", "turn3"),  # turn3 is new: it adds something
        ranked("turn3"),  # covered by summary2
        ranked("other"),
    ]
    assert ids(distinct(order)) == ["fact", "turn2", "summary2", "other"]


def matching(memory_id: str, relevance: float, topic_relevance: float) -> RankedMemory:
    breakdown = ScoreBreakdown(relevance=relevance, topic_relevance=topic_relevance)
    return RankedMemory(Memory(memory_id, NS, memory_id), 1.0, breakdown)


def test_a_name_alone_passes_the_floor_only_where_nothing_clearly_matches_the_rest_of_the_question() -> None:
    by_name = [matching("lunch", 0.15, 0.0), matching("podcast", 0.12, 0.02)]
    answer = matching("job", 1.0, 0.8)
    kept, dropped = results([answer, *by_name], 0.1, 5)
    assert ids(kept) == ["job"] and dropped == 2
    # Only the person's memories, none clearly about what is asked: they are the best there is.
    weak = matching("tyres", 0.3, CLEAR_MATCH - 0.01)
    kept, dropped = results([weak, *by_name], 0.1, 5)
    assert ids(kept) == ["tyres", "lunch", "podcast"] and dropped == 0
    # The floor off keeps everything.
    assert ids(results([answer, *by_name], 0.0, 5)[0]) == ["job", "lunch", "podcast"]


def test_memories_without_sources_keep_their_order() -> None:
    order = [ranked(f"m{i}") for i in range(5)]
    assert ids(distinct(order)) == ids(order)


@pytest.mark.parametrize(
    ("question", "gathers"),
    [
        ("What has Melanie painted?", True),
        ("Where has Melanie camped?", True),
        ("How many times has Melanie gone to the beach in 2023?", True),
        ("What events has Caroline participated in to help children?", True),
        ("In what ways is Caroline participating in the LGBTQ community?", True),
        ("What instruments does Melanie play?", True),
        ("What did Caroline research?", False),
        ("What is Caroline's relationship status?", False),
        ("When did Melanie paint a sunrise?", False),
    ],
)
def test_questions_that_gather_several_things_have_list_intent(question: str, gathers: bool) -> None:
    assert detect_needs(question).list_intent is gathers
