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
        self, plan: QueryPlan, text: str, deadline: Deadline, k: int | None = None, weighed_only: Sequence[str] = ()
    ) -> list[Candidate]:
        """Candidates with their BM25 score scaled to [0, 1] by the best hit, and their rank.

        `weighed_only`: words of `text` (names) that, in a namespace where common terms are
        left out of the scan, find nothing by themselves either: they only add their weight to
        what its other words find (`_split`)."""
        tenant = plan.namespace.tenant
        bag = self._hasher.bag(tenant, text)
        if not bag.counts:
            return []  # only stopwords or punctuation: nothing to match lexically
        k = k or candidate_depth(self._candidates, plan.limit)
        unscanned = {t for word in weighed_only for t in self._hasher.bag(tenant, word).counts}
        scanned, common, scanned_weight = await self._split(plan, bag.counts, deadline, unscanned)
        hits = await deadline.run(
            self._index.search(plan.namespace, scanned, k, plan.memory_filter),
            "the lexical index",
        )
        scored = [(h.memory_id, h.score, h.coverage) for h in hits]
        if common:
            scored = await self._with_common(plan, scored, common, scanned_weight, deadline)
        best = scored[0][1] if scored and scored[0][1] > 0 else 1.0
        return [
            Candidate(memory_id=m, lexical_score=score / best, lexical_rank=i + 1, term_coverage=coverage)
            for i, (m, score, coverage) in enumerate(scored)
        ]

    async def _split(
        self, plan: QueryPlan, counts: dict[int, int], deadline: Deadline, unscanned: set[int]
    ) -> tuple[dict[int, int], dict[int, float], float]:
        """The query terms to scan (with their counts), the common ones and `unscanned` left out
        with their weight (IDF times count), and the scanned terms' whole weight. In a small
        namespace every term is scanned."""
        if len(counts) < 2:
            return counts, {}, 0.0
        docs, frequencies = await deadline.run(
            self._index.document_frequencies(plan.namespace, list(counts)), "the lexical index"
        )
        if docs < self._common_terms_from:
            return counts, {}, 0.0
        common = unscanned & counts.keys() | {t for t in counts if frequencies.get(t, 0) > COMMON_SHARE * docs}
        if not common or len(common) == len(counts):
            return counts, {}, 0.0
        weight = {t: qtf * lucene_idf(docs, frequencies.get(t, 0)) for t, qtf in counts.items()}
        scanned = {t: qtf for t, qtf in counts.items() if t not in common}
        return scanned, {t: weight[t] for t in common}, sum(weight[t] for t in scanned)

    async def _with_common(
        self,
        plan: QueryPlan,
        scored: list[tuple[str, float, float]],
        common: dict[int, float],
        scanned_weight: float,
        deadline: Deadline,
    ) -> list[tuple[str, float, float]]:
        """The hits rescored with the common terms each holds: BM25 of one occurrence in a
        document of average length is the term's IDF; the coverage is over all the query's terms."""
        weights = common
        held = await deadline.run(
            self._index.terms_held(plan.namespace, [m for m, _, _ in scored], list(weights)), "the lexical index"
        )
        total = scanned_weight + sum(weights.values())
        out = []
        for memory_id, score, coverage in scored:
            extra = sum(weights[t] for t in held.get(memory_id, ()) if t in weights)
            out.append((memory_id, score + extra, (coverage * scanned_weight + extra) / total if total else 0.0))
        out.sort(key=lambda r: (-r[1], r[0]))
        return out

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
