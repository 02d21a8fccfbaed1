"""Stage 5, rank: the weighted sum of seven signals, the importance gate, an explanation.

The first signal is relevance. With hybrid recall it is the candidate's Reciprocal Rank
Fusion score divided by the best one of the query: raw RRF sums are tiny (at most
2 / (k + 1)) and only meaningful relative to each other; scaled by the best they span about
0.3-1 over a candidate list. Relevance multiplies the weighted priors (see `score`), so the
priors (recency, importance, ...) reorder near ties but a memory found deep in one channel
does not overtake the one both channels put first. The breakdown keeps `semantic` as the
cosine and shows `lexical`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple, Protocol, TypeVar

from memsvc.config import RankWeights
from memsvc.domain.models import Memory, MemoryKind, RankedMemory, ScoreBreakdown, StoredMemory
from memsvc.llm.dates import TimeWindow
from memsvc.pipeline.query.hydrate import Hydrated
from memsvc.pipeline.query.recall import Candidate
from memsvc.pipeline.query.usage import UsageNorms, usage_signal

_DAY_S = 86_400.0
# The currency of an outdated memory (Memory.outdated) for a query about the present: a quarter.
# What replaced it is usually worded less like the question ("I moved to Manchester" against "I
# live in Leeds" for "Where do I live?"), so a half left the old statement level with it.
OUTDATED_CURRENCY = 0.25


@dataclass(frozen=True)
class Ranking:
    memories: list[RankedMemory]
    dropped_by_importance: int
    explanation: str


class Scored(NamedTuple):
    """A hydrated candidate with its score, before anything is opened: `memory` is the row
    ranking read (sealed unless the content was decrypted). One per ranked candidate, so a
    NamedTuple; only the results become `RankedMemory`s."""

    memory: Memory | StoredMemory
    score: float
    breakdown: ScoreBreakdown


@dataclass(frozen=True)
class Ordering:
    """The candidates that passed the importance gate, best first, and how many did not."""

    scored: list[Scored]
    dropped_by_importance: int


class _Row(Protocol):
    """What the orderings below read of a memory: sealed rows and opened memories both have it."""

    @property
    def id(self) -> str: ...
    @property
    def kind(self) -> MemoryKind: ...
    @property
    def created_at(self) -> float: ...
    @property
    def source_ids(self) -> tuple[str, ...]: ...


class _Ranked(Protocol):
    @property
    def memory(self) -> _Row: ...
    @property
    def score(self) -> float: ...
    @property
    def breakdown(self) -> ScoreBreakdown: ...


# A scored candidate (`Scored`) or a result (`RankedMemory`): the cuts below serve both.
R = TypeVar("R", bound=_Ranked)


class RankStage:
    def __init__(
        self,
        weights: RankWeights,
        recency_half_life_days: float,
        usage_saturation: float,
        usage_norms: UsageNorms | None = None,
        outdated_currency: float = OUTDATED_CURRENCY,
        named_time_half_life_days: float = 14.0,
    ) -> None:
        self._weights = weights
        self._outdated_currency = outdated_currency
        w = weights
        self._total_weight = w.semantic + w.recency + w.importance + w.usage + w.quality + w.consistency + w.decay
        self._half_life_s = recency_half_life_days * _DAY_S
        self._named_time_half_life_s = named_time_half_life_days * _DAY_S
        self._usage_saturation = usage_saturation
        self._usage_norms = usage_norms

    def breakdown(
        self,
        item: Hydrated,
        now: float,
        best_fused: float = 0.0,
        about_the_present: bool = False,
        about_the_past: bool = False,
        named_time: TimeWindow | None = None,
    ) -> ScoreBreakdown:
        m, c = item.memory, item.candidate
        return ScoreBreakdown(
            semantic=_unit(c.similarity),
            recency=self._recency(m.created_at, now, about_the_past, named_time),
            importance=_unit(m.importance),
            # Saturating: the first recalls say much more than the hundredth.
            # Normalised by the tenant's usage percentiles (maintenance job), else saturating.
            usage=usage_signal(
                m.usage_count,
                self._usage_norms.p90(m.namespace.tenant) if self._usage_norms is not None else None,
                self._usage_saturation,
            ),
            quality=_unit(m.quality),
            consistency=_unit(m.consistency),
            # Vitality (feedback: surfaced but unused) scales the decay signal down.
            decay=_unit(m.decay * m.vitality),
            lexical=_unit(c.lexical_score),
            dense_rank=c.dense_rank,
            lexical_rank=c.lexical_rank,
            fused=_unit(c.fused / best_fused) if best_fused > 0 else None,
            relevance=absolute_relevance(c.similarity, c.term_coverage),
            term_coverage=_unit(c.term_coverage),
            # A summary gone stale quotes what a later statement replaced.
            currency=self._outdated_currency if (m.superseded_by or m.stale) and about_the_present else 1.0,
            topic_relevance=absolute_relevance(c.similarity, c.topic_coverage),
        )

    def _recency(self, created_at: float, now: float, about_the_past: bool, named_time: TimeWindow | None) -> float:
        """How near a memory lies to the time the query is about: the time it names, else the
        user's present (`now`). A question that names a time ("in June 2023", "the week before
        16 November") asks about what was said then, whatever came later; one about what held
        before a change asks for the older, and the newest is no prior."""
        if named_time is not None:
            if self._named_time_half_life_s <= 0:
                return 1.0
            off_s = max(0.0, named_time.start - created_at, created_at - named_time.end)
            return float(0.5 ** (off_s / self._named_time_half_life_s))
        if about_the_past or self._half_life_s <= 0:
            return 1.0
        return float(0.5 ** (max(0.0, now - created_at) / self._half_life_s))

    def score(self, b: ScoreBreakdown) -> float:
        """relevance x (w_semantic + the weighted priors) / sum of weights x currency, in [0, 1].

        Relevance scales the priors instead of sitting beside them (a document prior times a
        query likelihood, as in probabilistic retrieval): a prior can at most double a
        memory's score (with the default weights), so it reorders near ties but never lifts
        an irrelevant memory over a relevant one, and a perfect match with no priors still
        scores w_semantic / total. Currency scales the whole: what a later memory replaced
        ranks below it whenever the two match the query alike.
        """
        w = self._weights
        total = self._total_weight
        relevance = b.semantic if b.fused is None else b.fused
        raw = relevance * (
            w.semantic
            + w.recency * b.recency
            + w.importance * b.importance
            + w.usage * b.usage
            + w.quality * b.quality
            + w.consistency * b.consistency
            + w.decay * b.decay
        )
        return b.currency * raw / total if total > 0 else 0.0

    def prior_factor_floor(self) -> float:
        """The least `score` can be relative to relevance for a current memory: every prior at 0
        (see `score`); the most is 1, every prior at 1. An outdated memory scores less, which
        `settled` checks once the rows are read."""
        total = self._total_weight
        return self._weights.semantic / total if total > 0 else 0.0

    def order(
        self,
        items: Sequence[Hydrated],
        min_importance: float,
        now: float,
        about_the_present: bool = False,
        about_the_past: bool = False,
        named_time: TimeWindow | None = None,
    ) -> Ordering:
        """Every item that passes the importance gate and states something, scored, best first.

        Recency counts from `now` (`recency_reference`: the user's newest memory).
        An acknowledgement ("Good to know!") is never a result of its own: a query can attach
        it as context of the turn it answers. `about_the_present`: the query asks what holds
        now, so outdated memories give way; otherwise (what happened, what held before) they
        keep their full score, as history. `about_the_past`: it asks what held before a change,
        so recency, which prefers the newest, is level. `named_time`: the time the query names;
        recency then measures nearness to it.
        """
        kept = [i for i in items if i.memory.importance >= min_importance and not i.memory.acknowledgement]
        gated = sum(1 for i in items if i.memory.importance < min_importance)
        best_fused = max((i.candidate.fused for i in items), default=0.0)
        scored = []
        for item in kept:
            b = self.breakdown(item, now, best_fused, about_the_present, about_the_past, named_time)
            scored.append(Scored(item.memory, self.score(b), b))
        scored.sort(key=lambda s: (-s.score, -s.breakdown.semantic, s.memory.id))
        return Ordering(scored, gated)


def recency_reference(newest: float | None, now: float) -> float:
    """The time recency counts from: when the user's newest memory was made (`now` at the latest).

    Recency is a prior among a user's memories, so it is counted in the user's own time: their
    last chat is the freshest thing they said, however long ago that was. Counted from now,
    every memory of a user who last spoke a year ago has lost all its recency, and what they
    said last no longer stands out from what they said years before (a user's long history,
    docs/performance.md). For a user who talks every day the two are the same.
    """
    return now if newest is None else min(now, newest)


# all-MiniLM-L6-v2 cosines of a question and a memory: half of the unrelated pairs score below
# 0.06 and three quarters below 0.10, while a short memory asked for in other words (no word
# shared) scores 0.39 at the median, 0.17 at the 5th percentile, and a close paraphrase 0.5 and
# up (the paraphrase set of memsvc/bench/data).
_UNRELATED_COSINE = 0.10
_RELATED_COSINE = 0.50


def absolute_relevance(similarity: float, term_coverage: float) -> float:
    """How much a memory matches a query on its own, in [0, 1]: the stronger of its meaning
    (the cosine rescaled from "unrelated" to "a paraphrase") and its words (the share of the
    query's IDF weight it holds).

    Unlike the fused score, which is relative to the query's best candidate, this does not
    rise because the store is small: an unrelated memory scores low when it is all there is.
    """
    dense = (similarity - _UNRELATED_COSINE) / (_RELATED_COSINE - _UNRELATED_COSINE)
    return _unit(max(dense, term_coverage))


def _unit(value: float) -> float:
    """`value` clamped to [0, 1]; NaN (which fails every comparison) is 0. Comparisons only,
    without min, max or isnan: it runs about ten times per ranked candidate."""
    if value > 0.0:
        return value if value < 1.0 else 1.0
    return 0.0


def explain(ranked: Sequence[_Ranked], now: float) -> str:
    """One line on why the first result leads, from its strongest weighted signals."""
    if not ranked:
        return "No memory matched the query and filters."
    top = ranked[0]
    b = top.breakdown
    signals = {
        "semantic similarity": b.semantic,
        "keyword match": b.lexical,
        "recency": b.recency,
        "importance": b.importance,
        "usage": b.usage,
        "quality": b.quality,
    }
    strongest = sorted(signals.items(), key=lambda kv: -kv[1])[:2]
    age_days = max(0.0, now - top.memory.created_at) / _DAY_S
    age = "today" if age_days < 1 else f"{age_days:.0f} days ago"
    parts = " and ".join(f"{name} {value:.2f}" for name, value in strongest)
    return f"Top match is a {top.memory.kind.value} from {age}, leading on {parts} (score {top.score:.2f})."


def rankable_prefix(candidates: Sequence[Candidate], limit: int, factor_floor: float) -> int:
    """How many of the candidates (best fused first) ranking must see to fill `limit` results,
    if the first `limit` all survive: the rest score at most their relevance (every prior at 1),
    the first `limit` at least theirs times `factor_floor` (every prior at 0)."""
    if len(candidates) <= limit or factor_floor <= 0 or candidates[0].fused <= 0:
        return len(candidates)
    cutoff = candidates[limit - 1].fused * factor_floor
    n = limit
    while n < len(candidates) and candidates[n].fused >= cutoff:
        n += 1
    return n


def settled(
    scored: Sequence[_Ranked],
    hydrated: Sequence[Hydrated],
    candidates: Sequence[Candidate],
    n: int,
    limit: int,
    min_relevance: float,
) -> bool:
    """Whether ranking the first `n` candidates (best fused first; `hydrated` are the ones whose
    rows survived; `scored` is their order) gives the same first `limit` results as ranking
    them all: the `limit`-th result that passes the relevance floor and that `distinct` keeps
    outscores the most any later candidate could score (its relevance, every prior at 1)."""
    if n >= len(candidates):
        return True
    best_fused = max((h.candidate.fused for h in hydrated), default=0.0)
    if best_fused <= 0:
        return False
    # A later candidate's relevance would be its fused score over the best one (RankStage.breakdown).
    ceiling = candidates[n].fused / best_fused * (1 + 1e-9)
    # Which relevance the floor compares depends on every memory ranked (above_the_floor): a later
    # candidate that clearly matches where none of the first n does would change it.
    if (
        min_relevance
        and not any(r.breakdown.topic_relevance >= CLEAR_MATCH for r in scored)
        and any(absolute_relevance(c.similarity, c.topic_coverage) >= CLEAR_MATCH for c in candidates[n:])
    ):
        return False
    # Both the results and what the floor took from them (QueryReport.dropped_below_relevance).
    for floor in {min_relevance, 0.0}:
        results = distinct(above_the_floor(scored, floor))[:limit]
        if len(results) < limit or results[-1].score <= ceiling:
            return False
    return True


# A memory matching the query this well by its words other than names (a cosine of 0.3, or half
# the weight of those words) answers what the query asks about: see `above_the_floor`.
CLEAR_MATCH = 0.5


def above_the_floor(ranked: Sequence[R], min_relevance: float) -> list[R]:
    """`ranked` without what the relevance floor drops: a memory whose relevance is below
    `min_relevance`, or, where another memory clearly matches the query's words besides the names
    of people it names (CLEAR_MATCH), whose relevance by those words alone is.

    A name in the question says whose memory is wanted, not what about: every chat of the user
    of an assistant carries their name (its summary, what was extracted from it), so by that
    word alone each matches "Where does Sam work?" a little. Where nothing matches what is asked
    much better, those memories are the best there is ("What does Dustin drive?" of a user who
    only ever talked about their truck's tyres); beside the turn that says where Sam works, a
    chat about lunch is no answer."""
    if not min_relevance:
        return list(ranked)
    if any(r.breakdown.topic_relevance >= CLEAR_MATCH for r in ranked):
        return [r for r in ranked if r.breakdown.topic_relevance >= min_relevance]
    return [r for r in ranked if r.breakdown.relevance >= min_relevance]


def results(ranked: Sequence[R], min_relevance: float, limit: int) -> tuple[list[R], int]:
    """The first `limit` of `ranked` (best first) that pass the relevance floor
    (`above_the_floor`), each fact once (`distinct`), in the same order; and how many of the
    results without the floor it took away."""
    relevant = above_the_floor(ranked, min_relevance)
    dropped = 0
    if len(relevant) < len(ranked):
        # Counted among the results the floor took away, not the whole candidate pool.
        kept = {id(r) for r in relevant}
        dropped = sum(1 for r in distinct(ranked)[:limit] if id(r) not in kept)
    return distinct(relevant)[:limit], dropped


def distinct(ranked: Sequence[R]) -> list[R]:
    """`ranked` without what a higher result already says: a turn whose extracted memory or
    summary ranked above it, a memory extracted from turns that all did, and a summary quoting
    a turn that did.

    A memory and what it was derived from are one piece of evidence; returning both spends two
    of the caller's results (and prompt tokens) on it. The higher one stands for both (its
    `sources` name the turns it came from), and the order is left as the scores made it. A
    summary quotes its turns word for word, so one that ranks below any of them repeats it.
    """
    covered: set[str] = set()
    kept: list[R] = []
    for r in ranked:
        sources = set(r.memory.source_ids)
        quotes = r.memory.kind is MemoryKind.SUMMARY
        if r.memory.id in covered or (sources and (sources & covered if quotes else sources <= covered)):
            continue
        kept.append(r)
        covered.add(r.memory.id)
        covered |= sources
    return kept


# A sentence of this many words or more said word for word by two speakers was copied (pasted
# back, forwarded, imported twice): one telling of it says all the other does.
COPIED_WORDS = 8


def unrepeated(ranked: Sequence[RankedMemory]) -> list[RankedMemory]:
    """`ranked` (opened, best first) with each sentence once: of the memories that say word for
    word the same (spacing and case aside) by the same speaker in the same role, the newest
    telling stands for all, in the place and with the score of the highest; from COPIED_WORDS
    words on, what another speaker or role says word for word below is left out too.

    One sentence said again (an assistant's stock reply, a user retelling the same thing in
    another chat, a history imported twice, an assistant's draft pasted back by the user) is one
    piece of evidence, as a turn and its extracted memory are (`distinct`), and the place a
    repeat took goes to the next result. The newest, as a newer statement replacing a result
    does (current.py): it is the latest time it was said. A copy by someone else keeps the
    place it ranked at (a question naming one of them puts theirs first), and a short sentence
    two people both say ("I love museums too") tells something of each, so both stay.
    """

    def said(m: Memory) -> tuple[str, str, str]:
        return (m.role.value, m.speaker_name, " ".join(m.content.split()).casefold())

    newest: dict[tuple[str, str, str], RankedMemory] = {}
    for r in ranked:
        key = said(r.memory)
        if key not in newest or r.memory.created_at > newest[key].memory.created_at:
            newest[key] = r
    seen: set[tuple[str, str, str]] = set()
    copied: set[str] = set()
    kept: list[RankedMemory] = []
    for r in ranked:
        key = said(r.memory)
        text = key[2]
        if key in seen or text in copied:
            continue
        seen.add(key)
        if len(text.split()) >= COPIED_WORDS:
            copied.add(text)
        telling = newest[key]
        kept.append(r if telling is r else replace(telling, score=r.score))
    return kept
