"""History, feedback and portability of memories: GetMemoryHistory, Feedback, Export and Import."""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from memsvc.deadline import Deadline
from memsvc.domain.models import (
    ACTOR_WRITE_PATH,
    Memory,
    MemoryChange,
    MemoryFilter,
    MemoryVersion,
    Namespace,
    Permission,
    Principal,
    StoredMemory,
    StoredVersion,
    new_memory_id,
)
from memsvc.embeddings.base import Embedder
from memsvc.errors import NotFound
from memsvc.memories.changes import NamespaceChanges
from memsvc.memories.codec import MemoryCodec
from memsvc.memories.indexer import Indexer
from memsvc.pipeline.paging import PageTokens
from memsvc.pipeline.validation import (
    IDEMPOTENCY_PATTERN,
    MAX_NAME_CHARS,
    MAX_SOURCE_IDS,
    MEMORY_ID_PATTERN,
    Limits,
    Violations,
    check_content,
    check_memory_id,
    check_metadata,
    check_tags,
    check_unit,
    check_user_id,
)
from memsvc.pipeline.write.path import require
from memsvc.pipeline.write.room import ensure_room
from memsvc.pipeline.write.scoring import estimate_quality
from memsvc.stores.records.base import PageCursor, RecordStore

MAX_FEEDBACK_IDS = 100
EXPORT_BATCH = 100
_ALL_VERSIONS = 1_000_000


@dataclass(frozen=True)
class MemoryRecord:
    """One memory with its history: the unit of export and import."""

    memory: Memory
    versions: tuple[MemoryVersion, ...] = ()


@dataclass(frozen=True)
class ImportOutcome:
    imported: int
    skipped: int
    memory_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class FeedbackOutcome:
    recorded: int
    ignored_ids: list[str]


def import_key(memory_id: str) -> str:
    """The idempotency key an imported memory is stored under: importing it twice finds it."""
    return f"import:{memory_id}"


class HistoryService:
    def __init__(
        self,
        *,
        store: RecordStore,
        codec: MemoryCodec,
        embedder: Embedder,
        indexer: Indexer,
        changes: NamespaceChanges,
        page_tokens: PageTokens,
        limits: Limits,
        default_page_size: int,
    ) -> None:
        self._store = store
        self._codec = codec
        self._embedder = embedder
        self._indexer = indexer
        self._changes = changes
        self._pages = page_tokens
        self._limits = limits
        self._default_page_size = default_page_size

    # -- feedback -----------------------------------------------------------------------------

    async def feedback(
        self,
        principal: Principal,
        user_id: str,
        request_id: str,
        used: Sequence[str],
        unused: Sequence[str],
        deadline: Deadline,
    ) -> FeedbackOutcome:
        """Record which memories of one query's results the caller used; unused ones lose vitality.

        Feedback belongs to reading (the caller reports on what Query returned), so the read
        permission suffices.
        """
        require(principal, Permission.READ)
        v = Violations()
        check_user_id(v, user_id)
        if not IDEMPOTENCY_PATTERN.fullmatch(request_id):
            v.add("request_id", "must be the request_id of a QueryResponse (1 to 128 printable ASCII characters)")
        for name, ids in (("used_ids", used), ("unused_ids", unused)):
            if len(ids) > MAX_FEEDBACK_IDS:
                v.add(name, f"at most {MAX_FEEDBACK_IDS} ids")
            for i, memory_id in enumerate(ids[:MAX_FEEDBACK_IDS]):
                check_memory_id(v, memory_id, f"{name}[{i}]")
        both = sorted(set(used) & set(unused))
        if both:
            v.add("unused_ids", f"ids reported as both used and unused: {both[:3]}")
        if not used and not unused:
            v.add("used_ids", "report at least one used or unused memory")
        v.raise_if_any()
        namespace = Namespace.of(principal, user_id)
        recorded = await deadline.run(
            self._store.record_feedback(namespace, request_id, used, unused, time.time()), "the record store"
        )
        if recorded:
            await self._changes.changed(namespace)
        done = set(recorded)
        return FeedbackOutcome(len(recorded), [i for i in dict.fromkeys([*used, *unused]) if i not in done])

    # -- history ------------------------------------------------------------------------------

    async def history(
        self,
        principal: Principal,
        user_id: str,
        memory_id: str,
        page_size: int,
        page_token: str,
        deadline: Deadline,
    ) -> tuple[list[MemoryVersion], str]:
        require(principal, Permission.READ)
        size = page_size or self._default_page_size
        v = Violations()
        check_user_id(v, user_id)
        check_memory_id(v, memory_id)
        if not 1 <= size <= self._limits.max_page_size:
            v.add("page_size", f"must be within 1..{self._limits.max_page_size}")
        v.raise_if_any()
        namespace = Namespace.of(principal, user_id)
        binding = f"history:{memory_id}"
        after = 0
        if page_token:
            after = int(self._pages.decode(page_token, namespace, binding).created_at)
        rows = await deadline.run(
            self._store.list_versions(namespace, [memory_id], after, size + 1), "the record store"
        )
        if not rows and not after:
            raise NotFound("no such memory")
        has_more = len(rows) > size
        rows = rows[:size]
        versions = [await self._codec.open_version(row) for row in rows]
        token = ""
        if has_more and rows:
            token = self._pages.encode(namespace, binding, PageCursor(float(rows[-1].version), memory_id))
        return versions, token

    # -- export -------------------------------------------------------------------------------

    async def export(self, principal: Principal, user_id: str, deadline: Deadline) -> AsyncIterator[list[MemoryRecord]]:
        """Every memory of the user in every retention status, newest first, with its versions."""
        require(principal, Permission.READ)
        v = Violations()
        check_user_id(v, user_id)
        v.raise_if_any()
        namespace = Namespace.of(principal, user_id)
        everything = MemoryFilter(include_inactive=True)
        cursor: PageCursor | None = None
        while True:
            rows = await deadline.run(
                self._store.list_memories(namespace, everything, cursor, EXPORT_BATCH), "the record store"
            )
            if not rows:
                return
            stored_versions = await deadline.run(
                self._store.list_versions(namespace, [r.id for r in rows], 0, _ALL_VERSIONS), "the record store"
            )
            by_memory: dict[str, list[MemoryVersion]] = {}
            for sv in stored_versions:
                by_memory.setdefault(sv.memory_id, []).append(await self._codec.open_version(sv))
            yield [MemoryRecord(await self._codec.open(row), tuple(by_memory.get(row.id, ()))) for row in rows]
            if len(rows) < EXPORT_BATCH:
                return
            cursor = PageCursor(rows[-1].created_at, rows[-1].id)

    # -- import -------------------------------------------------------------------------------

    async def import_records(
        self, principal: Principal, user_id: str, records: Sequence[MemoryRecord], deadline: Deadline
    ) -> ImportOutcome:
        """Store exported records for `user_id`, keeping ids, creation times, scores and history.

        Idempotent: a record whose memory was imported before (or already exists for this user)
        is skipped. A record whose id another user of this deployment holds gets a new id.
        """
        require(principal, Permission.WRITE)
        self._validate(user_id, records)
        namespace = Namespace.of(principal, user_id)
        now = time.time()
        ids = [self._source_id(r.memory) for r in records]
        keys = [import_key(i) for i in ids]
        done_keys = {
            r.idempotency_key: r.id
            for r in await deadline.run(self._store.fetch_by_idempotency_keys(namespace, keys), "the record store")
        }
        present = {r.id for r in await deadline.run(self._store.fetch_memories(namespace, ids), "the record store")}
        todo = [
            (record, source_id)
            for record, source_id in zip(records, ids, strict=True)
            if import_key(source_id) not in done_keys and source_id not in present
        ]
        await ensure_room(self._store, self._limits.max_memories_per_user, namespace, user_id, len(todo), deadline)
        taken = await deadline.run(self._store.existing_memory_ids([s for _, s in todo]), "the record store")
        new_ids = {s: (new_memory_id(r.memory.created_at) if s in taken else s) for r, s in todo}
        rows: list[StoredMemory] = []
        versions: list[StoredVersion] = []
        for record, source_id in todo:
            row, row_versions = await self._import_row(
                principal, namespace, record, source_id, new_ids[source_id], new_ids, now
            )
            rows.append(row)
            versions.extend(row_versions)
        stored = await deadline.run(self._store.insert_memories(rows, versions), "the record store")
        created = [(row, record) for (row, was_created), (record, _) in zip(stored, todo, strict=True) if was_created]
        if created:
            vectors = await deadline.run(
                self._embedder.embed([record.memory.embedding_text for _, record in created]), "the embedder"
            )
            await self._changes.changed(namespace)
            await self._indexer.index_or_defer(
                namespace,
                [(row, vector) for (row, _), vector in zip(created, vectors, strict=True)],
                [record.memory for _, record in created],
            )
        stored_ids = {source: new_ids[source] for _, source in todo}
        out_ids = [done_keys.get(import_key(s)) or stored_ids.get(s) or s for s in ids]
        return ImportOutcome(len(created), len(records) - len(created), out_ids)

    def _validate(self, user_id: str, records: Sequence[MemoryRecord]) -> None:
        v = Violations()
        check_user_id(v, user_id)
        if not records:
            v.add("records", "must contain at least one record")
        elif len(records) > self._limits.max_batch_items:
            v.add("records", f"at most {self._limits.max_batch_items} records per call")
        for i, record in enumerate(records[: self._limits.max_batch_items]):
            m = record.memory
            prefix = f"records[{i}].memory"
            check_content(v, m.content, f"{prefix}.content", self._limits)
            check_tags(v, m.tags, f"{prefix}.tags", self._limits)
            check_metadata(v, m.metadata, f"{prefix}.metadata", self._limits)
            for name in ("importance", "quality", "consistency", "decay", "vitality"):
                check_unit(v, getattr(m, name), f"{prefix}.{name}")
            if m.id and not MEMORY_ID_PATTERN.fullmatch(m.id):
                v.add(f"{prefix}.id", "must be a memory id exported by memsvc (32 lower-case hex digits)")
            if m.superseded_by and not MEMORY_ID_PATTERN.fullmatch(m.superseded_by):
                v.add(f"{prefix}.superseded_by", "must be a memory id")
            if len(m.source_ids) > MAX_SOURCE_IDS:
                v.add(f"{prefix}.source_memory_ids", f"at most {MAX_SOURCE_IDS} ids")
            for k, source in enumerate(m.source_ids[:MAX_SOURCE_IDS]):
                if not MEMORY_ID_PATTERN.fullmatch(source):
                    v.add(f"{prefix}.source_memory_ids[{k}]", "must be a memory id")
            if len(m.speaker_name) > MAX_NAME_CHARS:
                v.add(f"{prefix}.speaker_name", f"must be at most {MAX_NAME_CHARS} characters")
        v.raise_if_any()

    @staticmethod
    def _source_id(m: Memory) -> str:
        if m.id:
            return m.id
        # A hand-written record without an id: derive one from what it says, so re-imports match.
        digest = hashlib.sha256(f"{m.created_at}\x1f{m.content}".encode()).hexdigest()
        return digest[:32]

    async def _import_row(
        self,
        principal: Principal,
        namespace: Namespace,
        record: MemoryRecord,
        source_id: str,
        memory_id: str,
        new_ids: dict[str, str],
        now: float,
    ) -> tuple[StoredMemory, list[StoredVersion]]:
        m = record.memory
        created_at = m.created_at or now
        row = StoredMemory(
            id=memory_id,
            namespace=namespace,
            ciphertext=await self._codec.seal(namespace, memory_id, m.content, m.metadata, m.speaker_name),
            role=m.role,
            kind=m.kind,
            tags=m.tags,
            session_id=m.session_id,
            importance=m.importance,
            tier=m.tier,
            created_at=created_at,
            updated_at=m.updated_at or now,
            usage_count=m.usage_count,
            last_accessed_at=m.last_accessed_at,
            # A hand-written record may leave scores out (0 in proto3): fall back to fresh values.
            quality=m.quality or estimate_quality(m.content).value,
            consistency=m.consistency or 1.0,
            decay=m.decay or 1.0,
            retention_status=m.retention_status,
            embedding_version=self._indexer.embedding_version,
            superseded_by=new_ids.get(m.superseded_by, m.superseded_by),
            source_ids=tuple(new_ids.get(s, s) for s in m.source_ids),
            idempotency_key=import_key(source_id),
            indexed=False,
            expires_at=m.expires_at,
            confirmation_count=max(1, m.confirmation_count),
            score_reasons=dict(m.score_reasons),
            vitality=m.vitality or 1.0,
            acknowledgement=m.acknowledgement,
        )
        versions: list[StoredVersion] = []
        for old in sorted(record.versions, key=lambda x: x.version):
            versions.append(
                await self._codec.seal_version(
                    memory_id=memory_id,
                    namespace=namespace,
                    at=old.at,
                    actor=old.actor,
                    change=old.change,
                    fields=old.fields,
                    description=old.description,
                    tier=old.tier,
                    retention_status=old.retention_status,
                    importance=old.importance,
                    content=None if old.change is MemoryChange.DELETE else old.content,
                    metadata=old.metadata,
                )
            )
        moved = "" if memory_id == source_id else f" (was {source_id})"
        imported = m._replace(id=memory_id, namespace=namespace)
        versions.append(
            await self._codec.seal_version(
                memory_id=memory_id,
                namespace=namespace,
                at=now,
                actor=principal.key_id or ACTOR_WRITE_PATH,
                change=MemoryChange.IMPORT,
                fields=("content", "metadata"),
                description=f"imported by ImportMemories{moved}",
                tier=imported.tier,
                retention_status=imported.retention_status,
                importance=imported.importance,
                content=imported.content,
                metadata=imported.metadata,
            )
        )
        return row, versions
