"""AUTO's choice and the reason it gives, offline and with an LLM."""

from __future__ import annotations

import pytest

from memsvc.pipeline.context import QueryInput, QueryMode
from memsvc.retrieval.auto import choose_mode


@pytest.mark.parametrize(
    ("text", "llm", "mode", "why"),
    [
        ("ok thanks", False, QueryMode.DIRECT, "trivial message"),
        ("When did Caroline go to the LGBTQ support group?", False, QueryMode.APPLICABILITY, "best-ranking"),
        ("What do Alice and Bob like to eat?", False, QueryMode.APPLICABILITY, "part by part"),
        ("What do Alice and Bob like to eat?", True, QueryMode.AGENT, "planned by the LLM"),
        ("When did Caroline go to the LGBTQ support group?", True, QueryMode.APPLICABILITY, "best-ranking"),
    ],
)
def test_auto_prefers_applicability_and_says_why(text: str, llm: bool, mode: QueryMode, why: str) -> None:
    chosen, reason = choose_mode(QueryInput("u", text), llm)
    assert chosen is mode and why in reason


def test_query_variations_from_the_caller_go_to_fusion() -> None:
    request = QueryInput("u", "Where does Maria work?", additional_queries=("Maria's job",))
    assert choose_mode(request, False) == (QueryMode.FUSION, "the caller gave query variations")
