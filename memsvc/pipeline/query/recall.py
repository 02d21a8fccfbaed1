"""Stage 3, recall: candidates from the user's own namespace of the vector index."""

from __future__ import annotations

import math
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
    # The same, without the weight of the names of speakers the query names (LexicalRecall.run):
    # what the relevance floor reads.
    topic_coverage: float = 0.0

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
            self.topic_coverage,
        )


def candidate_depth(candidates: int, limit: int, memories: int = 0) -> int:
    """How many candidates a channel recalls from a namespace of `memories` (0: unknown).

    More than the limit: hydration filters and ranking reorder what comes back. And more as a
    user's memories grow: a fixed depth is a shrinking share of them, and the evidence of a
    question asked after 10,000 turns of other chats sat below 50 in one channel while the other
    put it first. The square root keeps a small store at the configured depth (up to 2,500
    memories) and grows the cost of a search and its fusion slowly (100 at 10,000).
    """
    return max(candidates, limit * 3, math.isqrt(max(memories, 0)))


def named_depth_factor(share: float, most: int) -> int:
    """How many times deeper dense recall looks for a question naming speakers whose memories
    (said by, to or about them) are `share` of the namespace's: deep enough that what involves
    them fills the list's depth once put first (`QueryPipeline._named_first`), at most `most`.

    A person among many others' chats (a share of a few percent) needs the most; two people's
    own conversation (a share of a half or more) twice the depth, which found the same on the
    LoCoMo dev files and their long histories as four times did, in less time.
    """
    if most <= 1 or share <= 0.0:
        return most
    return min(most, max(2, math.ceil(1.0 / share)))


class RecallStage:
    def __init__(self, index: VectorIndex, candidates: int) -> None:
        self._index = index
        self._candidates = candidates

    def depth(self, plan: QueryPlan, memories: int = 0) -> int:
        return candidate_depth(self._candidates, plan.limit, memories)

    async def run(self, plan: QueryPlan, vector: Vector, deadline: Deadline, k: int | None = None) -> list[Candidate]:
        k = k or self.depth(plan)
        hits = await deadline.run(
            self._index.search(plan.namespace, vector, k, plan.memory_filter),
            "the vector index",
        )
        return [Candidate(memory_id=h.memory_id, similarity=h.similarity, dense_rank=i + 1) for i, h in enumerate(hits)]
