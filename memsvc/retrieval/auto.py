"""AUTO: a mode per query from cheap signals, no LLM call."""

from __future__ import annotations

from memsvc.llm.heuristics import is_trivial, route
from memsvc.llm.needs import detect_needs
from memsvc.llm.text import extract_keywords
from memsvc.pipeline.context import QueryInput, QueryMode

# Needs where what matters is not what looks similar: applicability scoring pays off.
_APPLICABILITY_NEEDS = ("follow_up_failure", "contradiction", "loop", "ambiguity", "frustration")


def choose_mode(request: QueryInput) -> tuple[QueryMode, str]:
    """The mode for this request and why."""
    if request.additional_queries:
        return QueryMode.FUSION, "the caller gave query variations"
    if is_trivial(request.query):
        return QueryMode.DIRECT, "trivial message"
    tool, why = route(request.query)
    if tool != "direct":
        return QueryMode.AGENT, why
    needs = detect_needs(request.query, tuple(t.content for t in request.recent_turns))
    if needs.callback:
        return QueryMode.APPLICABILITY, "refers to what the assistant said"
    hit = [n for n in _APPLICABILITY_NEEDS if needs.has(n)]
    if hit:
        return QueryMode.APPLICABILITY, f"need {hit[0]}"
    if request.token_budget:
        return QueryMode.APPLICABILITY, "a context block was asked for"
    kw = extract_keywords(request.query)
    if request.recent_turns and (needs.has("under_specified") or len(kw.specific_terms) <= 2):
        return QueryMode.MULTI_QUERY, "short message that leans on the conversation"
    if len(kw.specific_terms) <= 3 and len(request.query.split()) <= 6:
        return QueryMode.DIRECT, "short, specific query"
    return QueryMode.MULTI_QUERY, "conversational query"
