"""Reciprocal Rank Fusion and how the fused relevance enters the ranking."""

from __future__ import annotations

import pytest

from memsvc.config import RankWeights
from memsvc.domain.models import Memory, Namespace
from memsvc.pipeline.query.fusion import reciprocal_rank_fusion
from memsvc.pipeline.query.hydrate import Hydrated
from memsvc.pipeline.query.rank import RankStage, absolute_relevance
from memsvc.pipeline.query.recall import Candidate, candidate_depth, named_depth_factor


def dense(*ids: str) -> list[Candidate]:
    return [Candidate(memory_id=m, similarity=0.9 - i / 10, dense_rank=i + 1) for i, m in enumerate(ids)]


def lexical(*ids: str) -> list[Candidate]:
    return [Candidate(memory_id=m, lexical_score=1.0 - i / 10, lexical_rank=i + 1) for i, m in enumerate(ids)]


def test_rrf_sums_reciprocal_ranks_and_keeps_both_channels() -> None:
    fused = reciprocal_rank_fusion(dense("a", "b", "c"), lexical("c", "d"), k=60)
    by_id = {c.memory_id: c for c in fused}
    assert by_id["c"].fused == pytest.approx(1 / 63 + 1 / 61)
    assert by_id["a"].fused == pytest.approx(1 / 61)
    assert by_id["d"].fused == pytest.approx(1 / 62)
    # b and d tie at 1/62; the cosine breaks the tie.
    assert [c.memory_id for c in fused] == ["c", "a", "b", "d"]
    assert (by_id["c"].dense_rank, by_id["c"].lexical_rank) == (3, 1)
    assert by_id["c"].similarity == pytest.approx(0.7) and by_id["c"].lexical_score == pytest.approx(1.0)
    assert (by_id["d"].dense_rank, by_id["d"].similarity) == (0, 0.0)


def test_rrf_with_one_empty_channel_keeps_the_other_order() -> None:
    assert [c.memory_id for c in reciprocal_rank_fusion(dense("x", "y"), [], k=60)] == ["x", "y"]
    assert [c.memory_id for c in reciprocal_rank_fusion([], lexical("y", "x"), k=60)] == ["y", "x"]


def test_smaller_k_separates_top_ranks_more() -> None:
    # A memory first in one channel vs one fourth in both: k decides which wins.
    d, lx = dense("top", "m2", "m3", "both"), lexical("l1", "l2", "l3", "both")
    assert reciprocal_rank_fusion(d, lx, k=60)[0].memory_id == "both"
    assert reciprocal_rank_fusion(d, lx, k=1)[0].memory_id == "top"


def hydrated(candidate: Candidate, importance: float = 0.5, created_at: float = 0.0) -> Hydrated:
    ns = Namespace("t", "p", "development", "u")
    memory = Memory(id=candidate.memory_id, namespace=ns, content="x", importance=importance, created_at=created_at)
    return Hydrated(memory, candidate)


def test_rank_uses_fused_relevance_and_keeps_cosine_in_breakdown() -> None:
    fused = reciprocal_rank_fusion(dense("a", "b"), lexical("b", "c"), k=60)
    scored = RankStage(RankWeights(), 30.0, 10.0).order([hydrated(c) for c in fused], 0.0, now=1e9).scored
    top = scored[0]
    assert top.memory.id == "b"
    assert top.breakdown.fused == pytest.approx(1.0)
    assert top.breakdown.semantic == pytest.approx(0.8)  # the cosine, not the fused score
    assert top.breakdown.lexical == pytest.approx(1.0) and top.breakdown.lexical_rank == 1
    rel = {r.memory.id: r.breakdown.fused for r in scored}
    assert rel["a"] == pytest.approx((1 / 61) / (1 / 62 + 1 / 61))


def test_priors_reorder_near_ties_but_not_a_clear_relevance_lead() -> None:
    stage = RankStage(RankWeights(), 30.0, 10.0)
    now = 100 * 86_400.0
    # "both" leads both channels; "fresh" is second in one channel only but new and important.
    fused = reciprocal_rank_fusion(dense("both", "fresh"), lexical("both"), k=60)
    by_id = {c.memory_id: c for c in fused}
    items = [hydrated(by_id["both"], 0.5, 0.0), hydrated(by_id["fresh"], 1.0, now)]
    assert [r.memory.id for r in stage.order(items, 0.0, now).scored] == ["both", "fresh"]
    # Two candidates a rank apart in one channel: the fresher, more important one wins.
    near = reciprocal_rank_fusion(dense("old", "new"), [], k=60)
    items = [hydrated(near[0], 0.5, 0.0), hydrated(near[1], 0.9, now)]
    assert [r.memory.id for r in stage.order(items, 0.0, now).scored] == ["new", "old"]


def test_without_fused_scores_the_cosine_is_the_relevance() -> None:
    stage = RankStage(RankWeights(), 30.0, 10.0)
    items = [hydrated(Candidate("a", similarity=0.2)), hydrated(Candidate("b", similarity=0.9))]
    scored = stage.order(items, 0.0, now=0.0).scored
    assert [r.memory.id for r in scored] == ["b", "a"]
    assert scored[0].breakdown.fused is None


def test_absolute_relevance_is_the_stronger_of_meaning_and_words_whatever_the_store() -> None:
    assert absolute_relevance(0.09, 0.0) == 0.0  # unrelated text: nothing lifts it
    assert absolute_relevance(0.50, 0.0) == pytest.approx(1.0)
    assert absolute_relevance(0.30, 0.0) == pytest.approx(0.5)
    assert absolute_relevance(0.1, 0.6) == pytest.approx(0.6)  # the words carry a terse reply
    # One candidate alone is its query's best (fused 1.0), yet its relevance stays its own.
    weak = [Candidate(memory_id="x", similarity=0.25, dense_rank=1)]
    lone = RankStage(RankWeights(), 30.0, 10.0).order(
        [hydrated(c) for c in reciprocal_rank_fusion(weak, [], k=60)], 0.0, now=1e9
    )
    assert lone.scored[0].breakdown.fused == pytest.approx(1.0)
    assert lone.scored[0].breakdown.relevance == pytest.approx(0.375)


def test_each_channel_recalls_more_as_a_users_memories_grow() -> None:
    # Unknown size or a small store: the configured depth, and three times the limit at least.
    assert candidate_depth(50, 10, 0) == 50 and candidate_depth(50, 20, 0) == 60
    assert candidate_depth(50, 10, 2_000) == 50
    # A long history: the square root of the memories, so the depth grows slower than the store.
    assert candidate_depth(50, 10, 10_400) == 101
    assert candidate_depth(50, 10, 1_000_000) == 1_000


def test_a_named_question_looks_deeper_the_fewer_memories_involve_the_named() -> None:
    # A person among many others' chats: the configured most.
    assert named_depth_factor(0.04, 4) == 4
    # Two people's own conversation, or a third of a history: twice, three times as deep.
    assert named_depth_factor(0.55, 4) == 2 and named_depth_factor(1.0, 4) == 2
    assert named_depth_factor(0.34, 4) == 3
    # Unknown (the index down, or no memory of theirs) and turned off: as configured.
    assert named_depth_factor(0.0, 4) == 4 and named_depth_factor(0.9, 1) == 1
