"""What the strategies share: the strategy contract, concurrent searches and merging by memory id."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

from memsvc.deadline import Deadline
from memsvc.pipeline.context import QueryInput, QueryMode, QueryPlan, QueryReport
from memsvc.pipeline.query.fusion import rrf_term
from memsvc.pipeline.query.pipeline import Gathered, QueryPipeline
from memsvc.pipeline.query.recall import Candidate

# Weight of a generated query's ranks against the original query's (1.0) in the consensus.
GENERATED_WEIGHT = 0.6


class Strategy(Protocol):
    """One retrieval mode: its queries, their fusion and its reranker for a validated plan.

    The pipeline's `execute` runs it inside the frame every mode shares (scope, result cache,
    hydrate, rank, bookkeep); every step it takes is written to `report`.
    """

    name: QueryMode
    # The result count when the request names none (None: the service default).
    default_limit: int | None

    async def gather(
        self, plan: QueryPlan, request: QueryInput, report: QueryReport, deadline: Deadline
    ) -> Gathered: ...


@dataclass
class Evidence:
    """Candidates gathered over several searches, merged by memory id, with the queries that found each.

    A memory found by several searches keeps the best of what each channel said about it (max
    similarity, best ranks); its fused relevance is the weighted Reciprocal Rank Fusion of its
    ranks across the searches, so agreement between queries counts and a generated query's
    first hit does not outrank the original query's by default.
    """

    rrf_k: int
    candidates: dict[str, Candidate] = field(default_factory=dict)
    matched: dict[str, list[str]] = field(default_factory=dict)
    consensus: dict[str, float] = field(default_factory=dict)

    def add(self, query: str, found: Sequence[Candidate], weight: float = 1.0, first_rank: int = 1) -> None:
        for rank, c in enumerate(found, start=first_rank):
            have = self.candidates.get(c.memory_id)
            self.candidates[c.memory_id] = c if have is None else best_of(have, c)
            self.consensus[c.memory_id] = self.consensus.get(c.memory_id, 0.0) + rrf_term(rank, self.rrf_k, weight)
            queries = self.matched.setdefault(c.memory_id, [])
            if query not in queries:
                queries.append(query)

    def best(self) -> list[Candidate]:
        """Best first by each memory's best single-search score (seed 001: highest score wins)."""
        return sorted(self.candidates.values(), key=lambda c: (-c.fused, -c.similarity, c.memory_id))

    def ranked(self) -> list[Candidate]:
        """Best first by weighted RRF; each candidate's `fused` is that consensus score.

        With a single search there is nothing to reconcile: candidates keep the pipeline's own fusion.
        """
        if len({q for qs in self.matched.values() for q in qs}) <= 1:
            return sorted(self.candidates.values(), key=lambda c: (-c.fused, -c.similarity, c.memory_id))
        out = [c.with_fused(self.consensus[i]) for i, c in self.candidates.items()]
        return sorted(out, key=lambda c: (-c.fused, -c.similarity, c.memory_id))


def best_of(a: Candidate, b: Candidate) -> Candidate:
    """One memory found by two searches keeps the best of what each channel said about it."""
    # The constructor, not dataclasses.replace: called for every candidate of every search.
    return Candidate(
        a.memory_id,
        max(a.similarity, b.similarity),
        _best_rank(a.dense_rank, b.dense_rank),
        max(a.lexical_score, b.lexical_score),
        _best_rank(a.lexical_rank, b.lexical_rank),
        max(a.term_coverage, b.term_coverage),
        max(a.fused, b.fused),
        max(a.topic_coverage, b.topic_coverage),
    )


def _best_rank(a: int, b: int) -> int:
    """The better of two 1-based ranks; 0 (not found) only when neither found it."""
    return min(a, b) if a and b else a or b


def query_key(query: str) -> str:
    """What two queries share when they are the same search (spacing and case aside)."""
    return " ".join(query.split()).lower()


def distinct_queries(queries: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for q in queries:
        key = query_key(q)
        if key and key not in seen:
            seen.add(key)
            out.append(" ".join(q.split()))
    return out


async def search_all(
    pipeline: QueryPipeline,
    plan: QueryPlan,
    queries: Sequence[str],
    report: QueryReport,
    deadline: Deadline,
    k: int | None = None,
    words_only: Collection[str] = (),
    speakers_by_words: bool = True,
) -> list[list[Candidate]]:
    """Every query searched concurrently; each issued query is recorded in the report once.
    The queries in `words_only` (by `query_key`) are searched by their words alone (no embedding).
    `speakers_by_words`: the namespace's speakers' names are left out of what is embedded
    (`QueryPipeline.meaning_of`), looked up once for all the queries."""
    for q in queries:
        if q not in report.queries:
            report.queries.append(q)
    embedded = [q for q in queries if query_key(q) not in words_only]
    names = await pipeline.speakers_in(plan, embedded, deadline) if speakers_by_words else [[] for _ in embedded]
    speakers_of = dict(zip(embedded, names, strict=True))  # the embedded queries, each with its speakers
    search = partial(pipeline.search, report=report, deadline=deadline, k=k)
    return list(
        await asyncio.gather(
            *(search(plan, q, dense=q in speakers_of, speakers=speakers_of.get(q, ())) for q in queries)
        )
    )


def recent_texts(request: QueryInput) -> list[str]:
    return [t.content for t in request.recent_turns]


def recent_block(request: QueryInput, limit: int = 6) -> str:
    turns = request.recent_turns[-limit:]
    return "\n".join(f"{t.role.value}: {t.content}" for t in turns) or "(none)"
