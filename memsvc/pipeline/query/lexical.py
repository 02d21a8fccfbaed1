"""The lexical channel of recall (stage 3, beside dense): keyed-hash BM25 over the user's postings."""

from __future__ import annotations

from collections.abc import Sequence

from memsvc.deadline import Deadline
from memsvc.llm.text import named_entities
from memsvc.pipeline.context import QueryPlan
from memsvc.pipeline.query.recall import Candidate, candidate_depth
from memsvc.stores.lexical.analysis import TermHasher
from memsvc.stores.lexical.base import LexicalIndex


class LexicalRecall:
    def __init__(self, hasher: TermHasher, index: LexicalIndex, candidates: int) -> None:
        self._hasher = hasher
        self._index = index
        self._candidates = candidates

    async def run(self, plan: QueryPlan, text: str, deadline: Deadline, k: int | None = None) -> list[Candidate]:
        """Candidates with their BM25 score scaled to [0, 1] by the best hit, and their rank."""
        bag = self._hasher.bag(plan.namespace.tenant, text)
        if not bag.counts:
            return []  # only stopwords or punctuation: nothing to match lexically
        k = k or candidate_depth(self._candidates, plan.limit)
        hits = await deadline.run(
            self._index.search(plan.namespace, bag.counts, k, plan.memory_filter),
            "the lexical index",
        )
        best = hits[0].score if hits and hits[0].score > 0 else 1.0
        return [
            Candidate(memory_id=h.memory_id, lexical_score=h.score / best, lexical_rank=i + 1, term_coverage=h.coverage)
            for i, h in enumerate(hits)
        ]

    async def memories(self, plan: QueryPlan, deadline: Deadline) -> int:
        """How many memories the namespace's postings hold (one probe of its statistics)."""
        docs, _ = await deadline.run(self._index.stats(plan.namespace), "the lexical index")
        return docs

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

    async def involving(
        self, plan: QueryPlan, memory_ids: Sequence[str], names: Sequence[str], deadline: Deadline
    ) -> set[str]:
        """Of `memory_ids`, those whose postings hold one of `names`: a speaker's marker (said by
        them) or the name's own word (said to or about them); one query, nothing decrypted."""
        tenant = plan.namespace.tenant
        wanted = [
            term_id
            for name in names
            for term_id in (
                *self._hasher.speaker_ids(tenant, name),
                *self._hasher.bag(tenant, name).counts,
            )
        ]
        if not wanted or not memory_ids:
            return set()
        held = await deadline.run(self._index.terms_held(plan.namespace, memory_ids, wanted), "the lexical index")
        return {memory_id for memory_id, terms in held.items() if terms}

    async def terms_held(
        self, plan: QueryPlan, memory_ids: Sequence[str], terms: Sequence[str], deadline: Deadline
    ) -> dict[str, set[str]]:
        """Which of the analysed `terms` each memory's postings hold (one query, nothing decrypted):
        the term overlap of every candidate without opening or re-analysing its text."""
        tenant = plan.namespace.tenant
        by_id = {self._hasher.term_id(tenant, term): term for term in dict.fromkeys(terms)}
        held = await deadline.run(self._index.terms_held(plan.namespace, memory_ids, list(by_id)), "the lexical index")
        return {memory_id: {by_id[t] for t in ids if t in by_id} for memory_id, ids in held.items()}
