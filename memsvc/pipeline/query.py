"""The direct query: the six stages in order, each under its own span."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from opentelemetry.trace import Tracer

from memsvc.domain.models import Principal, RankedMemory
from memsvc.pipeline.bookkeep import BookkeepStage
from memsvc.pipeline.context import Deadline, QueryInput, QueryPlan, QueryReport, stage_span
from memsvc.pipeline.embed import EmbedStage
from memsvc.pipeline.hydrate import HydrateStage
from memsvc.pipeline.rank import RankStage
from memsvc.pipeline.recall import Candidate, RecallStage
from memsvc.pipeline.scope import ScopeStage
from memsvc.stores.caches.base import CachedResult, ResultCache


@dataclass(frozen=True)
class QueryOutcome:
    plan: QueryPlan
    memories: list[RankedMemory]
    explanation: str
    report: QueryReport
    context: str = ""


class QueryPipeline:
    def __init__(
        self,
        *,
        tracer: Tracer,
        scope: ScopeStage,
        embed: EmbedStage,
        recall: RecallStage,
        hydrate: HydrateStage,
        rank: RankStage,
        bookkeep: BookkeepStage,
        result_cache: ResultCache,
    ) -> None:
        self.tracer = tracer
        self.scope = scope
        self.embed = embed
        self.recall = recall
        self.hydrate = hydrate
        self.rank = rank
        self.bookkeep = bookkeep
        self._cache = result_cache

    def plan(self, principal: Principal, request: QueryInput, report: QueryReport) -> QueryPlan:
        with stage_span(self.tracer, report, "scope") as span:
            plan = self.scope.run(principal, request)
            span.set_attribute("memsvc.request_id", plan.request_id)
            span.set_attribute("memsvc.limit", plan.limit)
            return plan

    async def run(self, principal: Principal, request: QueryInput, deadline: Deadline) -> QueryOutcome:
        report = QueryReport(mode="direct")
        plan = self.plan(principal, request, report)
        report.queries.append(plan.query)
        slot: str | None = None
        if not plan.skip_cache:
            cached, slot = await self._cache.lookup(plan.namespace, plan.request_key)
            if cached is not None:
                return await self._from_cache(plan, cached, report, deadline)
        candidates = await self.search(plan, plan.query, report, deadline)
        return await self.finish(plan, candidates, report, deadline, slot)

    async def search(
        self, plan: QueryPlan, text: str, report: QueryReport, deadline: Deadline, k: int | None = None
    ) -> list[Candidate]:
        """Stages 2-3 for one query text within the plan's namespace and filters.

        Retrieval modes call this once per generated query, then `finish` on the merged list.
        """
        with stage_span(self.tracer, report, "embed") as span:
            qv = await self.embed.run(text, deadline)
            span.set_attribute("memsvc.embedding.cache_hit", qv.cache_hit)
            if text == plan.query:
                report.embedding_cache_hit = qv.cache_hit
        with stage_span(self.tracer, report, "recall") as span:
            candidates = await self.recall.run(plan, qv.vector, deadline, k)
            report.searches += 1
            report.candidates_recalled += len(candidates)
            span.set_attribute("memsvc.candidates.recalled", len(candidates))
        return candidates

    async def finish(
        self,
        plan: QueryPlan,
        candidates: list[Candidate],
        report: QueryReport,
        deadline: Deadline,
        slot: str | None,
    ) -> QueryOutcome:
        """Stages 4-6 for a candidate list (shared by every retrieval mode)."""
        with stage_span(self.tracer, report, "hydrate") as span:
            hydrated = await self.hydrate.run(plan, candidates, deadline)
            span.set_attribute("memsvc.candidates.hydrated", len(hydrated))
        now = time.time()
        with stage_span(self.tracer, report, "rank") as span:
            ranking = self.rank.run(hydrated, plan.limit, plan.min_importance, now, plan.query)
            report.dropped_by_importance = ranking.dropped_by_importance
            span.set_attribute("memsvc.candidates.dropped_by_importance", ranking.dropped_by_importance)
            span.set_attribute("memsvc.results", len(ranking.memories))
        with stage_span(self.tracer, report, "bookkeep") as span:
            await self.bookkeep.run(
                plan,
                ranking.memories,
                now,
                slot,
                ranking.explanation,
                report.candidates_recalled,
                ranking.dropped_by_importance,
            )
            span.set_attribute("memsvc.result_cache.stored", slot is not None)
        return QueryOutcome(plan, ranking.memories, ranking.explanation, report)

    async def _from_cache(
        self, plan: QueryPlan, cached: CachedResult, report: QueryReport, deadline: Deadline
    ) -> QueryOutcome:
        report.cache_hit = True
        report.candidates_recalled = cached.candidates_recalled
        report.dropped_by_importance = cached.dropped_by_importance
        with stage_span(self.tracer, report, "hydrate") as span:
            span.set_attribute("memsvc.result_cache.hit", True)
            rows = await self.hydrate.fetch(
                plan.namespace, [Candidate(memory_id=h.memory_id) for h in cached.hits], deadline
            )
            span.set_attribute("memsvc.candidates.hydrated", len(rows))
        by_id = {h.memory.id: h.memory for h in rows}
        ranked = [
            RankedMemory(by_id[h.memory_id], h.score, h.breakdown, h.matched_queries)
            for h in cached.hits
            if h.memory_id in by_id
        ]
        now = time.time()
        with stage_span(self.tracer, report, "bookkeep"):
            await self.bookkeep.run(
                plan, ranked, now, None, cached.explanation, cached.candidates_recalled, cached.dropped_by_importance
            )
        return QueryOutcome(plan, ranked, cached.explanation, replace(report))
