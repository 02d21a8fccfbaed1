"""Stage 3, recall: candidates from the user's own namespace of the vector index."""

from __future__ import annotations

from typing import NamedTuple

from memsvc.deadline import Deadline
from memsvc.embeddings.base import Vector
from memsvc.pipeline.context import QueryPlan
from memsvc.stores.vectors.base import VectorIndex


class Candidate(NamedTuple):
    """A recalled memory id with what each channel said about it.

    A NamedTuple rather than a frozen dataclass: a query makes some two hundred (thousands in
    the multi-search modes), and a tuple is built in a third of the time (0.2 against 0.6 us).
    """

    memory_id: str
    similarity: float = 0.0
    dense_rank: int = 0
    lexical_score: float = 0.0
    lexical_rank: int = 0
    term_coverage: float = 0.0  # the share of the query's IDF weight the memory holds (LexicalHit)
    fused: float = 0.0

    def with_fused(self, fused: float) -> Candidate:
        # The constructor, not _replace: fusion makes one per candidate and search, thousands
        # per query in the multi-search modes.
        return Candidate(
            self.memory_id,
            self.similarity,
            self.dense_rank,
            self.lexical_score,
            self.lexical_rank,
            self.term_coverage,
            fused,
        )


class RecallStage:
    def __init__(self, index: VectorIndex, candidates: int) -> None:
        self._index = index
        self._candidates = candidates

    def depth(self, plan: QueryPlan) -> int:
        # Recall more than the limit: hydration filters and ranking reorder what comes back.
        return max(self._candidates, plan.limit * 3)

    async def run(self, plan: QueryPlan, vector: Vector, deadline: Deadline, k: int | None = None) -> list[Candidate]:
        k = k or self.depth(plan)
        hits = await deadline.run(
            self._index.search(plan.namespace, vector, k, plan.memory_filter),
            "the vector index",
        )
        return [Candidate(memory_id=h.memory_id, similarity=h.similarity, dense_rank=i + 1) for i, h in enumerate(hits)]
