"""Ranking only the candidates that can reach the results gives the results of ranking them all."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memsvc.config import RankWeights
from memsvc.domain.models import Memory, Namespace
from memsvc.pipeline.query.fusion import reciprocal_rank_fusion
from memsvc.pipeline.query.hydrate import Hydrated
from memsvc.pipeline.query.rank import Ordering, RankStage, rankable_prefix, results, settled
from memsvc.pipeline.query.recall import Candidate

ALICE = Namespace("t", "p", "e", "alice")
NOW = 2_000_000_000.0


@st.composite
def query_cases(draw: st.DrawFn) -> tuple[list[Candidate], dict[str, Memory], int, float, float]:
    n = draw(st.integers(1, 80))
    ids = [f"{i:032x}" for i in range(n)]
    dense = draw(st.permutations(ids).map(lambda p: p[: draw(st.integers(n // 3, n))]))
    lexical = draw(st.permutations(ids).map(lambda p: p[: draw(st.integers(n // 3, n))]))
    similarity = {i: draw(st.floats(0.0, 1.0)) for i in ids}
    coverage = {i: draw(st.floats(0.0, 1.0)) for i in ids}
    # The coverage by the query's words besides the names of people it names (at most all of it).
    topic = {i: coverage[i] * draw(st.sampled_from([0.0, 0.5, 1.0])) for i in ids}
    candidates = reciprocal_rank_fusion(
        [Candidate(i, similarity=similarity[i], dense_rank=r) for r, i in enumerate(dense, start=1)],
        [
            Candidate(i, lexical_score=1.0 / r, lexical_rank=r, term_coverage=coverage[i], topic_coverage=topic[i])
            for r, i in enumerate(lexical, start=1)
        ],
        k=20,
    )
    rows = {}
    for i in ids:
        # Some memories are derived from others, so that collapse_derived moves results down.
        sources = tuple(draw(st.lists(st.sampled_from(ids), max_size=2, unique=True))) if draw(st.booleans()) else ()
        rows[i] = Memory(
            id=i,
            namespace=ALICE,
            content="",
            importance=draw(st.floats(0.0, 1.0)),
            created_at=NOW - draw(st.floats(0.0, 400 * 86_400.0)),
            usage_count=draw(st.integers(0, 50)),
            quality=draw(st.floats(0.0, 1.0)),
            decay=draw(st.floats(0.0, 1.0)),
            source_ids=tuple(s for s in sources if s != i),
        )
    limit = draw(st.integers(1, 15))
    min_importance = draw(st.sampled_from([0.0, 0.3, 0.5]))
    min_relevance = draw(st.sampled_from([0.0, 0.25, 0.6]))
    return candidates, rows, limit, min_importance, min_relevance


def outcome(ordering: Ordering, limit: int, min_relevance: float) -> list[tuple[str, float]]:
    kept, below = results(ordering.scored, min_relevance, limit)
    return [(r.memory.id, r.score) for r in kept] + [("below", below)]


@settings(max_examples=300, deadline=None)
@given(query_cases(), st.sets(st.integers(0, 79), max_size=10))
def test_a_prefix_that_settles_ranks_as_all_candidates_do(
    case: tuple[list[Candidate], dict[str, Memory], int, float, float], filtered: set[int]
) -> None:
    candidates, rows, limit, min_importance, min_relevance = case
    stage = RankStage(RankWeights(), recency_half_life_days=30, usage_saturation=10)
    # Hydration drops the candidates whose rows the filters exclude (inactive, another tier).
    survives = {c.memory_id for k, c in enumerate(candidates) if k not in filtered}

    def hydrate(part: list[Candidate]) -> list[Hydrated]:
        return [Hydrated(rows[c.memory_id], c) for c in part if c.memory_id in survives]

    everything = stage.order(hydrate(candidates), min_importance, NOW)
    n = rankable_prefix(candidates, limit, stage.prior_factor_floor())
    hydrated = hydrate(candidates[:n])
    ordering = stage.order(hydrated, min_importance, NOW)
    if settled(ordering.scored, hydrated, candidates, n, limit, min_relevance):
        assert outcome(ordering, limit, min_relevance) == outcome(everything, limit, min_relevance)
    else:
        assert n < len(candidates)


def test_the_prefix_leaves_out_candidates_too_weak_to_reach_the_results() -> None:
    # 50 dense and 50 lexical hits, half of them shared: the usual query.
    dense = [Candidate(f"{i:032x}", similarity=0.9 - i / 100, dense_rank=i + 1) for i in range(50)]
    lexical = [
        Candidate(f"{i:032x}", lexical_score=1.0, lexical_rank=r, term_coverage=0.5)
        for r, i in enumerate(range(25, 75), start=1)
    ]
    candidates = reciprocal_rank_fusion(dense, lexical, k=20)
    stage = RankStage(RankWeights(), recency_half_life_days=30, usage_saturation=10)
    n = rankable_prefix(candidates, 10, stage.prior_factor_floor())
    assert 10 < n <= 0.6 * len(candidates)
    # Nothing to leave out when the candidates fit the limit or the priors could outweigh relevance.
    assert rankable_prefix(candidates[:8], 10, stage.prior_factor_floor()) == 8
    assert rankable_prefix(candidates, 10, 0.0) == len(candidates)


def test_a_later_candidate_that_clearly_matches_unsettles_a_prefix_where_none_does() -> None:
    # "Where does Sam work?": the best fused hit holds only the name; the third is about work.
    name_only = Candidate(f"{2:032x}", lexical_score=1.0, lexical_rank=1, term_coverage=1.0, topic_coverage=0.0)
    dense = [
        Candidate(f"{i:032x}", similarity=s, dense_rank=r) for r, (i, s) in enumerate([(0, 0.0), (1, 1.0), (2, 0.0)], 1)
    ]
    candidates = reciprocal_rank_fusion(dense, [name_only], k=20)
    rows = {c.memory_id: Memory(id=c.memory_id, namespace=ALICE, content="", created_at=NOW) for c in candidates}
    stage = RankStage(RankWeights(), recency_half_life_days=30, usage_saturation=10)
    hydrated = [Hydrated(rows[c.memory_id], c) for c in candidates[:1]]
    ordering = stage.order(hydrated, 0.0, NOW)
    # The first alone would pass the floor by its name; beside the third it does not.
    assert outcome(ordering, 1, 0.25) == [(name_only.memory_id, ordering.scored[0].score), ("below", 0)]
    assert not settled(ordering.scored, hydrated, candidates, 1, 1, 0.25)
    everything = stage.order([Hydrated(rows[c.memory_id], c) for c in candidates], 0.0, NOW)
    assert outcome(everything, 1, 0.25)[0][0] == f"{1:032x}"
