"""AUTO: a mode per query from cheap signals, no LLM call.

APPLICABILITY is the default for a question about the user's memories: on every question type
of the evaluation (docs/retrieval.md) it ranked best offline, because its pool is the widest
(dense, lexical, the query's parts and hints) and its score asks whether a memory answers the
question rather than whether it looks like it. The other modes are picked only where they add
something it lacks: FUSION for query variations the caller wrote, AGENT's hops when an LLM can
plan them, DIRECT where there is nothing to search for.
"""

from __future__ import annotations

from memsvc.llm.heuristics import is_trivial, route
from memsvc.llm.needs import detect_needs
from memsvc.pipeline.context import QueryInput, QueryMode

# Needs where what matters is not what looks similar: applicability scoring pays off.
_APPLICABILITY_NEEDS = ("follow_up_failure", "contradiction", "loop", "ambiguity", "frustration")


def choose_mode(request: QueryInput, llm_configured: bool) -> tuple[QueryMode, str]:
    """The mode for this request and why."""
    if request.additional_queries:
        return QueryMode.FUSION, "the caller gave query variations"
    if is_trivial(request.query):
        return QueryMode.DIRECT, "trivial message"
    tool, why = route(request.query)
    if tool != "direct" and llm_configured:
        return QueryMode.AGENT, f"{why}, planned by the LLM"
    needs = detect_needs(request.query, tuple(t.content for t in request.recent_turns))
    if needs.callback:
        return QueryMode.APPLICABILITY, "refers to what the assistant said"
    hit = [n for n in _APPLICABILITY_NEEDS if needs.has(n)]
    if hit:
        return QueryMode.APPLICABILITY, f"need {hit[0]}"
    if request.token_budget:
        return QueryMode.APPLICABILITY, "a context block was asked for"
    if tool != "direct":
        # Offline the agent's hops are heuristics; applicability's pool already searches each part.
        return QueryMode.APPLICABILITY, f"{why}, searched part by part in one pool (no LLM for the agent)"
    return QueryMode.APPLICABILITY, "a question about memories: the best-ranking mode offline"
