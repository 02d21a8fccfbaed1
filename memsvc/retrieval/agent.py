"""AGENT (seed 003): a router picks direct, split-query or chain-of-query retrieval."""

from __future__ import annotations

from functools import partial
from typing import Any

from memsvc.deadline import Deadline
from memsvc.llm.client import Llm
from memsvc.llm.heuristics import Judgement, judge_evidence, route, split_query
from memsvc.llm.parse import MalformedReply, string_list, unit_float
from memsvc.pipeline.context import QueryInput, QueryMode, QueryPlan, QueryReport, stage_span
from memsvc.pipeline.query.hydrate import opened
from memsvc.pipeline.query.pipeline import Gathered, QueryPipeline
from memsvc.pipeline.query.recall import Candidate
from memsvc.retrieval.base import Evidence, distinct_queries, search_all

TOOLS = ("direct", "split_query", "chain_of_query")
_EVIDENCE_PER_HOP = 5


def _tool_shape(value: Any) -> str:
    tool = value.get("tool") if isinstance(value, dict) else value
    if tool not in TOOLS:
        raise MalformedReply(f"unknown tool {tool!r}")
    return str(tool)


def _judgement_shape(value: Any) -> Judgement:
    if not isinstance(value, dict) or not isinstance(value.get("sufficient"), bool):
        raise MalformedReply("expected {sufficient, confidence, next_query}")
    next_query = value.get("next_query") or ""
    if not isinstance(next_query, str):
        raise MalformedReply("next_query must be a string")
    return Judgement(value["sufficient"], unit_float(value.get("confidence", 0.0)), next_query.strip(), ())


class Agent:
    name = QueryMode.AGENT

    default_limit: int | None = None

    def __init__(
        self, pipeline: QueryPipeline, llm: Llm, *, max_attempts: int = 3, confidence_threshold: float = 0.8
    ) -> None:
        self._pipeline = pipeline
        self._llm = llm
        self._max_attempts = max_attempts
        self._threshold = confidence_threshold

    async def select(self, query: str, report: QueryReport, deadline: Deadline) -> tuple[str, str]:
        with stage_span(self._pipeline.tracer, report, "route"):
            tool = await self._llm.ask("agent_route", report.llm, deadline, _tool_shape, max_tokens=20, query=query)
            if tool is not None:
                return tool, "chosen by the LLM"
            return route(query)

    async def gather(self, plan: QueryPlan, request: QueryInput, report: QueryReport, deadline: Deadline) -> Gathered:
        tool, why = await self.select(plan.query, report, deadline)
        report.selected_tool = tool
        report.notes.append(f"agent: {tool} ({why})")
        evidence = Evidence(self._pipeline.queries_rrf_k)
        if tool == "split_query":
            await self._split(plan, report, deadline, evidence)
        elif tool == "chain_of_query":
            await self._chain(plan, report, deadline, evidence)
        else:
            found = (await search_all(self._pipeline, plan, [plan.query], report, deadline))[0]
            evidence.add(plan.query, found)
            report.confidence = 1.0 if found else 0.0
        # The union of every hop is reranked together by the rank stage.
        return Gathered(evidence.ranked(), evidence.matched)

    async def _split(self, plan: QueryPlan, report: QueryReport, deadline: Deadline, evidence: Evidence) -> None:
        with stage_span(self._pipeline.tracer, report, "split"):
            parts = await self._llm.ask(
                "agent_split", report.llm, deadline, partial(string_list, key="queries", limit=4), query=plan.query
            )
            if parts is None:
                parts = split_query(plan.query)
        queries = distinct_queries([plan.query, *parts])
        results = await search_all(self._pipeline, plan, queries, report, deadline)
        for q, found in zip(queries, results, strict=True):
            evidence.add(q, found)
        report.confidence = sum(1 for r in results if r) / len(results)

    async def _chain(self, plan: QueryPlan, report: QueryReport, deadline: Deadline, evidence: Evidence) -> None:
        """Retrieve, check sufficiency, rewrite toward the missing hop; stop when confident enough."""
        current = plan.query
        issued: list[str] = []
        hops: list[list[str]] = []
        for _ in range(self._max_attempts):
            issued.append(current)
            found = (await search_all(self._pipeline, plan, [current], report, deadline))[0]
            # Each hop rewrites the question with what the previous one found, so a later hop is
            # closer to what is asked: its ranks weigh more than the question's own weak matches.
            evidence.add(current, found, weight=float(len(issued)))
            hops.append(await self._texts(plan, found[:_EVIDENCE_PER_HOP], deadline))
            with stage_span(self._pipeline.tracer, report, "sufficiency"):
                judgement = await self._judge(plan.query, issued, hops, report, deadline)
            report.confidence = judgement.confidence
            if judgement.sufficient and judgement.confidence >= self._threshold:
                break
            nxt = judgement.next_query
            if not nxt or nxt.lower() in {q.lower() for q in issued}:
                break
            current = nxt
        report.notes.append(f"agent: {len(issued)} hop(s), confidence {report.confidence:.2f}")

    async def _texts(self, plan: QueryPlan, found: list[Candidate], deadline: Deadline) -> list[str]:
        return [m.content for m in opened(await self._pipeline.hydrate.run(plan, found, deadline))]

    async def _judge(
        self, query: str, issued: list[str], hops: list[list[str]], report: QueryReport, deadline: Deadline
    ) -> Judgement:
        if self._llm.configured:
            evidence = "\n".join(f"- {t[:300]}" for hop in hops for t in hop[:3]) or "(none)"
            got = await self._llm.ask(
                "agent_chain",
                report.llm,
                deadline,
                _judgement_shape,
                max_tokens=120,
                query=query,
                queries="\n".join(issued),
                evidence=evidence,
            )
            if got is not None:
                return got
        return judge_evidence(query, hops, route(query)[0] == "chain_of_query", self._threshold, issued)
