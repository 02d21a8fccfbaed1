"""The Retrieval facade: validates the mode options, dispatches to a strategy, expands and composes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from memsvc.deadline import Deadline
from memsvc.domain.models import Principal
from memsvc.errors import InvalidArgument
from memsvc.llm.client import Llm
from memsvc.llm.needs import detect_needs
from memsvc.pipeline.context import QueryInput, QueryMode, QueryReport, stage_span
from memsvc.pipeline.query.pipeline import QueryOutcome, QueryPipeline
from memsvc.pipeline.validation import Violations
from memsvc.retrieval.auto import choose_mode
from memsvc.retrieval.base import Strategy
from memsvc.retrieval.compose import compose_context
from memsvc.retrieval.contract import ContractReader
from memsvc.retrieval.expand import ContextExpander
from memsvc.retrieval.sources import SourceAttacher

MAX_ADDITIONAL_QUERIES = 3
MAX_RECENT_TURNS = 20
MAX_TURN_CHARS = 4096
MAX_CONTEXT_WINDOW = 5


def validate_options(request: QueryInput, max_query_chars: int, max_token_budget: int) -> None:
    v = Violations()
    if len(request.additional_queries) > MAX_ADDITIONAL_QUERIES:
        v.add("additional_queries", f"must hold at most {MAX_ADDITIONAL_QUERIES} queries")
    for i, q in enumerate(request.additional_queries):
        if not q.strip():
            v.add(f"additional_queries[{i}]", "must not be empty")
        elif len(q) > max_query_chars:
            v.add(f"additional_queries[{i}]", f"must be at most {max_query_chars} characters")
    if len(request.recent_turns) > MAX_RECENT_TURNS:
        v.add("recent_turns", f"must hold at most {MAX_RECENT_TURNS} turns")
    for i, t in enumerate(request.recent_turns):
        if len(t.content) > MAX_TURN_CHARS:
            v.add(f"recent_turns[{i}].content", f"must be at most {MAX_TURN_CHARS} characters")
    if not 0 <= request.context_window <= MAX_CONTEXT_WINDOW:
        v.add("context_window", f"must be within 0..{MAX_CONTEXT_WINDOW}")
    if not 0 <= request.token_budget <= max_token_budget:
        v.add("token_budget", f"must be within 0..{max_token_budget}")
    v.raise_if_any()


class Retrieval:
    """What QueryService.Query calls: every mode through one entry point."""

    def __init__(
        self,
        pipeline: QueryPipeline,
        strategies: Mapping[QueryMode, Strategy],
        expander: ContextExpander,
        sources: SourceAttacher,
        contract: ContractReader,
        llm: Llm,
        *,
        max_query_chars: int,
        default_token_budget: int = 1024,
        max_token_budget: int = 32_768,
    ) -> None:
        self._pipeline = pipeline
        self._strategies = dict(strategies)
        self._expander = expander
        self._sources = sources
        self._contract = contract
        self._llm = llm
        self._max_query_chars = max_query_chars
        self._default_token_budget = default_token_budget
        self._max_token_budget = max_token_budget

    @property
    def llm_configured(self) -> bool:
        return self._llm.configured

    async def close(self) -> None:
        await self._llm.close()

    async def query(self, principal: Principal, request: QueryInput, deadline: Deadline) -> QueryOutcome:
        validate_options(request, self._max_query_chars, self._max_token_budget)
        mode = request.mode
        notes: list[str] = []
        if mode is QueryMode.AUTO:
            mode, why = choose_mode(request, self._llm.configured)
            notes.append(f"auto: chose {mode} ({why})")
        if mode is QueryMode.DIRECT:
            outcome = await self._pipeline.run(principal, request, deadline)
            report = outcome.report
            report.notes[:0] = notes
        else:
            strategy = self._strategies.get(mode)
            if strategy is None:
                raise InvalidArgument.field("mode", f"unknown mode {mode}")
            if not self._llm.configured:
                notes.append("llm: no endpoint configured, offline heuristics")
            report = QueryReport(mode=mode, notes=notes)
            outcome = await self._pipeline.execute(
                principal,
                request,
                report,
                deadline,
                lambda plan: strategy.gather(plan, request, report, deadline),
                strategy.default_limit,
            )
        if request.context_window > 0:
            outcome = await self._expander.run(outcome, request.context_window, deadline, report)
        if request.include_sources:
            outcome = await self._sources.run(outcome, deadline, report)
        if mode is QueryMode.APPLICABILITY or request.include_context:
            outcome = await self._composed(outcome, request, deadline, report)
        return replace(outcome, report=report)

    async def _composed(
        self, outcome: QueryOutcome, request: QueryInput, deadline: Deadline, report: QueryReport
    ) -> QueryOutcome:
        """The outcome with its context block: the user's instructions, the results and the
        request's recent turns, within the request's token budget."""
        instructions = await self._contract.run(outcome.plan.namespace, deadline, report)
        budget = request.token_budget or self._default_token_budget
        with stage_span(self._pipeline.tracer, report, "compose"):
            broad = detect_needs(request.query).list_intent
            composed = compose_context(outcome.memories, budget, broad, instructions, request.recent_turns)
        if composed.left_out:
            report.notes.append(f"compose: {composed.left_out} memories left out (near-duplicates or over budget)")
        return replace(outcome, context=composed.text)
