"""The result cache key comes from the request itself: a field that changes results changes the key.

A query answered from the cache must be the query that was asked. These tests fail when a field
is added to QueryInput or MemoryFilter without a varied value below: add one (then the key
covers it), or, for a QueryInput field that cannot change results, list it in NOT_IN_RESULT_KEY.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import pytest

from memsvc.domain.models import Memory, MemoryFilter, MemoryKind, Namespace, Role, Tier
from memsvc.pipeline.context import NOT_IN_RESULT_KEY, QueryInput, Turn, result_key

BASE = QueryInput(user_id="u1", query="how do I like to fly?")
VARIED_REQUEST: dict[str, Any] = {
    "query": "what am I allergic to?",
    "limit": 3,
    "memory_filter": MemoryFilter(tier=Tier.HOT),
    "mode": "fusion",
    "additional_queries": ("seat preference",),
    "recent_turns": (Turn(Role.USER, "I am flying to Lisbon"),),
    "context_window": 2,
    "token_budget": 400,
    "min_relevance": 0.5,
}
VARIED_FILTER: dict[str, Any] = {
    "tier": Tier.COLD,
    "tags_any": ("travel",),
    "session_id": "s-1",
    "session_ids": ("s-1", "s-2"),
    "metadata": {"source": "chat"},
    "min_importance": 0.2,
    "roles": (Role.ASSISTANT,),
    "kinds": (MemoryKind.PREFERENCE,),
    "created_after": 1.0,
    "created_before": 2.0,
    "include_inactive": True,
}


def test_every_request_field_is_varied_here_or_declared_result_neutral() -> None:
    names = {f.name for f in fields(QueryInput)}
    assert names >= NOT_IN_RESULT_KEY
    unknown = names - NOT_IN_RESULT_KEY - VARIED_REQUEST.keys()
    assert not unknown, f"QueryInput fields {sorted(unknown)}: vary them here or list them in NOT_IN_RESULT_KEY"


@pytest.mark.parametrize("name", sorted(VARIED_REQUEST))
def test_a_field_that_changes_results_changes_the_key(name: str) -> None:
    changed = replace(BASE, **{name: VARIED_REQUEST[name]})
    assert result_key(changed, changed.limit or 10) != result_key(BASE, 10)


@pytest.mark.parametrize("name", sorted(NOT_IN_RESULT_KEY))
def test_result_neutral_fields_share_the_key(name: str) -> None:
    value = {"user_id": "u2", "skip_cache": True, "include_sources": True, "include_context": True}[name]
    assert result_key(replace(BASE, **{name: value}), 10) == result_key(BASE, 10)


def test_every_filter_field_is_in_the_filter_fingerprint() -> None:
    names = {f.name for f in fields(MemoryFilter)}
    assert names == VARIED_FILTER.keys(), f"vary the new MemoryFilter fields {sorted(names - VARIED_FILTER.keys())}"
    for name, value in VARIED_FILTER.items():
        assert MemoryFilter(**{name: value}).fingerprint() != MemoryFilter().fingerprint(), name


NS = Namespace("acme", "default", "development", "u")


def test_a_filter_of_sessions_admits_a_memory_of_one_of_them() -> None:
    within = MemoryFilter(session_ids=("s-1", ""))
    assert within.admits(Memory("a", NS, "x", session_id="s-1"))
    assert within.admits(Memory("b", NS, "x"))  # of no session
    assert not within.admits(Memory("c", NS, "x", session_id="s-2"))
