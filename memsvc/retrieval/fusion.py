"""FUSION (seed 001): one to three query variations, merged by memory id keeping the best score."""

from __future__ import annotations

from functools import partial

from memsvc.deadline import Deadline
from memsvc.llm.client import Llm
from memsvc.llm.heuristics import variations
from memsvc.llm.parse import string_list
from memsvc.pipeline.context import QueryInput, QueryMode, QueryPlan, QueryReport, stage_span
from memsvc.pipeline.query.pipeline import Gathered, QueryPipeline
from memsvc.retrieval.base import GENERATED_WEIGHT, Evidence, distinct_queries, search_all


class Fusion:
    name = QueryMode.FUSION

    default_limit: int | None = None

    def __init__(self, pipeline: QueryPipeline, llm: Llm) -> None:
        self._pipeline = pipeline
        self._llm = llm

    async def expand(self, request: QueryInput, report: QueryReport, deadline: Deadline) -> list[str]:
        """The caller's variations if given; else the LLM's JSON array; else offline variations."""
        if request.additional_queries:
            report.notes.append("fusion: caller's additional_queries used, no generation")
            return list(request.additional_queries)
        with stage_span(self._pipeline.tracer, report, "expand"):
            generated = await self._llm.ask(
                "fusion",
                report.llm,
                deadline,
                partial(string_list, limit=3),
                max_tokens=256,
                fallback="the original query alone",
                query=request.query,
            )
            if generated is not None:
                return generated
            if self._llm.configured:
                return []  # seed 001: an unusable reply means the original query alone
            return variations(request.query)

    async def gather(self, plan: QueryPlan, request: QueryInput, report: QueryReport, deadline: Deadline) -> Gathered:
        queries = distinct_queries([plan.query, *await self.expand(request, report, deadline)])
        results = await search_all(self._pipeline, plan, queries, report, deadline)
        evidence = Evidence(self._pipeline.queries_rrf_k)
        for i, (q, found) in enumerate(zip(queries, results, strict=True)):
            if i and not request.additional_queries:
                # A generated variation's scores count for less than the original query's: its
                # first hit should not tie the original's first hit by default.
                found = [c.with_fused(c.fused * GENERATED_WEIGHT) for c in found]
            evidence.add(q, found)
        return Gathered(evidence.best(), evidence.matched)
