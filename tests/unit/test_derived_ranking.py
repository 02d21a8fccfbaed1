"""Ranking with derived memories: a memory and what it came from are one piece of evidence."""

from __future__ import annotations

import pytest

from memsvc.domain.models import Memory, Namespace, RankedMemory, ScoreBreakdown
from memsvc.llm.needs import detect_needs
from memsvc.pipeline.query.rank import distinct

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
