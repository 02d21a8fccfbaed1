"""Write-time lifecycle: versions, deduplication and contradiction review of new memories.

A new memory is compared with the user's nearest active memories (found with its own vector in
the user's namespace): a near-identical repeat raises the existing memory's confirmation count
instead of adding a row; a memory that states a different value for the same subject and
attribute supersedes the older one. Detection runs offline by rules, or asks the LLM when one
is configured (falling back to the rules when it cannot answer).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from memsvc.deadline import Deadline
from memsvc.domain.models import (
    Memory,
    MemoryFilter,
    MemoryKind,
    Namespace,
    RetentionStatus,
    StoredMemory,
)
from memsvc.embeddings.base import Vector
from memsvc.errors import Unavailable
from memsvc.llm.changes import tells_the_past
from memsvc.memories.codec import MemoryCodec
from memsvc.pipeline.write.facts import INSTRUCTION_PREFIX, Claim, ClaimCache, find_conflict, is_duplicate
from memsvc.pipeline.write.keys import is_turn_key
from memsvc.stores.records.base import MemoryRecords
from memsvc.stores.vectors.base import VectorHit, VectorIndex

log = logging.getLogger(__name__)

# How far a contradicted memory's consistency falls (multiplied in, per contradiction).
CONSISTENCY_PENALTY = 0.5


# -- contradiction detection ------------------------------------------------------------------


@dataclass(frozen=True)
class Contradiction:
    """An older memory the new statement contradicts, and why."""

    memory: Memory
    reason: str


class ContradictionDetector(Protocol):
    """Decides which of the candidate memories a new statement contradicts; `claims` parses texts
    once per write call."""

    async def contradicted(
        self, new_content: str, candidates: Sequence[Memory], deadline: Deadline, claims: ClaimCache
    ) -> list[Contradiction]: ...

    def reads_candidates(self, new_content: str, claims: ClaimCache) -> bool:
        """False when `contradicted` would find nothing for this statement whatever the
        candidates say, so the write need not fetch and decrypt them."""
        ...


class RuleDetector:
    """Offline: subject/attribute/value claims extracted by rules (memsvc/pipeline/facts.py).

    A write call compares each new statement with its nearest stored memories and with the
    call's earlier items, so the same texts come back many times: their claims come from the
    call's `ClaimCache`.
    """

    async def contradicted(
        self, new_content: str, candidates: Sequence[Memory], deadline: Deadline, claims: ClaimCache
    ) -> list[Contradiction]:
        if not self.reads_candidates(new_content, claims):
            return []
        new_claims = claims(new_content)
        out: list[Contradiction] = []
        for candidate in candidates:
            conflict = find_conflict(claims(candidate.content), new_claims)
            if conflict is not None:
                out.append(Contradiction(candidate, conflict.describe()))
        return out

    def reads_candidates(self, new_content: str, claims: ClaimCache) -> bool:
        # What is told as the past ("back when I lived in Cork") is history: it replaces nothing.
        return bool(claims(new_content)) and not tells_the_past(new_content)


class AskJson(Protocol):
    """One LLM call that renders a named prompt and returns its parsed JSON, or None on failure."""

    async def __call__(self, prompt: str, deadline: Deadline, **values: str) -> Any: ...


class LlmDetector:
    """Asks the LLM which candidates the new statement contradicts; the rules answer when it cannot."""

    def __init__(self, ask: AskJson, fallback: ContradictionDetector | None = None) -> None:
        self._ask = ask
        self._fallback = fallback or RuleDetector()

    def reads_candidates(self, new_content: str, claims: ClaimCache) -> bool:
        return True  # the model judges the candidates' own words

    async def contradicted(
        self, new_content: str, candidates: Sequence[Memory], deadline: Deadline, claims: ClaimCache
    ) -> list[Contradiction]:
        if not candidates:
            return []
        listing = "\n".join(f"{i + 1}. {c.content}" for i, c in enumerate(candidates))
        reply = await self._ask("contradiction", deadline, statement=new_content, memories=listing)
        verdicts = _llm_verdicts(reply, len(candidates))
        if verdicts is None:
            return await self._fallback.contradicted(new_content, candidates, deadline, claims)
        # The model's own words quote the memories; stored reasons must not (they are plain text).
        reason = "the LLM judged that it states a different value for the same subject and attribute"
        return [Contradiction(candidates[i], reason) for i, _ in verdicts]


def _llm_verdicts(reply: Any, count: int) -> list[tuple[int, str]] | None:
    """`{"contradicted": [{"index": 2, "reason": "..."}]}` -> [(1, "...")]; None if malformed."""
    if not isinstance(reply, dict) or not isinstance(reply.get("contradicted"), list):
        return None
    out: list[tuple[int, str]] = []
    for item in reply["contradicted"]:
        if isinstance(item, int):
            index, why = item, "states a different value"
        elif isinstance(item, dict) and isinstance(item.get("index"), int):
            index, why = item["index"], str(item.get("reason") or "states a different value")[:200]
        else:
            return None
        if 1 <= index <= count:
            out.append((index - 1, why))
    return out


# -- the review of new memories ---------------------------------------------------------------


@dataclass(frozen=True)
class Review:
    """What the write path does with one new memory besides storing it."""

    duplicate_of: Memory | None = None
    duplicate_reason: str = ""
    contradictions: tuple[Contradiction, ...] = ()


# The most instructions a new one is compared with (a contract is a handful).
MAX_CONTRACT = 30


def _instructs(claims: Sequence[Claim]) -> bool:
    return any(c.attribute.startswith(INSTRUCTION_PREFIX) for c in claims)


class WriteReview:
    """Finds duplicates and contradictions of new memories among the user's nearest memories."""

    def __init__(
        self,
        *,
        store: MemoryRecords,
        index: VectorIndex,
        codec: MemoryCodec,
        detector: ContradictionDetector,
        duplicate_similarity: float = 0.92,
        contradiction_similarity: float = 0.2,
        candidates: int = 8,
    ) -> None:
        self._store = store
        self._index = index
        self._codec = codec
        self._detector = detector
        self._duplicate_similarity = duplicate_similarity
        self._contradiction_similarity = contradiction_similarity
        self._candidates = candidates

    async def review_many(
        self, namespace: Namespace, items: Sequence[tuple[str, Vector]], deadline: Deadline, claims: ClaimCache
    ) -> list[Review]:
        """Each new memory against its nearest stored ones: one vector search and one record
        fetch for the whole call, however many items it holds."""
        if not items:
            return []
        try:
            found = await deadline.run(
                self._index.search_many(namespace, [v for _, v in items], self._candidates, MemoryFilter()),
                "the vector index",
            )
        except Unavailable as exc:
            # The record store acknowledges writes while the index is down; review resumes after.
            log.warning("write review skipped: %s", exc.message)
            return [Review() for _ in items]
        near = []
        # An instruction answers to every instruction of the user's about the same conduct, however
        # unlike in words ("Please address me as Dr. Okafor" and "call me Chi"): the contract is
        # a handful of memories, read whole.
        instructions = [i for i, (content, _) in enumerate(items) if _instructs(claims(content))]
        if instructions:
            contract = await self._contract(namespace, deadline)
            ids = {h.memory_id for h in contract}
            found = [
                [*(h for h in hits if h.memory_id not in ids), *contract] if i in instructions else hits
                for i, hits in enumerate(found)
            ]
        for (content, _), hits in zip(items, found, strict=True):
            # Only a detector that reads the candidates needs every near one; otherwise only
            # possible repeats are read. Most statements state no claim for the rule detector,
            # so most neighbours are neither fetched nor decrypted.
            floor = self._contradiction_similarity
            if not self._detector.reads_candidates(content, claims):
                floor = max(floor, self._duplicate_similarity)
            near.append([h for h in hits if h.similarity >= floor])
        wanted = list(dict.fromkeys(h.memory_id for hits in near for h in hits))
        if not wanted:
            return [Review() for _ in items]
        rows = await deadline.run(self._store.fetch_memories(namespace, wanted), "the record store")
        # A conversation's turns are what was said, evidence under everything derived from them:
        # no memory repeats or contradicts a turn (a memory extracted from a turn says what the
        # turn says, and must be stored as itself, not counted as a confirmation of the turn).
        # The exception: a turn that is itself an instruction is the contract's memory of it, and
        # a later instruction about the same conduct outdates it (it is never repeated, though).
        active = [
            r
            for r in rows
            if r.retention_status is RetentionStatus.ACTIVE
            and (r.kind is MemoryKind.INSTRUCTION or not is_turn_key(r.idempotency_key))
        ]
        opened = {m.id: m for m in await self._codec.open_all(active)}
        turns = {r.id for r in active if is_turn_key(r.idempotency_key)}
        reviews = []
        for (content, _), hits in zip(items, near, strict=True):
            review = await self._judge(
                content,
                [(opened[h.memory_id], h.similarity) for h in hits if h.memory_id in opened.keys() - turns],
                deadline,
                claims,
            )
            stated = [opened[h.memory_id] for h in hits if h.memory_id in turns]
            if stated and review.duplicate_of is None:
                outdated = await self._detector.contradicted(content, stated, deadline, claims)
                review = replace(review, contradictions=review.contradictions + tuple(outdated))
            reviews.append(review)
        return reviews

    async def _judge(
        self,
        content: str,
        near: Sequence[tuple[Memory, float]],
        deadline: Deadline,
        claims: ClaimCache,
        where: str = "",
    ) -> Review:
        """A duplicate among the nearest memories (most similar first), else their contradictions."""
        for memory, similarity in near:
            if is_duplicate(memory.content, content, similarity, self._duplicate_similarity, claims):
                reason = (
                    f"repeats memory {memory.id}{where} (cosine similarity {similarity:.3f}, same content "
                    "terms); its confirmation count was raised instead of storing a copy"
                )
                return Review(duplicate_of=memory, duplicate_reason=reason)
        if not near:
            return Review()
        contradictions = await self._detector.contradicted(content, [m for m, _ in near], deadline, claims)
        return Review(contradictions=tuple(contradictions))

    async def _contract(self, namespace: Namespace, deadline: Deadline) -> list[VectorHit]:
        """The user's active instructions, as hits at the similarity that makes them candidates
        (however far their vectors are)."""
        wanted = MemoryFilter(kinds=(MemoryKind.INSTRUCTION,))
        rows = await deadline.run(self._store.list_memories(namespace, wanted, None, MAX_CONTRACT), "the record store")
        return [VectorHit(r.id, self._contradiction_similarity) for r in rows]

    async def related(
        self, namespace: Namespace, vectors: Sequence[Vector], deadline: Deadline, limit: int
    ) -> list[Memory]:
        """The user's stored memories nearest to any of `vectors` that a new one could update or
        repeat (active, not conversation turns nor summaries), nearest first, at most `limit`."""
        if not vectors:
            return []
        try:
            found = await deadline.run(
                self._index.search_many(namespace, list(vectors), self._candidates, MemoryFilter()),
                "the vector index",
            )
        except Unavailable as exc:
            log.warning("related memories skipped: %s", exc.message)
            return []
        best: dict[str, float] = {}
        for hits in found:
            for h in hits:
                if h.similarity >= self._contradiction_similarity:
                    best[h.memory_id] = max(best.get(h.memory_id, -1.0), h.similarity)
        if not best:
            return []
        rows = await deadline.run(self._store.fetch_memories(namespace, list(best)), "the record store")
        kept = [
            r
            for r in rows
            if r.retention_status is RetentionStatus.ACTIVE
            and not is_turn_key(r.idempotency_key)
            and r.kind is not MemoryKind.SUMMARY
        ]
        kept.sort(key=lambda r: -best[r.id])
        return await self._codec.open_all(kept[:limit])

    async def review_batch(
        self,
        content: str,
        earlier: Sequence[tuple[Memory, float]],
        deadline: Deadline,
        claims: ClaimCache,
    ) -> Review:
        """The same review against earlier items of the same AddMemories call (not yet indexed),
        each with its cosine similarity to this one (`cosine_matrix`)."""
        near = sorted(
            ((memory, similarity) for memory, similarity in earlier if similarity >= self._contradiction_similarity),
            key=lambda pair: -pair[1],
        )
        return await self._judge(content, near, deadline, claims, where=" of the same request")


def cosine_matrix(vectors: Sequence[Vector]) -> npt.NDArray[np.float32]:
    """The cosine similarity of every pair of `vectors`, in one product for a whole call (an
    empty or zero vector is similar to nothing)."""
    width = max((len(v) for v in vectors), default=0)
    matrix = np.zeros((len(vectors), width), dtype=np.float32)
    for row, vector in enumerate(vectors):
        if len(vector):
            matrix[row] = vector
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit = matrix / np.where(norms > 0, norms, np.float32(1.0))
    return (unit @ unit.T).astype(np.float32, copy=False)


def superseded_changes(old: StoredMemory | Memory, successor_id: str, reason: str) -> dict[str, Any]:
    """Column changes that mark `old` superseded by `successor_id` and lower its consistency."""
    reasons = dict(old.score_reasons)
    reasons["consistency"] = f"contradicted by {successor_id}: {reason}"
    return {
        "retention_status": RetentionStatus.SUPERSEDED,
        "superseded_by": successor_id,
        "consistency": round(max(0.0, old.consistency * CONSISTENCY_PENALTY), 4),
        "score_reasons": reasons,
    }
