"""MULTI_QUERY (seed 000): the message plus synthesised auxiliary questions, searched concurrently."""

from __future__ import annotations

from functools import partial

from memsvc.deadline import Deadline
from memsvc.llm.client import Llm
from memsvc.llm.heuristics import is_trivial, synthesize_questions
from memsvc.llm.parse import string_list
from memsvc.pipeline.context import QueryInput, QueryMode, QueryPlan, QueryReport, stage_span
from memsvc.pipeline.query.pipeline import Gathered, QueryPipeline
from memsvc.retrieval.base import GENERATED_WEIGHT, Evidence, distinct_queries, recent_block, recent_texts, search_all


class MultiQuery:
    name = QueryMode.MULTI_QUERY

    def __init__(
        self, pipeline: QueryPipeline, llm: Llm, *, questions: int = 2, per_query: int = 3, limit: int = 7
    ) -> None:
        self._pipeline = pipeline
        self._llm = llm
        self._questions = questions
        self._per_query = per_query
        self.default_limit: int | None = limit

    async def synthesize(self, request: QueryInput, report: QueryReport, deadline: Deadline) -> list[str]:
        """Auxiliary questions: none for trivial messages; the LLM when configured, else heuristics."""
        if is_trivial(request.query, bool(request.recent_turns)):
            report.notes.append("multi_query: trivial message, no auxiliary questions")
            return []
        with stage_span(self._pipeline.tracer, report, "synthesize"):
            questions = await self._llm.ask(
                "multi_query",
                report.llm,
                deadline,
                partial(string_list, key="questions", limit=self._questions),
                max_tokens=160,
                message=request.query,
                recent=recent_block(request),
                count=str(self._questions),
            )
            if questions is None:
                questions = synthesize_questions(request.query, recent_texts(request), self._questions)
        return questions

    async def gather(self, plan: QueryPlan, request: QueryInput, report: QueryReport, deadline: Deadline) -> Gathered:
        queries = distinct_queries([plan.query, *await self.synthesize(request, report, deadline)])
        depth = max(self._per_query, plan.limit)
        results = await search_all(self._pipeline, plan, queries, report, deadline, depth)
        # Seed 000: each query contributes its top results; the union is ranked by consensus and
        # topped up from deeper ranks when overlapping queries leave fewer than the limit.
        evidence = Evidence(self._pipeline.queries_rrf_k)
        for i, (q, found) in enumerate(zip(queries, results, strict=True)):
            evidence.add(q, found[: self._per_query], 1.0 if i == 0 else GENERATED_WEIGHT)
        rank = self._per_query
        while len(evidence.candidates) < plan.limit and any(len(f) > rank for f in results):
            for i, (q, found) in enumerate(zip(queries, results, strict=True)):
                if rank < len(found) and len(evidence.candidates) < plan.limit:
                    evidence.add(q, [found[rank]], 1.0 if i == 0 else GENERATED_WEIGHT, first_rank=rank + 1)
            rank += 1
        return Gathered(evidence.ranked(), evidence.matched)
