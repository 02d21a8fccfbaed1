"""Reciprocal Rank Fusion: of the dense and lexical channels of one search, and of several searches."""

from __future__ import annotations

from collections.abc import Sequence

from memsvc.pipeline.query.recall import Candidate


def rrf_term(rank: int, k: int, weight: float = 1.0) -> float:
    """One ranking's contribution for an item at `rank` (1-based; 0: the ranking lacks it)."""
    return weight / (k + rank) if rank > 0 else 0.0


def reciprocal_rank_fusion(dense: Sequence[Candidate], lexical: Sequence[Candidate], k: int) -> list[Candidate]:
    """One list ordered by sum(1 / (k + rank)) over the channels that found each memory.

    RRF needs no score calibration between channels (cosine and BM25 live on unrelated
    scales); k damps the difference between the first few ranks. Each candidate keeps what
    every channel said about it (similarity, ranks, lexical score) and gets `fused`.
    """
    merged: dict[str, Candidate] = {}
    for c in dense:
        merged[c.memory_id] = c.with_fused(rrf_term(c.dense_rank, k))
    for c in lexical:
        contribution = rrf_term(c.lexical_rank, k)
        seen = merged.get(c.memory_id)
        if seen is None:
            merged[c.memory_id] = c.with_fused(contribution)
        else:
            merged[c.memory_id] = Candidate(
                seen.memory_id,
                seen.similarity,
                seen.dense_rank,
                c.lexical_score,
                c.lexical_rank,
                c.term_coverage,
                seen.fused + contribution,
                c.topic_coverage,
            )
    return sorted(merged.values(), key=lambda c: (-c.fused, -c.similarity, -c.lexical_score, c.memory_id))


def fuse_lists(lists: Sequence[Sequence[Candidate]], k: int) -> dict[str, float]:
    """Reciprocal Rank Fusion of several searches' result lists, by position in each list."""
    scores: dict[str, float] = {}
    for found in lists:
        for rank, c in enumerate(found, start=1):
            scores[c.memory_id] = scores.get(c.memory_id, 0.0) + rrf_term(rank, k)
    return scores
