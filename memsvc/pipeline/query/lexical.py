"""The lexical channel of recall (stage 3, beside dense): keyed-hash BM25 over the user's postings."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from memsvc.deadline import Deadline
from memsvc.errors import Unavailable
from memsvc.llm.text import named_entities
from memsvc.pipeline.context import QueryPlan
from memsvc.pipeline.query.recall import Candidate, candidate_depth
from memsvc.stores.lexical.analysis import TermHasher
from memsvc.stores.lexical.base import LexicalIndex

# From a namespace of `common_terms_from` memories (Settings.lexical_common_terms_from), a query
# term held by more than COMMON_SHARE of them is left out of the scan and only adds its weight to
# the memories the other terms found: its IDF is small (1.6 at a fifth, 0.7 at half, against 9 for
# a term in one memory of 10,000) while its postings are what the search reads most. A user's own
# name in every turn of a 10,000-turn history made one search 50x slower. In a small namespace a
# whole scan is cheap, and nothing changes.
COMMON_SHARE = 0.2


def lucene_idf(docs: int, df: int) -> float:
    """The lexical index's IDF (Lucene's, never negative)."""
    return math.log(1.0 + (docs - df + 0.5) / (df + 0.5))


class Involvement(NamedTuple):
    """Of some memories, those that involve a named person (`named`: said by, to or about them),
    those from a conversation with them (`conversation`, which holds `named`), and those from a
    conversation without them (`elsewhere`: a session none of the memories involving them is of)."""

    named: frozenset[str]
    conversation: frozenset[str]
    elsewhere: frozenset[str]


class _Terms(NamedTuple):
    """A query's terms as a search reads them: those scanned (with their counts), the common
    ones left out of the scan, and every term's weight (IDF times count; empty for a query of
    one term)."""

    scanned: dict[int, int]
    common: frozenset[int]
    weight: dict[int, float]


class _Scored(NamedTuple):
    memory_id: str
    score: float
    coverage: float
    topic_coverage: float


def _with_held(scored: list[_Scored], held: dict[str, frozenset[int]], terms: _Terms, named: set[int]) -> list[_Scored]:
    """The hits with the common terms each holds added (BM25 of one occurrence in a document
    of average length is the term's IDF; the coverage is over all the query's terms), and
    their coverage without the `named` terms they hold; re-sorted when common terms scored."""
    weight = terms.weight
    total = sum(weight.values())
    scanned_weight = sum(weight[t] for t in terms.scanned)
    out = []
    for s in scored:
        have = held.get(s.memory_id, frozenset())
        extra = sum(weight[t] for t in terms.common if t in have)
        coverage = (s.coverage * scanned_weight + extra) / total if terms.common and total else s.coverage
        by_name = sum(weight[t] for t in named if t in have) / total if total else 0.0
        out.append(_Scored(s.memory_id, s.score + extra, coverage, max(0.0, coverage - by_name)))
    if terms.common:
        out.sort(key=lambda r: (-r.score, r.memory_id))
    return out


class LexicalRecall:
    def __init__(
        self,
        hasher: TermHasher,
        index: LexicalIndex,
        candidates: int,
        common_terms_from: int = 2_000,
    ) -> None:
        """`common_terms_from`: the namespace size from which common query terms are left out
        of the scan (COMMON_SHARE)."""
        self._hasher = hasher
        self._index = index
        self._candidates = candidates
        self._common_terms_from = common_terms_from

    async def run(
        self, plan: QueryPlan, text: str, deadline: Deadline, k: int | None = None, names: Sequence[str] = ()
    ) -> list[Candidate]:
        """Candidates with their BM25 score scaled to [0, 1] by the best hit, and their rank.

        `names`: words of `text` that are names of the namespace's speakers. In a namespace
        where common terms are left out of the scan they find nothing by themselves either, and
        only add their weight to what its other words find (`_split`). In any namespace they
        count towards a hit's coverage of what the question asks about (`topic_coverage`, what
        the relevance floor reads) only when the question is nothing but names: every chat
        with a person carries their name, so holding it says a memory is theirs, not that it
        answers ("Where does Sam work?" asked of Sam's assistant, whose every summary names Sam)."""
        tenant = plan.namespace.tenant
        bag = self._hasher.bag(tenant, text)
        if not bag.counts:
            return []  # only stopwords or punctuation: nothing to match lexically
        k = k or candidate_depth(self._candidates, plan.limit)
        named = {t for word in names for t in self._hasher.bag(tenant, word).counts} & bag.counts.keys()
        if len(named) == len(bag.counts):
            named = set()  # nothing but names: holding them is what the question asks
        terms = await self._split(plan, bag.counts, deadline, named)
        hits = await deadline.run(
            self._index.search(plan.namespace, terms.scanned, k, plan.memory_filter),
            "the lexical index",
        )
        scored = [_Scored(h.memory_id, h.score, h.coverage, h.coverage) for h in hits]
        held_terms = [*terms.common, *named]
        if scored and held_terms:
            held = await deadline.run(
                self._index.terms_held(plan.namespace, [s.memory_id for s in scored], held_terms),
                "the lexical index",
            )
            scored = _with_held(scored, held, terms, named)
        best = scored[0].score if scored and scored[0].score > 0 else 1.0
        return [
            Candidate(
                memory_id=s.memory_id,
                lexical_score=s.score / best,
                lexical_rank=i + 1,
                term_coverage=s.coverage,
                topic_coverage=s.topic_coverage,
            )
            for i, s in enumerate(scored)
        ]

    async def _split(self, plan: QueryPlan, counts: dict[int, int], deadline: Deadline, unscanned: set[int]) -> _Terms:
        """The query terms to scan (with their counts), the common ones and `unscanned` left out,
        and every term's weight (IDF times count). In a small namespace every term is scanned."""
        if len(counts) < 2:
            return _Terms(counts, frozenset(), {})
        docs, frequencies = await deadline.run(
            self._index.document_frequencies(plan.namespace, list(counts)), "the lexical index"
        )
        weight = {t: qtf * lucene_idf(docs, frequencies.get(t, 0)) for t, qtf in counts.items()}
        if docs < self._common_terms_from:
            return _Terms(counts, frozenset(), weight)
        common = unscanned & counts.keys() | {t for t in counts if frequencies.get(t, 0) > COMMON_SHARE * docs}
        if not common or len(common) == len(counts):
            return _Terms(counts, frozenset(), weight)
        return _Terms({t: qtf for t, qtf in counts.items() if t not in common}, frozenset(common), weight)

    async def memories(self, plan: QueryPlan, deadline: Deadline) -> int:
        """How many memories the namespace's postings hold (one probe of its statistics)."""
        docs, _ = await deadline.run(self._index.stats(plan.namespace), "the lexical index")
        return docs

    async def long_history(self, plan: QueryPlan, deadline: Deadline) -> bool:
        """Whether the namespace is a long history: `common_terms_from` memories or more, where a
        name on every turn of a person is weighed, not scanned, and many people's chats hold
        the same things. False while the index is down."""
        try:
            return await self.memories(plan, deadline) >= self._common_terms_from
        except Unavailable:
            return False

    async def speakers_named(self, plan: QueryPlan, texts: Sequence[str], deadline: Deadline) -> list[list[str]]:
        """For each of `texts`, its names that speakers of the namespace's conversations go by,
        known from the marker terms their turns are posted with (nothing readable is stored);
        one lookup for all the texts."""
        names = [named_entities(text) for text in texts]
        tenant = plan.namespace.tenant
        markers = {name: self._hasher.speaker_ids(tenant, name) for name in {n for ns in names for n in ns}}
        wanted = [i for ids in markers.values() for i in ids]
        if not wanted:
            return [[] for _ in texts]
        present = await deadline.run(self._index.terms_present(plan.namespace, wanted), "the lexical index")
        speakers = {name for name, ids in markers.items() if ids and all(i in present for i in ids)}
        return [[n for n in ns if n in speakers] for ns in names]

    def _name_terms(self, plan: QueryPlan, name: str) -> tuple[list[int], list[int]]:
        """The term ids a memory involving `name` holds: the speaker's markers (said by them) and
        the name's own words (said to or about them)."""
        tenant = plan.namespace.tenant
        return self._hasher.speaker_ids(tenant, name), list(self._hasher.bag(tenant, name).counts)

    async def share_involving(self, plan: QueryPlan, names: Sequence[str], deadline: Deadline) -> float:
        """About what share of the namespace's memories involve one of `names` (said by, to or
        about them: the terms `involving` reads), from the index's document frequencies."""
        # Each term of a name is on every memory the name is ("Mel Jones": both): counted once.
        groups = [ids for name in names for ids in self._name_terms(plan, name) if ids]
        if not groups:
            return 0.0
        docs, frequencies = await deadline.run(
            self._index.document_frequencies(plan.namespace, [t for ids in groups for t in ids]), "the lexical index"
        )
        held = sum(max(frequencies.get(t, 0) for t in ids) for ids in groups)
        return min(1.0, held / docs) if docs else 0.0

    async def sessions_involving(self, plan: QueryPlan, names: Sequence[str], deadline: Deadline) -> frozenset[str]:
        """The sessions in which a memory involves one of `names` (said by, to or about them: the
        terms `involving` reads): the conversations with them."""
        wanted = [term_id for name in names for ids in self._name_terms(plan, name) for term_id in ids]
        if not wanted:
            return frozenset()
        return await deadline.run(self._index.sessions_with(plan.namespace, wanted), "the lexical index")

    async def involving(
        self, plan: QueryPlan, memory_ids: Sequence[str], names: Sequence[str], deadline: Deadline
    ) -> Involvement:
        """Which of `memory_ids` involve one of `names`: whose postings hold a speaker's marker
        (said by them) or the name's own word (said to or about them), which are from a
        conversation with them (a session in which one of `memory_ids` does) and which from one
        without them; one read, nothing decrypted."""
        wanted = [term_id for name in names for ids in self._name_terms(plan, name) for term_id in ids]
        if not wanted or not memory_ids:
            return Involvement(frozenset(), frozenset(), frozenset())
        named, conversation, elsewhere = await deadline.run(
            self._index.sessions_holding(plan.namespace, memory_ids, wanted), "the lexical index"
        )
        return Involvement(named, conversation, elsewhere)

    async def terms_held(
        self, plan: QueryPlan, memory_ids: Sequence[str], terms: Sequence[str], deadline: Deadline
    ) -> dict[str, set[str]]:
        """Which of the analysed `terms` each memory's postings hold (one query, nothing decrypted):
        the term overlap of every candidate without opening or re-analysing its text."""
        tenant = plan.namespace.tenant
        by_id = {self._hasher.term_id(tenant, term): term for term in dict.fromkeys(terms)}
        held = await deadline.run(self._index.terms_held(plan.namespace, memory_ids, list(by_id)), "the lexical index")
        return {memory_id: {by_id[t] for t in ids if t in by_id} for memory_id, ids in held.items()}
