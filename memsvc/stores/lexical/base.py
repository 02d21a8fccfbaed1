"""The lexical index contract: keyed-term postings per namespace, BM25-scored search."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple, Protocol

from memsvc.domain.models import MemoryFilter, Namespace


def postings_filter(memory_filter: MemoryFilter) -> MemoryFilter:
    """What of a filter the postings evaluate: not the sealed metadata (hydration checks it) and
    not importance (the rank stage gates it), as the vector index."""
    return replace(memory_filter, metadata={}, min_importance=None)


@dataclass(frozen=True)
class Bm25:
    """BM25 parameters: k1 saturates term frequency, b scales by document length."""

    k1: float = 1.2
    b: float = 0.75


@dataclass(frozen=True)
class LexicalDoc:
    """One memory's keyed term ids with their frequencies and its length in terms."""

    memory_id: str
    terms: Mapping[int, int]
    length: int


class LexicalHit(NamedTuple):
    """A BM25 hit; a NamedTuple, built fast (fifty per search)."""

    memory_id: str
    score: float  # BM25: comparable within one query's hits only
    # The share of the query's IDF weight among the memory's terms, in [0, 1]: how much of what
    # the query asks about the memory mentions, comparable across queries and stores.
    coverage: float = 0.0


class LexicalIndex(Protocol):
    """Postings of keyed term ids, isolated per user namespace; never any readable text."""

    async def index(self, namespace: Namespace, docs: Sequence[LexicalDoc]) -> None:
        """Replace the postings of each doc (idempotent); docs whose memory row is gone are skipped."""
        ...

    async def remove(self, namespace: Namespace, memory_ids: Sequence[str]) -> None:
        """Drop the postings of these memories (also done when their rows are deleted)."""
        ...

    async def search(
        self, namespace: Namespace, query: Mapping[int, int], limit: int, memory_filter: MemoryFilter
    ) -> list[LexicalHit]:
        """The best `limit` memories by BM25 for the query's term ids (with counts), filtered."""
        ...

    async def terms_held(
        self, namespace: Namespace, memory_ids: Sequence[str], terms: Sequence[int]
    ) -> dict[str, frozenset[int]]:
        """Which of `terms` each memory's postings hold, in one query: a memory holding none is absent."""
        ...

    async def sessions_holding(
        self, namespace: Namespace, memory_ids: Sequence[str], terms: Sequence[int]
    ) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
        """Of `memory_ids`: those whose postings hold one of `terms`; those of a session
        (`session_id`) in which one of `memory_ids` does (the first among them); and those of
        a session in which none of `memory_ids` does (none when none holds a term). One read."""
        ...

    async def sessions_with(self, namespace: Namespace, terms: Sequence[int]) -> frozenset[str]:
        """The sessions (`session_id`, none empty) of the memories whose postings hold one of
        `terms`; one read of those postings."""
        ...

    async def terms_present(self, namespace: Namespace, terms: Sequence[int]) -> frozenset[int]:
        """Which of `terms` any memory of the namespace holds."""
        ...

    async def stats(self, namespace: Namespace) -> tuple[int, int]:
        """(documents, total length) of a namespace; (0, 0) when it has none."""
        ...

    async def document_frequencies(self, namespace: Namespace, terms: Sequence[int]) -> tuple[int, dict[int, int]]:
        """The namespace's document count, and how many of its documents hold each of `terms`
        (a term none holds is absent); one short read of the postings' primary key."""
        ...
