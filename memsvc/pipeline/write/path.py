"""The write path: validate -> embed (batched) -> review -> seal -> record row -> index.

The record store is the source of truth. A row is committed before it is indexed; if an index
write fails the row stays marked unindexed and the reconciler finishes the job, so an
acknowledged write is never lost. Reads (Get, List) live in memsvc/pipeline/reads.py.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from memsvc.deadline import Deadline
from memsvc.domain.models import (
    Memory,
    MemoryChange,
    MemoryChanges,
    Namespace,
    NewMemory,
    Permission,
    Principal,
    RetentionStatus,
    StoredMemory,
    StoredVersion,
    embedding_text,
    new_memory_id,
)
from memsvc.embeddings.base import Embedder, Vector
from memsvc.errors import NotFound, PermissionDenied
from memsvc.memories.changes import NamespaceChanges
from memsvc.memories.codec import MemoryCodec, with_plaintext
from memsvc.memories.indexer import Indexer
from memsvc.pipeline.validation import (
    Limits,
    Violations,
    check_memory_id,
    check_user_id,
    validate_changes,
    validate_new_memories,
)
from memsvc.pipeline.write.extraction import kind_of
from memsvc.pipeline.write.facts import ClaimCache
from memsvc.pipeline.write.keys import is_turn_key, summary_key
from memsvc.pipeline.write.review import (
    CONSISTENCY_PENALTY,
    Contradiction,
    Review,
    WriteReview,
    cosine_matrix,
    superseded_changes,
)
from memsvc.pipeline.write.room import ensure_room
from memsvc.pipeline.write.scoring import estimate_importance, estimate_quality
from memsvc.stores.records.base import RecordStore


class WriteOrigin(StrEnum):
    """Who made the items of a write: a caller, or the conversation path from a session's turns."""

    CALLER = "caller"
    # Evidence: every turn is kept as said, never merged with or superseding another memory.
    TURNS = "turns"
    # Memories extracted from turns: reviewed against the user's memories like a caller's.
    EXTRACTED = "extracted"
    # A session summary: it restates its turns, so it neither confirms nor supersedes anything.
    SUMMARY = "summary"

    @property
    def reviewed(self) -> bool:
        return self in (WriteOrigin.CALLER, WriteOrigin.EXTRACTED)


class WriteOutcome(StrEnum):
    CREATED = "created"
    IDEMPOTENT_REPLAY = "idempotent_replay"
    CONFIRMED_EXISTING = "confirmed_existing"


@dataclass(frozen=True)
class AddResult:
    """What AddMemories did with one item, and why."""

    memory: Memory
    created: bool
    outcome: WriteOutcome
    reason: str = ""
    superseded_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Draft:
    """One item of an AddMemories call on its way through review, sealing and storing.

    Exactly one of `result` (answered without a new row: a replay, a stored duplicate),
    `repeats` (a repeat of an earlier item of the call) and `row` (a new row) is set.
    """

    item: NewMemory
    vector: Vector
    result: AddResult | None = None
    repeats: int | None = None  # position in the call of the earlier item this one repeats
    reason: str = ""
    row: StoredMemory | None = None
    memory: Memory | None = None  # the new row's plaintext view: nothing is decrypted again
    supersedes: tuple[Contradiction, ...] = ()


def require(principal: Principal, permission: Permission) -> None:
    if not principal.allows(permission):
        raise PermissionDenied(f"this API key lacks the {permission.value} permission")


class WritePath:
    def __init__(
        self,
        *,
        store: RecordStore,
        embedder: Embedder,
        codec: MemoryCodec,
        indexer: Indexer,
        changes: NamespaceChanges,
        limits: Limits,
        review: WriteReview | None = None,
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._codec = codec
        self._indexer = indexer
        self._changes = changes
        self._limits = limits
        self._review = review

    # -- AddMemories --------------------------------------------------------------------------

    async def add_detailed(
        self,
        principal: Principal,
        user_id: str,
        items: list[NewMemory],
        deadline: Deadline,
        origin: WriteOrigin = WriteOrigin.CALLER,
        given_vectors: Sequence[Vector | None] = (),
    ) -> list[AddResult]:
        """Store new memories; repeats confirm an existing memory, contradictions supersede older ones.

        One walk: every item is drafted in order (replay, repeat, or a new sealed row), the new
        rows and their versions are stored in one transaction, then indexed. `given_vectors`
        (aligned with `items`) are vectors the server already holds for an item; the others
        are embedded.
        """
        require(principal, Permission.WRITE)
        now = time.time()
        validate_new_memories(user_id, items, self._limits, now, server_keys=origin is not WriteOrigin.CALLER)
        namespace = Namespace.of(principal, user_id)
        # Retries first: a replayed item is answered from the store with no side effect at all.
        keys = [i.idempotency_key for i in items if i.idempotency_key]
        replayed = {
            r.idempotency_key: r
            for r in await deadline.run(self._store.fetch_by_idempotency_keys(namespace, keys), "the record store")
        }
        # A replayed item keeps its stored row and vector: only the others are embedded.
        vectors: list[Vector] = [np.empty(0, dtype=np.float32)] * len(items)
        fresh: list[int] = []
        for k, item in enumerate(items):
            given = given_vectors[k] if given_vectors else None
            if given is not None:
                vectors[k] = given
            elif item.idempotency_key not in replayed:
                fresh.append(k)
        embedded = await deadline.run(self._embedder.embed([items[k].embedding_text for k in fresh]), "the embedder")
        for k, vector in zip(fresh, embedded, strict=True):
            vectors[k] = vector
        reviewed = origin.reviewed
        claims = ClaimCache()  # this call's texts only: no plaintext outlives the request
        reviews = await self._review_against_stored(namespace, items, vectors, replayed, reviewed, deadline, claims)
        # Each item is also reviewed against the call's earlier items: all their cosines at once.
        cosines = cosine_matrix(vectors) if self._review is not None and reviewed and len(items) > 1 else None
        drafts: list[Draft] = []
        for k, (item, vector, review) in enumerate(zip(items, vectors, reviews, strict=True)):
            draft = await self._draft(
                principal,
                namespace,
                item,
                vector,
                review,
                replayed,
                reviewed,
                drafts,
                None if cosines is None else cosines[k],
                now,
                deadline,
                claims,
            )
            drafts.append(draft)
        if origin in (WriteOrigin.CALLER, WriteOrigin.TURNS):
            # What the caller adds; what is derived from accepted turns follows them.
            adding = sum(1 for d in drafts if d.row is not None)
            await ensure_room(self._store, self._limits.max_memories_per_user, namespace, user_id, adding, deadline)
        return await self._store_drafts(principal, namespace, drafts, now, deadline)

    async def _review_against_stored(
        self,
        namespace: Namespace,
        items: Sequence[NewMemory],
        vectors: Sequence[Vector],
        replayed: dict[str, StoredMemory],
        reviewed: bool,
        deadline: Deadline,
        claims: ClaimCache,
    ) -> list[Review]:
        """Every item (but replays) against the user's stored memories, in one search."""
        reviews = [Review()] * len(items)
        wanted = [i for i, item in enumerate(items) if item.idempotency_key not in replayed]
        if self._review is None or not reviewed or not wanted:
            return reviews
        found = await self._review.review_many(
            namespace, [(items[i].content, vectors[i]) for i in wanted], deadline, claims
        )
        for i, review in zip(wanted, found, strict=True):
            reviews[i] = review
        return reviews

    async def _draft(
        self,
        principal: Principal,
        namespace: Namespace,
        item: NewMemory,
        vector: Vector,
        review: Review,
        replayed: dict[str, StoredMemory],
        reviewed: bool,
        earlier: Sequence[Draft],
        cosines: npt.NDArray[np.float32] | None,
        now: float,
        deadline: Deadline,
        claims: ClaimCache,
    ) -> Draft:
        """`cosines`: this item's similarity to each item of the call, None when there is no
        earlier item to review against."""
        if item.idempotency_key in replayed:
            memory = await self._codec.open(replayed[item.idempotency_key])
            replay = AddResult(memory, False, WriteOutcome.IDEMPOTENT_REPLAY, "idempotency key stored before")
            return Draft(item, vector, result=replay)
        if review.duplicate_of is not None:
            confirmed = await self._confirm(principal, review.duplicate_of, review.duplicate_reason, now, deadline)
            if confirmed is not None:
                result = AddResult(confirmed, False, WriteOutcome.CONFIRMED_EXISTING, review.duplicate_reason)
                return Draft(item, vector, result=result)
        # Then against this call's earlier new items, which no index holds yet.
        local = Review()
        if self._review is not None and cosines is not None and review.duplicate_of is None:
            new = [(d.memory, float(cosines[k])) for k, d in enumerate(earlier) if d.memory is not None]
            if new:
                local = await self._review.review_batch(item.content, new, deadline, claims)
        if local.duplicate_of is not None:
            repeated = local.duplicate_of.id
            position = next(k for k, d in enumerate(earlier) if d.memory is not None and d.memory.id == repeated)
            return Draft(item, vector, repeats=position, reason=local.duplicate_reason)
        contradictions = review.contradictions + local.contradictions
        created_at = item.created_at if item.created_at is not None else now
        # A back-dated statement older than the memory it contradicts is history, not news.
        newer = [c for c in contradictions if c.memory.created_at > created_at]
        row = await self._new_row(namespace, item, now, claims)
        if newer:
            successor = max(newer, key=lambda c: c.memory.created_at)
            row = row._replace(**superseded_changes(row, successor.memory.id, successor.reason))
        memory = with_plaintext(row, item.content, item.metadata, item.speaker_name, item.index_text)
        return Draft(item, vector, row=row, memory=memory, supersedes=() if newer else contradictions)

    async def _store_drafts(
        self, principal: Principal, namespace: Namespace, drafts: Sequence[Draft], now: float, deadline: Deadline
    ) -> list[AddResult]:
        """Store the new rows (repeats counted into them) with their versions; index; supersede."""
        confirmations = {k: d.row.confirmation_count for k, d in enumerate(drafts) if d.row is not None}
        creates: list[StoredVersion] = []
        confirms: list[StoredVersion] = []
        for draft in drafts:
            if draft.memory is not None:
                creates.append(
                    await self._codec.version_of(
                        draft.memory,
                        at=now,
                        actor=principal.key_id,
                        change=MemoryChange.CREATE,
                        fields=("content", "metadata", "importance", "quality", "tier"),
                        description="created by AddMemories",
                    )
                )
            elif draft.repeats is not None:
                confirmations[draft.repeats] += 1
                target = drafts[draft.repeats].memory
                assert target is not None
                confirms.append(
                    await self._codec.version_of(
                        target._replace(confirmation_count=confirmations[draft.repeats]),
                        at=now,
                        actor=principal.key_id,
                        change=MemoryChange.CONFIRM,
                        fields=("confirmation_count",),
                        description=draft.reason,
                    )
                )
        new = [k for k, d in enumerate(drafts) if d.row is not None]
        rows = [r._replace(confirmation_count=confirmations[k]) for k in new if (r := drafts[k].row) is not None]
        # Creates first, so a memory's confirmations number after its creation.
        stored = await deadline.run(self._store.insert_memories(rows, creates + confirms), "the record store")
        memories: dict[int, Memory] = {}
        results: dict[int, AddResult] = {}
        fresh: list[tuple[StoredMemory, Vector]] = []
        opened: list[Memory] = []
        supersede: list[tuple[Memory, str, str]] = []
        for k, (row, created) in zip(new, stored, strict=True):
            draft = drafts[k]
            if not created:  # a concurrent retry stored the same idempotency key first
                memories[k] = await self._codec.open(row)
                why = "idempotency key stored before"
                results[k] = AddResult(memories[k], False, WriteOutcome.IDEMPOTENT_REPLAY, why)
                continue
            memories[k] = with_plaintext(
                row, draft.item.content, draft.item.metadata, draft.item.speaker_name, draft.item.index_text
            )
            fresh.append((row, draft.vector))
            opened.append(memories[k])
            superseded = tuple(c.memory.id for c in draft.supersedes)
            supersede += [(c.memory, row.id, c.reason) for c in draft.supersedes]
            reason = f"contradicts and supersedes {', '.join(superseded)}" if superseded else ""
            if row.retention_status is RetentionStatus.SUPERSEDED:
                reason = f"older than memory {row.superseded_by}, which it contradicts; stored as superseded history"
            results[k] = AddResult(memories[k], True, WriteOutcome.CREATED, reason, superseded)
        out: list[AddResult] = []
        for k, draft in enumerate(drafts):
            if draft.result is not None:
                out.append(draft.result)
            elif draft.repeats is not None:
                out.append(AddResult(memories[draft.repeats], False, WriteOutcome.CONFIRMED_EXISTING, draft.reason))
            else:
                out.append(results[k])
        if fresh or any(r.outcome is WriteOutcome.CONFIRMED_EXISTING for r in out):
            await self._changes.changed(namespace)
        await self._indexer.index_or_defer(namespace, fresh, opened)
        if supersede:
            await self._supersede(principal, namespace, supersede, now)
        return out

    async def _new_row(self, namespace: Namespace, item: NewMemory, now: float, claims: ClaimCache) -> StoredMemory:
        created_at = item.created_at if item.created_at is not None else now
        memory_id = new_memory_id(created_at)
        kind = item.kind if item.kind is not None else kind_of(item.content, item.role)
        if item.importance is not None:
            importance, importance_reason = item.importance, "set by the caller"
        else:
            estimate = estimate_importance(item.content, item.role, kind, claims)
            importance, importance_reason = estimate.value, f"estimated: {estimate.reason}"
        quality = estimate_quality(item.content)
        reasons = {
            "importance": importance_reason,
            "quality": f"estimated: {quality.reason}",
            "consistency": "not contradicted",
        }
        return StoredMemory(
            id=memory_id,
            namespace=namespace,
            ciphertext=await self._codec.seal(
                namespace, memory_id, item.content, item.metadata, item.speaker_name, item.index_text
            ),
            role=item.role,
            kind=kind,
            tags=item.tags,
            session_id=item.session_id,
            importance=importance,
            tier=item.tier,
            created_at=created_at,
            updated_at=now,
            usage_count=0,
            last_accessed_at=None,
            quality=quality.value,
            consistency=1.0,
            decay=1.0,
            retention_status=RetentionStatus.ACTIVE,
            embedding_version=self._indexer.embedding_version,
            superseded_by="",
            idempotency_key=item.idempotency_key,
            indexed=False,
            expires_at=item.expires_at,
            score_reasons=reasons,
            source_ids=item.source_ids,
            extraction_pending=item.extraction_pending,
            acknowledgement=item.acknowledgement,
        )

    async def _confirm(
        self, principal: Principal, existing: Memory, reason: str, now: float, deadline: Deadline
    ) -> Memory | None:
        version = await self._codec.version_of(
            existing._replace(confirmation_count=existing.confirmation_count + 1),
            at=now,
            actor=principal.key_id,
            change=MemoryChange.CONFIRM,
            fields=("confirmation_count",),
            description=reason,
        )
        row = await deadline.run(
            self._store.confirm_memory(existing.namespace, existing.id, now, version), "the record store"
        )
        if row is None:
            return None
        return with_plaintext(row, existing.content, existing.metadata, existing.speaker_name, existing.index_text)

    async def _supersede(
        self, principal: Principal, namespace: Namespace, items: Sequence[tuple[Memory, str, str]], now: float
    ) -> None:
        """Mark contradicted memories superseded (with a version each) and re-index their vectors;
        supersession follows provenance: the turns they were extracted from are marked outdated.

        The successors are stored first: if this step fails, both stay active, never neither.
        """
        updated: list[tuple[StoredMemory, str]] = []
        turns: dict[str, tuple[str, str]] = {}  # source turn id -> (successor id, reason)
        for old, successor_id, reason in items:
            if is_turn_key(old.idempotency_key):
                turns[old.id] = (successor_id, reason)  # a turn stays what was said: outdated, not replaced
                continue
            changes = superseded_changes(old, successor_id, reason)
            after = old._replace(retention_status=RetentionStatus.SUPERSEDED, superseded_by=successor_id)
            version = await self._codec.version_of(
                after,
                at=now,
                actor=principal.key_id,
                change=MemoryChange.SUPERSEDE,
                fields=("retention_status", "superseded_by", "consistency"),
                description=f"superseded by {successor_id}: {reason}",
            )
            row = await self._store.update_memory(namespace, old.id, changes, now, version)
            if row is not None:
                updated.append((row, old.embedding_text))
                turns.update(dict.fromkeys(row.source_ids, (successor_id, f"a memory extracted from it was: {reason}")))
        await self._indexer.reindex(namespace, updated)
        outdated = await self._outdate_turns(principal, namespace, turns, now)
        await self._mark_summaries_stale(namespace, [row for row, _ in updated] + outdated)

    async def _outdate_turns(
        self, principal: Principal, namespace: Namespace, turns: Mapping[str, tuple[str, str]], now: float
    ) -> list[StoredMemory]:
        """Mark these conversation turns (id -> successor id, reason) as stating what their
        successor replaced: they stay active and findable as history, ranked below it for
        questions about the present. Returns the rows marked."""
        if not turns:
            return []
        rows = [r for r in await self._store.fetch_memories(namespace, list(turns)) if is_turn_key(r.idempotency_key)]
        marked: list[StoredMemory] = []
        for row in rows:
            successor_id, reason = turns[row.id]
            memory = await self._codec.open(row)
            version = await self._codec.version_of(
                memory._replace(superseded_by=successor_id),
                at=now,
                actor=principal.key_id,
                change=MemoryChange.SUPERSEDE,
                fields=("superseded_by", "consistency"),
                description=f"outdated by {successor_id}: {reason}",
            )
            done = await self._store.mark_outdated(namespace, [version], successor_id, CONSISTENCY_PENALTY)
            if done:
                marked.append(row._replace(superseded_by=successor_id))
        return marked

    async def related(
        self, namespace: Namespace, vectors: Sequence[Vector], deadline: Deadline, limit: int = 20
    ) -> list[Memory]:
        """The user's stored memories a new one near `vectors` could update or repeat."""
        if self._review is None:
            return []
        return await self._review.related(namespace, vectors, deadline, limit)

    async def confirm(
        self, principal: Principal, namespace: Namespace, memory_id: str, reason: str, deadline: Deadline
    ) -> Memory | None:
        """Raise the confirmation count of a stored memory a new statement repeats."""
        rows = await deadline.run(self._store.fetch_memories(namespace, [memory_id]), "the record store")
        if not rows:
            return None
        confirmed = await self._confirm(principal, await self._codec.open(rows[0]), reason, time.time(), deadline)
        if confirmed is not None:
            await self._changes.changed(namespace)
        return confirmed

    async def supersede(
        self, principal: Principal, namespace: Namespace, successor_id: str, memory_ids: Sequence[str], reason: str
    ) -> None:
        """Mark stored memories of `namespace` superseded by `successor_id` (and the turns they
        were extracted from outdated); an id the namespace does not hold is skipped."""
        rows = [r for r in await self._store.fetch_memories(namespace, list(memory_ids)) if r.id != successor_id]
        active = [r for r in rows if r.retention_status is RetentionStatus.ACTIVE]
        if not active:
            return
        opened = await self._codec.open_all(active)
        await self._supersede(principal, namespace, [(m, successor_id, reason) for m in opened], time.time())
        await self._changes.changed(namespace)

    async def _mark_summaries_stale(self, namespace: Namespace, changed: Sequence[StoredMemory]) -> None:
        """Session summaries quoting a turn that `changed` memories (superseded, deleted) came from,
        or quoting them directly, may now state what is no longer true: mark them stale."""
        quoted: dict[str, set[str]] = {}
        for row in changed:
            if row.session_id:
                quoted.setdefault(row.session_id, set()).update({row.id, *row.source_ids})
        if not quoted:
            return
        summaries = await self._store.fetch_by_idempotency_keys(namespace, [summary_key(s) for s in quoted])
        stale = [s.id for s in summaries if not s.stale and set(s.source_ids) & quoted.get(s.session_id, set())]
        await self._store.mark_stale(namespace, stale, True)

    async def update(
        self,
        principal: Principal,
        user_id: str,
        memory_id: str,
        changes: MemoryChanges,
        deadline: Deadline,
        description: str = "",
        vector: Vector | None = None,
    ) -> Memory:
        """Apply `changes`; the memory is embedded again unless its new `vector` is given."""
        require(principal, Permission.WRITE)
        validate_changes(user_id, memory_id, changes, self._limits)
        namespace = Namespace.of(principal, user_id)
        current = await self._get_stored(namespace, memory_id, deadline)
        memory = await self._codec.open(current)
        columns: dict[str, Any] = {}
        content = memory.content if changes.content is None else changes.content
        metadata = memory.metadata if changes.metadata is None else changes.metadata
        # The index text embeds the old content (a turn in its context): a new content replaces it.
        index_text = memory.index_text if changes.content is None else ""
        if changes.content is not None or changes.metadata is not None:
            columns["ciphertext"] = await self._codec.seal(
                namespace, memory_id, content, metadata, memory.speaker_name, index_text
            )
        if changes.tags is not None:
            columns["tags"] = changes.tags
        if changes.tier is not None:
            columns["tier"] = changes.tier
        if changes.importance is not None:
            columns["importance"] = changes.importance
            columns["score_reasons"] = {**memory.score_reasons, "importance": "set by the caller"}
        if changes.expires_at is not None:
            columns["expires_at"] = changes.expires_at or None
        if changes.source_ids is not None:
            columns["source_ids"] = changes.source_ids
        vectors = (
            [vector]
            if vector is not None
            else await deadline.run(
                self._embedder.embed([embedding_text(content, memory.speaker_name)]), "the embedder"
            )
        )
        now = time.time()
        fields = [f for f in ("content", "tags", "tier", "importance", "metadata") if getattr(changes, f) is not None]
        if changes.expires_at is not None:
            fields.append("expire_time")
        if changes.source_ids is not None:
            fields.append("source_memory_ids")
        after = memory._replace(
            content=content,
            metadata=metadata,
            tier=memory.tier if changes.tier is None else changes.tier,
            importance=memory.importance if changes.importance is None else changes.importance,
        )
        version = await self._codec.version_of(
            after,
            at=now,
            actor=principal.key_id,
            change=MemoryChange.UPDATE,
            fields=fields,
            description=description or f"UpdateMemory set {', '.join(fields)}",
        )
        updated = await deadline.run(
            self._store.update_memory(namespace, memory_id, columns, now, version), "the record store"
        )
        if updated is None:
            raise NotFound("no such memory")
        await self._changes.changed(namespace)
        after_update = with_plaintext(updated, content, metadata, memory.speaker_name, index_text)
        await self._indexer.index_or_defer(namespace, [(updated, vectors[0])], [after_update])
        return after_update

    async def delete(self, principal: Principal, user_id: str, memory_id: str, deadline: Deadline) -> None:
        require(principal, Permission.WRITE)
        self._check_ids(user_id, memory_id)
        namespace = Namespace.of(principal, user_id)
        if not await self.delete_rows(namespace, [memory_id], principal.key_id, "deleted by DeleteMemory", deadline):
            raise NotFound("no such memory")

    async def delete_rows(
        self, namespace: Namespace, memory_ids: Sequence[str], actor: str, description: str, deadline: Deadline
    ) -> int:
        """The one delete path (callers and the maintenance job): row, history content, postings, vector.

        Each memory keeps only a content-free version recording who deleted it, when and why.
        """
        deleted: list[StoredMemory] = []
        for memory_id in memory_ids:
            row = await deadline.run(self._store.fetch_memories(namespace, [memory_id]), "the record store")
            if not row:
                continue
            version = await self._codec.seal_version(
                memory_id=memory_id,
                namespace=namespace,
                at=time.time(),
                actor=actor,
                change=MemoryChange.DELETE,
                fields=("content", "metadata"),
                description=description,
                tier=row[0].tier,
                retention_status=row[0].retention_status,
                importance=row[0].importance,
                content=None,
            )
            gone = await deadline.run(self._store.delete_memory(namespace, memory_id, version), "the record store")
            if gone is not None:
                deleted.append(gone)
        if not deleted:
            return 0
        await self._mark_summaries_stale(namespace, deleted)
        await self._changes.changed(namespace)
        await self._indexer.remove(namespace, memory_ids)
        return len(deleted)

    async def forget(self, principal: Principal, user_id: str, deadline: Deadline) -> int:
        require(principal, Permission.WRITE)
        v = Violations()
        check_user_id(v, user_id)
        v.raise_if_any()
        namespace = Namespace.of(principal, user_id)
        # Rows and the data key go first, in one transaction: from then on nothing decrypts.
        count = await deadline.run(self._store.forget_namespace(namespace), "the record store")
        self._codec.forget(namespace)
        await self._changes.changed(namespace)
        await self._indexer.drop(namespace)
        return count

    async def _get_stored(self, namespace: Namespace, memory_id: str, deadline: Deadline) -> StoredMemory:
        rows = await deadline.run(self._store.fetch_memories(namespace, [memory_id]), "the record store")
        if not rows:
            raise NotFound("no such memory")
        return rows[0]

    @staticmethod
    def _check_ids(user_id: str, memory_id: str) -> None:
        v = Violations()
        check_user_id(v, user_id)
        check_memory_id(v, memory_id)
        v.raise_if_any()
