"""The record store contract: the source of truth for memories, keys, events and the outbox."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from memsvc.domain.models import (
    ApiKeyRecord,
    MemoryFilter,
    Namespace,
    RecallEvent,
    StoredMemory,
    StoredVersion,
    Tier,
    WrappedDataKey,
    WrappedSecret,
)
from memsvc.stores.records.datakeys import StaleDataKey


@dataclass(frozen=True)
class PageCursor:
    """Where a listing resumes: after the memory with this (created_at, id), newest first."""

    created_at: float
    memory_id: str


@dataclass(frozen=True)
class IndexTicket:
    """A row's revision at the time its vector was written; stale tickets do not mark it indexed."""

    memory_id: str
    revision: int


@dataclass(frozen=True)
class VectorTombstone:
    """A vector that must be removed from the index (its row is already gone)."""

    memory_id: str
    namespace_digest: str
    embedding_version: str


@dataclass(frozen=True)
class NamespaceTombstone:
    """A forgotten namespace whose vectors must still be dropped from the index."""

    namespace: Namespace


@dataclass(frozen=True)
class VectorPlacement:
    """Where one namespace's vectors live in the index."""

    collection: str
    partition: str


# Fields of a memory row that an update may set, with their column names.
UPDATABLE_COLUMNS = frozenset(
    {
        "ciphertext",
        "tags",
        "tier",
        "importance",
        "embedding_version",
        "retention_status",
        "superseded_by",
        "consistency",
        "expires_at",
        "score_reasons",
        "source_ids",
        "extraction_pending",
    }
)


@dataclass(frozen=True)
class MaintenanceUpdate:
    """New lifecycle values for one row, applied only if its revision is still `revision`.

    A tier change bumps the revision and marks the row for re-indexing (its vector carries the
    tier); decay alone does not. `version` is recorded when the update applies.
    """

    memory_id: str
    namespace_digest: str
    revision: int
    decay: float
    tier: Tier | None = None
    version: StoredVersion | None = None


@dataclass(frozen=True)
class UsageStats:
    """Percentiles of usage_count over a tenant's active memories, from the maintenance job."""

    tenant: str
    p50: float
    p90: float
    p99: float
    memories: int
    computed_at: float


class RecordSchema(Protocol):
    """The store's schema and connection: migrations, readiness, shutdown."""

    async def migrate(self) -> list[int]:
        """Apply pending schema migrations; return the versions applied."""
        ...

    async def check_schema(self) -> None:
        """Raise FailedPrecondition when migrations are pending."""
        ...

    async def ping(self) -> None:
        """Raise Unavailable when the store cannot answer."""
        ...

    async def close(self) -> None: ...


class MemoryRecords(Protocol):
    """Memory rows of one namespace: write, read, list, confirm and delete them."""

    async def insert_memories(
        self, rows: Sequence[StoredMemory], versions: Sequence[StoredVersion] = ()
    ) -> list[tuple[StoredMemory, bool]]:
        """Insert rows atomically. A row whose idempotency key exists yields the stored row and False.

        `versions` are recorded in the same transaction, each only if its memory was inserted.
        """
        ...

    async def fetch_memories(self, namespace: Namespace, ids: Sequence[str]) -> list[StoredMemory]:
        """The rows of `ids` that belong to `namespace`, in one query."""
        ...

    async def newest_memory_at(self, namespace: Namespace) -> float | None:
        """When the namespace's newest memory was created (`created_at`); None when it has none."""
        ...

    async def count_memories(self, namespace: Namespace) -> int:
        """How many memories the namespace holds, in every retention status."""
        ...

    async def session_neighbors(
        self, namespace: Namespace, ids: Sequence[str], window: int, include_inactive: bool = False
    ) -> list[StoredMemory]:
        """Up to `window` rows before and after each of `ids` in its session (by created_at, id), in one query.

        Rows of `ids` themselves and memories without a session are not returned.
        """
        ...

    async def update_memory(
        self,
        namespace: Namespace,
        memory_id: str,
        changes: Mapping[str, Any],
        now: float,
        version: StoredVersion | None = None,
    ) -> StoredMemory | None:
        """Apply column changes, bump the revision and mark the row for re-indexing.

        `version` is recorded in the same transaction when the row exists.
        """
        ...

    async def delete_memory(
        self, namespace: Namespace, memory_id: str, version: StoredVersion | None = None
    ) -> StoredMemory | None:
        """Delete a row and leave a vector tombstone; return the deleted row.

        The memory's versions go with it; `version` (the content-free record of the deletion)
        is kept in their place.
        """
        ...

    async def forget_namespace(self, namespace: Namespace) -> int:
        """Delete every row, event and data key of a namespace; leave a namespace tombstone."""
        ...

    async def list_memories(
        self,
        namespace: Namespace,
        memory_filter: MemoryFilter,
        after: PageCursor | None,
        limit: int,
    ) -> list[StoredMemory]:
        """Newest first, filtered by the row-level fields of the filter (not metadata)."""
        ...

    async def fetch_by_idempotency_keys(self, namespace: Namespace, keys: Sequence[str]) -> list[StoredMemory]:
        """The rows of `namespace` holding any of these idempotency keys."""
        ...

    async def existing_memory_ids(self, ids: Sequence[str]) -> set[str]:
        """Which of these ids any namespace already uses."""
        ...

    async def superseded_ids(self, namespace: Namespace, successor_id: str) -> list[str]:
        """The ids of the memories that `successor_id` superseded."""
        ...

    async def confirm_memory(
        self, namespace: Namespace, memory_id: str, now: float, version: StoredVersion
    ) -> StoredMemory | None:
        """confirmation_count++ and a version row, in one transaction; the vector is unchanged."""
        ...

    async def mark_stale(self, namespace: Namespace, memory_ids: Sequence[str], stale: bool) -> None:
        """Set or clear the stale mark of summaries; their revision and vector are unchanged."""
        ...

    async def mark_outdated(
        self, namespace: Namespace, outdated: Sequence[StoredVersion], successor_id: str, consistency_factor: float
    ) -> list[str]:
        """Mark the memories of these versions (one each, recording the change) as stating what
        `successor_id` replaced: `superseded_by` set, consistency multiplied by the factor;
        retention status, revision and vector unchanged. Memories already outdated are left as
        they are. Returns the ids marked."""
        ...


class VersionRecords(Protocol):
    """The history of memories: one version row per change."""

    async def list_versions(
        self, namespace: Namespace, memory_ids: Sequence[str], after_version: int, limit: int
    ) -> list[StoredVersion]:
        """Versions of these memories, by memory then version, after `after_version`."""
        ...


class IndexOutbox(Protocol):
    """Rows waiting for the vector index or for extraction (the outbox the indexer drains)."""

    async def mark_indexed(self, tickets: Sequence[IndexTicket]) -> None: ...

    async def pending_index(self, limit: int, older_than: float) -> list[StoredMemory]: ...

    async def count_pending_index(self) -> int: ...

    async def other_embedding_versions(self, version: str) -> list[str]:
        """The embedding versions other than `version` that stored memories were embedded by."""
        ...

    async def reembed_as(self, version: str) -> int:
        """Mark every memory embedded by another version as `version` and not indexed, so the
        reconciler embeds it again into this version's vectors; returns how many were marked."""
        ...

    async def pending_extractions(self, limit: int, older_than: float) -> list[StoredMemory]:
        """Conversation turns whose extraction is unfinished, last changed before `older_than`, oldest first."""
        ...

    async def clear_extraction_pending(self, memory_ids: Sequence[str]) -> None: ...


class TombstoneRecords(Protocol):
    """What the reconciler must still erase from the vector index."""

    async def pending_vector_deletes(self, limit: int) -> list[VectorTombstone]: ...

    async def clear_vector_tombstones(self, memory_ids: Sequence[str]) -> None: ...

    async def pending_namespace_drops(self, limit: int) -> list[NamespaceTombstone]: ...

    async def clear_namespace_tombstone(self, namespace: Namespace) -> None: ...


class UsageRecords(Protocol):
    """Recall and feedback bookkeeping, and the tenants' usage percentiles."""

    async def record_recalls(self, events: Sequence[RecallEvent]) -> None:
        """usage_count++, last_accessed_at and one memory_events row per event, in one transaction."""
        ...

    async def record_feedback(
        self, namespace: Namespace, request_id: str, used: Sequence[str], unused: Sequence[str], now: float
    ) -> list[str]:
        """Record used/unused reports once per (request, memory) and recompute vitality.

        Returns the ids recorded; unknown ids and repeated reports are skipped.
        """
        ...

    async def put_usage_stats(self, stats: Sequence[UsageStats]) -> None: ...

    async def get_usage_stats(self, tenant: str) -> UsageStats | None: ...


class MaintenanceRecords(Protocol):
    """The maintenance job's walk over every row and its compare-and-set updates."""

    async def scan_memories(self, after_id: str, limit: int) -> list[StoredMemory]:
        """Every namespace's rows in id order after `after_id` (for the maintenance job)."""
        ...

    async def apply_maintenance(self, updates: Sequence[MaintenanceUpdate], now: float) -> list[StoredMemory]:
        """Compare-and-set each update on its revision; return the rows whose tier changed."""
        ...

    async def prune_recall_events(self, namespace: Namespace, before: float, limit: int) -> int:
        """Delete up to `limit` of the namespace's 'recall' events older than `before`, oldest
        first, in one transaction; return how many went. Feedback events stay."""
        ...


class LeaseRecords(Protocol):
    """Named leases: one holder at a time across replicas."""

    async def acquire_lease(self, name: str, holder: str, now: float, ttl_s: float) -> bool:
        """Take (or renew) the named lease unless another holder's lease is unexpired."""
        ...

    async def release_lease(self, name: str, holder: str) -> None: ...


class ApiKeyRecords(Protocol):
    """API keys (their secrets only as hashes)."""

    async def insert_api_key(self, record: ApiKeyRecord) -> None: ...

    async def get_api_key(self, key_id: str) -> ApiKeyRecord | None: ...

    async def list_api_keys(self) -> list[ApiKeyRecord]: ...

    async def revoke_api_key(self, key_id: str, now: float) -> bool: ...


class DataKeyRecords(Protocol):
    """Wrapped per-namespace data keys, the wrapped key derivation root, and their re-wrapping
    under a new master key."""

    async def get_data_key(self, namespace: Namespace) -> WrappedDataKey | None: ...

    async def put_data_key_if_absent(self, namespace: Namespace, key: WrappedDataKey) -> WrappedDataKey: ...

    async def stale_data_keys(self, master_version: int, after: tuple[str, int], limit: int) -> list[StaleDataKey]:
        """Data keys not wrapped by `master_version`, ordered by (digest, version) after `after`."""
        ...

    async def rewrap_data_key(self, key: WrappedDataKey, master_version: int, wrapped: bytes) -> bool:
        """Replace the wrapping of `key` if it is still the stored one (compare-and-set)."""
        ...

    async def get_derivation_root(self) -> WrappedSecret | None: ...

    async def put_derivation_root_if_absent(self, root: WrappedSecret) -> WrappedSecret:
        """Store `root` unless one is stored already; return the stored one."""
        ...

    async def rewrap_derivation_root(self, current: WrappedSecret, replacement: WrappedSecret) -> bool:
        """Replace the stored root's wrapping if it is still `current` (compare-and-set)."""
        ...


class PlacementRecords(Protocol):
    """Where each namespace's vectors live in the index."""

    async def get_placement(self, namespace_digest: str, prefix: str) -> VectorPlacement | None: ...

    async def assign_placement(
        self, namespace_digest: str, prefix: str, partitions_per_collection: int
    ) -> VectorPlacement: ...


class WriteClockRecords(Protocol):
    """The Milvus timestamp of each namespace's last acknowledged vector write."""

    async def note_vector_write(self, namespace_digest: str, prefix: str, timestamp: int) -> None:
        """Keep the later of `timestamp` and the namespace's stored last vector write timestamp."""
        ...

    async def last_vector_write(self, namespace_digest: str, prefix: str) -> int | None:
        """The Milvus timestamp of the namespace's last acknowledged vector write, if any."""
        ...


class RecordStore(
    RecordSchema,
    MemoryRecords,
    VersionRecords,
    IndexOutbox,
    TombstoneRecords,
    UsageRecords,
    MaintenanceRecords,
    LeaseRecords,
    ApiKeyRecords,
    DataKeyRecords,
    PlacementRecords,
    WriteClockRecords,
    Protocol,
):
    """Everything memsvc keeps durably besides vectors: every area. Every method is one round trip.

    A component that uses one area depends on that area's protocol only.
    """
