"""Reciprocal Rank Fusion of the dense and lexical candidate lists."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from memsvc.pipeline.recall import Candidate

DEFAULT_RRF_K = 60


def reciprocal_rank_fusion(
    dense: Sequence[Candidate], lexical: Sequence[Candidate], k: int = DEFAULT_RRF_K
) -> list[Candidate]:
    """One list ordered by sum(1 / (k + rank)) over the channels that found each memory.

    RRF needs no score calibration between channels (cosine and BM25 live on unrelated
    scales); k damps the difference between the first few ranks. Each candidate keeps what
    every channel said about it (similarity, ranks, lexical score) and gets `fused`.
    """
    merged: dict[str, Candidate] = {}
    for c in dense:
        rank = c.dense_rank
        merged[c.memory_id] = replace(c, fused=1.0 / (k + rank) if rank > 0 else 0.0)
    for c in lexical:
        contribution = 1.0 / (k + c.lexical_rank) if c.lexical_rank > 0 else 0.0
        seen = merged.get(c.memory_id)
        if seen is None:
            merged[c.memory_id] = replace(c, fused=contribution)
        else:
            merged[c.memory_id] = replace(
                seen,
                lexical_score=c.lexical_score,
                lexical_rank=c.lexical_rank,
                fused=seen.fused + contribution,
            )
    return sorted(merged.values(), key=lambda c: (-c.fused, -c.similarity, -c.lexical_score, c.memory_id))
