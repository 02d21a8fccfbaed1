"""The record store's SQL, written once for SQLite and PostgreSQL.

`SqlRecordStore` holds every statement and the row mapping as programs (`memsvc.stores.sql`);
a backend subclass supplies the dialect and its connections, which run each program as one
transaction.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from memsvc.domain.models import (
    ApiKeyRecord,
    MemoryFilter,
    Namespace,
    RecallEvent,
    StoredMemory,
    StoredVersion,
    WrappedDataKey,
    WrappedSecret,
)
from memsvc.errors import FailedPrecondition, Unavailable
from memsvc.stores.records.base import (
    UPDATABLE_COLUMNS,
    IndexTicket,
    MaintenanceUpdate,
    NamespaceTombstone,
    PageCursor,
    UsageStats,
    VectorPlacement,
    VectorTombstone,
)
from memsvc.stores.records.datakeys import StaleDataKey, stale_data_key
from memsvc.stores.records.migrations import Migration
from memsvc.stores.records.rows import (
    API_KEY_COLUMNS,
    INSERT_MEMORY_ARITY,
    INSERT_MEMORY_COLUMNS,
    INSERT_VERSION_ARITY,
    INSERT_VERSION_COLUMNS,
    MEMORY_COLUMNS,
    VERSION_COLUMNS,
    api_key_from_row,
    api_key_to_params,
    changes_to_params,
    filter_sql,
    memory_from_row,
    memory_to_params,
    version_from_row,
    version_to_params,
    vitality_sql,
)
from memsvc.stores.sql import Program, SqlDialect, SqlTransactions, Statement, each, q

T = TypeVar("T")


def _marks(count: int) -> str:
    return ", ".join(["%s"] * count)


_LATEST_DATA_KEY = "SELECT version, master_version, wrapped FROM data_keys WHERE ns = %s ORDER BY version DESC LIMIT 1"
_DERIVATION_ROOT = "SELECT master_version, wrapped FROM derivation_root WHERE id = 1"
_PLACEMENT = "SELECT collection, partition_name FROM vector_placements WHERE ns = %s AND prefix = %s"
_USAGE_STATS_COLUMNS = "tenant, p50, p90, p99, memories, computed_at"
# A fetch of up to this many ids is a short read (a query's candidates: 20-100): by primary
# key, about 30 us a row with its decoding, so at most some 8 ms on the event loop.
_SHORT_FETCH_IDS = 256


def fetch_memories_statement(sql: SqlDialect, digest: str, ids: Sequence[str]) -> Statement:
    """The rows of `ids` within one namespace, looked up by id (see `SqlDialect.unindexed`)."""
    in_ids, values = sql.in_list("id", ids)
    return Statement(
        f"SELECT {memory_columns(sql)} FROM memories WHERE {sql.unindexed('ns')} = %s AND {in_ids}", (digest, *values)
    )


def memory_columns(sql: SqlDialect) -> str:
    """The select list of a memory row, tags as JSON text."""
    return MEMORY_COLUMNS.replace(", tags,", f", {sql.tags_text('tags')},")


class SqlRecordStore(ABC):
    """Every RecordStore method as SQL; each call is one transaction on the backend's connections."""

    def __init__(self, sql: SqlDialect, migrations: tuple[Migration, ...], db: SqlTransactions) -> None:
        self._sql = sql
        self._db = db
        self._migrations = migrations
        self._columns = memory_columns(sql)
        self._by_id = f"SELECT {self._columns} FROM memories WHERE ns = %s AND id = %s"

    @abstractmethod
    async def ping(self) -> None:
        """Raise Unavailable when the store cannot answer (each backend knows what that takes)."""

    async def close(self) -> None:
        await self._db.close()

    async def _read(self, program: Program[T], *, short: bool = False) -> T:
        """`short`: a few rows by index (see `SqlTransactions.transact`)."""
        return await self._db.transact(program, write=False, short=short)

    async def _write(self, program: Program[T]) -> T:
        return await self._db.transact(program, write=True)

    def _memories(self, sql: str, params: Sequence[Any]) -> Program[list[StoredMemory]]:
        return [memory_from_row(r) for r in (yield q(sql, params)).rows]

    def _insert_version(self, v: StoredVersion) -> Program[None]:
        """Record a version as the next number of its memory (callers hold the row's or the write lock)."""
        row = (
            yield q("SELECT COALESCE(MAX(version), 0) + 1 FROM memory_versions WHERE memory_id = %s", (v.memory_id,))
        ).first()
        number = 1 if row is None else int(row[0])
        yield q(
            f"INSERT INTO memory_versions ({INSERT_VERSION_COLUMNS}) VALUES ({_marks(INSERT_VERSION_ARITY)})",
            version_to_params(v, number),
        )

    def _update_memory_row(
        self, update: str, params: Sequence[Any], digest: str, memory_id: str
    ) -> Program[StoredMemory | None]:
        """Run an UPDATE of one memory row (`update` ends in its WHERE clause); the row if it changed."""
        if self._sql.returning:
            row = (yield q(f"{update} RETURNING {self._columns}", params)).first()
        else:
            changed = (yield q(update, params)).rowcount
            row = (yield q(self._by_id, (digest, memory_id))).first() if changed else None
        return None if row is None else memory_from_row(row)

    # -- schema -------------------------------------------------------------------------------

    async def migrate(self) -> list[int]:
        def apply() -> Program[list[int]]:
            lock = self._sql.migration_lock()
            if lock is not None:
                yield lock
            yield q(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                f"(version INTEGER PRIMARY KEY, applied_at {self._sql.real} NOT NULL)"
            )
            done = {row[0] for row in (yield q("SELECT version FROM schema_migrations")).rows}
            applied: list[int] = []
            for version, statements in self._migrations:
                if version in done:
                    continue
                for statement in statements:
                    yield q(statement)
                yield q("INSERT INTO schema_migrations (version, applied_at) VALUES (%s, %s)", (version, time.time()))
                applied.append(version)
            return applied

        return await self._db.transact(apply(), write=True, schema=True)

    async def check_schema(self) -> None:
        def applied() -> Program[set[int]]:
            exists = (yield q(self._sql.migrations_table_exists)).first()
            if exists is None or not exists[0]:
                return set()
            return {row[0] for row in (yield q("SELECT version FROM schema_migrations")).rows}

        done = await self._db.transact(applied(), write=False, schema=True)
        missing = [v for v, _ in self._migrations if v not in done]
        if missing:
            raise FailedPrecondition(f"schema migrations pending: {missing}; run `memsvc migrate`")

    # -- memories -----------------------------------------------------------------------------

    async def insert_memories(
        self, rows: Sequence[StoredMemory], versions: Sequence[StoredVersion] = ()
    ) -> list[tuple[StoredMemory, bool]]:
        def insert() -> Program[list[tuple[StoredMemory, bool]]]:
            out: list[tuple[StoredMemory, bool]] = []
            for row in rows:
                # ON CONFLICT waits for a concurrent insert of the same key to commit, then
                # skips; the next statement (a fresh snapshot) sees the winner's row.
                inserted = (
                    yield q(
                        f"INSERT INTO memories ({INSERT_MEMORY_COLUMNS}) VALUES ({_marks(INSERT_MEMORY_ARITY)}) "
                        "ON CONFLICT (ns, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING",
                        memory_to_params(row),
                    )
                ).rowcount
                if inserted:
                    out.append((row, True))
                    continue
                existing = (
                    yield q(
                        f"SELECT {self._columns} FROM memories WHERE ns = %s AND idempotency_key = %s",
                        (row.namespace.digest, row.idempotency_key),
                    )
                ).first()
                if existing is None:
                    raise Unavailable("an idempotent insert raced with a delete; retry", retry_after_s=0.1)
                out.append((memory_from_row(existing), False))
            created = {row.id for row, fresh in out if fresh}
            for version in versions:
                if version.memory_id in created:
                    yield from self._insert_version(version)
            return out

        return await self._write(insert())

    async def fetch_memories(self, namespace: Namespace, ids: Sequence[str]) -> list[StoredMemory]:
        if not ids:
            return []

        def fetch() -> Program[list[StoredMemory]]:
            rows = (yield fetch_memories_statement(self._sql, namespace.digest, ids)).rows
            return [memory_from_row(r, namespace) for r in rows]

        return await self._read(fetch(), short=len(ids) <= _SHORT_FETCH_IDS)

    async def newest_memory_at(self, namespace: Namespace) -> float | None:
        # The first entry of the index memories_ns_created (ns, created_at DESC, id DESC).
        sql = "SELECT MAX(created_at) FROM memories WHERE ns = %s"

        def newest() -> Program[float | None]:
            row = (yield q(sql, (namespace.digest,))).first()
            return None if row is None or row[0] is None else float(row[0])

        return await self._read(newest(), short=True)

    async def count_memories(self, namespace: Namespace) -> int:
        def count() -> Program[int]:
            row = (yield q("SELECT COUNT(*) FROM memories WHERE ns = %s", (namespace.digest,))).first()
            return 0 if row is None else int(row[0])

        return await self._read(count())

    async def session_neighbors(
        self, namespace: Namespace, ids: Sequence[str], window: int, include_inactive: bool = False
    ) -> list[StoredMemory]:
        if not ids or window <= 0:
            return []
        in_ids, id_values = self._sql.in_list("id", ids)
        anchors_ns = self._sql.unindexed("ns")
        return await self._read(
            self._memories(
                f"""WITH anchors AS (
                        SELECT id, session_id FROM memories WHERE {anchors_ns} = %s AND {in_ids} AND session_id <> ''
                    ), session_rows AS (
                        SELECT m.id, m.session_id,
                               ROW_NUMBER() OVER (PARTITION BY m.session_id ORDER BY m.created_at, m.id) AS pos
                        FROM memories m
                        WHERE m.ns = %s AND m.session_id IN (SELECT session_id FROM anchors)
                          AND (%s OR m.retention_status = 'active' OR m.id IN (SELECT id FROM anchors))
                    ), anchor_pos AS (
                        SELECT s.session_id, s.pos FROM session_rows s JOIN anchors a ON a.id = s.id
                    )
                    SELECT {self._columns} FROM memories WHERE id IN (
                        SELECT s.id FROM session_rows s JOIN anchor_pos p
                          ON s.session_id = p.session_id AND s.pos BETWEEN p.pos - %s AND p.pos + %s
                    ) AND NOT ({in_ids}) ORDER BY created_at, id""",
                (namespace.digest, *id_values, namespace.digest, include_inactive, window, window, *id_values),
            )
        )

    async def update_memory(
        self,
        namespace: Namespace,
        memory_id: str,
        changes: Mapping[str, Any],
        now: float,
        version: StoredVersion | None = None,
    ) -> StoredMemory | None:
        unknown = set(changes) - UPDATABLE_COLUMNS
        if unknown:
            raise ValueError(f"not updatable: {sorted(unknown)}")
        params = changes_to_params(changes)
        sets = "".join(f"{column} = %s, " for column in params)

        def update() -> Program[StoredMemory | None]:
            memory = yield from self._update_memory_row(
                f"UPDATE memories SET {sets}updated_at = %s, revision = revision + 1, indexed = 0 "
                "WHERE ns = %s AND id = %s",
                (*params.values(), now, namespace.digest, memory_id),
                namespace.digest,
                memory_id,
            )
            if memory is not None and version is not None:
                yield from self._insert_version(version)
            return memory

        return await self._write(update())

    async def delete_memory(
        self, namespace: Namespace, memory_id: str, version: StoredVersion | None = None
    ) -> StoredMemory | None:
        digest = namespace.digest

        def delete() -> Program[StoredMemory | None]:
            if self._sql.returning:
                row = (
                    yield q(
                        f"DELETE FROM memories WHERE ns = %s AND id = %s RETURNING {self._columns}", (digest, memory_id)
                    )
                ).first()
            else:
                row = (yield q(self._by_id, (digest, memory_id))).first()
                if row is not None:
                    yield q("DELETE FROM memories WHERE id = %s", (memory_id,))
            if row is None:
                return None
            memory = memory_from_row(row)
            yield q(
                "INSERT INTO vector_tombstones (memory_id, ns, embedding_version, at) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (memory_id) DO UPDATE SET ns = excluded.ns, "
                "embedding_version = excluded.embedding_version, at = excluded.at",
                (memory_id, digest, memory.embedding_version, time.time()),
            )
            yield q("DELETE FROM memory_versions WHERE memory_id = %s AND ns = %s", (memory_id, digest))
            if version is not None:
                yield from self._insert_version(version)
            return memory

        return await self._write(delete())

    async def forget_namespace(self, namespace: Namespace) -> int:
        digest = namespace.digest

        def forget() -> Program[int]:
            count = (yield q("DELETE FROM memories WHERE ns = %s", (digest,))).rowcount
            for table in ("memory_events", "memory_versions", "data_keys", "vector_tombstones", "vector_write_clock"):
                yield q(f"DELETE FROM {table} WHERE ns = %s", (digest,))
            yield q(
                "INSERT INTO namespace_tombstones (ns, tenant, project, environment, user_id, at) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (ns) DO UPDATE SET at = excluded.at",
                (digest, namespace.tenant, namespace.project, namespace.environment, namespace.user_id, time.time()),
            )
            return int(count)

        return await self._write(forget())

    async def list_memories(
        self, namespace: Namespace, memory_filter: MemoryFilter, after: PageCursor | None, limit: int
    ) -> list[StoredMemory]:
        where, params = filter_sql(memory_filter, "%s", self._sql.tags_any)
        clauses = ["ns = %s"] + ([where] if where else [])
        values: list[Any] = [namespace.digest, *params]
        if after is not None:
            clauses.append("(created_at < %s OR (created_at = %s AND id < %s))")
            values.extend([after.created_at, after.created_at, after.memory_id])
        return await self._read(
            self._memories(
                f"SELECT {self._columns} FROM memories WHERE {' AND '.join(clauses)} "
                "ORDER BY created_at DESC, id DESC LIMIT %s",
                (*values, limit),
            )
        )

    async def fetch_by_idempotency_keys(self, namespace: Namespace, keys: Sequence[str]) -> list[StoredMemory]:
        if not keys:
            return []
        in_keys, values = self._sql.in_list("idempotency_key", keys)
        return await self._read(
            self._memories(
                f"SELECT {self._columns} FROM memories WHERE ns = %s AND {in_keys}", (namespace.digest, *values)
            )
        )

    async def existing_memory_ids(self, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        in_ids, values = self._sql.in_list("id", ids)

        def fetch() -> Program[set[str]]:
            return {r[0] for r in (yield q(f"SELECT id FROM memories WHERE {in_ids}", (*values,))).rows}

        return await self._read(fetch())

    async def superseded_ids(self, namespace: Namespace, successor_id: str) -> list[str]:
        def fetch() -> Program[list[str]]:
            sql = "SELECT id FROM memories WHERE ns = %s AND superseded_by = %s ORDER BY id"
            return [r[0] for r in (yield q(sql, (namespace.digest, successor_id))).rows]

        return await self._read(fetch())

    async def confirm_memory(
        self, namespace: Namespace, memory_id: str, now: float, version: StoredVersion
    ) -> StoredMemory | None:
        def confirm() -> Program[StoredMemory | None]:
            memory = yield from self._update_memory_row(
                "UPDATE memories SET confirmation_count = confirmation_count + 1, updated_at = %s "
                "WHERE ns = %s AND id = %s",
                (now, namespace.digest, memory_id),
                namespace.digest,
                memory_id,
            )
            if memory is not None:
                yield from self._insert_version(version)
            return memory

        return await self._write(confirm())

    async def mark_stale(self, namespace: Namespace, memory_ids: Sequence[str], stale: bool) -> None:
        if not memory_ids:
            return

        def mark() -> Program[None]:
            yield each(
                "UPDATE memories SET stale = %s WHERE ns = %s AND id = %s",
                [(int(stale), namespace.digest, i) for i in memory_ids],
            )

        await self._write(mark())

    async def mark_outdated(
        self, namespace: Namespace, outdated: Sequence[StoredVersion], successor_id: str, consistency_factor: float
    ) -> list[str]:
        def mark() -> Program[list[str]]:
            marked = []
            for version in outdated:
                changed = (
                    yield q(
                        "UPDATE memories SET superseded_by = %s, consistency = consistency * %s "
                        "WHERE ns = %s AND id = %s AND superseded_by = ''",
                        (successor_id, consistency_factor, namespace.digest, version.memory_id),
                    )
                ).rowcount
                if changed:
                    yield from self._insert_version(version)
                    marked.append(version.memory_id)
            return marked

        return await self._write(mark())

    # -- versions -----------------------------------------------------------------------------

    async def list_versions(
        self, namespace: Namespace, memory_ids: Sequence[str], after_version: int, limit: int
    ) -> list[StoredVersion]:
        if not memory_ids:
            return []
        in_ids, values = self._sql.in_list("memory_id", memory_ids)

        def listing() -> Program[list[StoredVersion]]:
            rows = (
                yield q(
                    f"SELECT {VERSION_COLUMNS} FROM memory_versions WHERE ns = %s AND {in_ids} "
                    "AND version > %s ORDER BY memory_id, version LIMIT %s",
                    (namespace.digest, *values, after_version, limit),
                )
            ).rows
            return [version_from_row(r) for r in rows]

        return await self._read(listing())

    # -- outbox -------------------------------------------------------------------------------

    async def mark_indexed(self, tickets: Sequence[IndexTicket]) -> None:
        if not tickets:
            return

        def mark() -> Program[None]:
            yield each(
                "UPDATE memories SET indexed = 1 WHERE id = %s AND revision = %s",
                [(t.memory_id, t.revision) for t in tickets],
            )

        await self._write(mark())

    async def pending_index(self, limit: int, older_than: float) -> list[StoredMemory]:
        return await self._read(
            self._memories(
                f"SELECT {self._columns} FROM memories WHERE indexed = 0 AND updated_at <= %s "
                "ORDER BY updated_at LIMIT %s",
                (older_than, limit),
            )
        )

    async def count_pending_index(self) -> int:
        def count() -> Program[int]:
            row = (yield q("SELECT COUNT(*) FROM memories WHERE indexed = 0")).first()
            return 0 if row is None else int(row[0])

        return await self._read(count())

    async def other_embedding_versions(self, version: str) -> list[str]:
        def versions() -> Program[list[str]]:
            rows = (
                yield q("SELECT DISTINCT embedding_version FROM memories WHERE embedding_version <> %s", (version,))
            ).rows
            return sorted(str(r[0]) for r in rows)

        return await self._read(versions())

    async def reembed_as(self, version: str) -> int:
        def mark() -> Program[int]:
            result = yield q(
                "UPDATE memories SET embedding_version = %s, indexed = 0 WHERE embedding_version <> %s",
                (version, version),
            )
            return result.rowcount

        return await self._write(mark())

    async def pending_extractions(self, limit: int, older_than: float) -> list[StoredMemory]:
        return await self._read(
            self._memories(
                f"SELECT {self._columns} FROM memories WHERE extraction_pending = 1 AND updated_at <= %s "
                "ORDER BY updated_at, created_at LIMIT %s",
                (older_than, limit),
            )
        )

    async def clear_extraction_pending(self, memory_ids: Sequence[str]) -> None:
        if not memory_ids:
            return

        def clear() -> Program[None]:
            yield each("UPDATE memories SET extraction_pending = 0 WHERE id = %s", [(i,) for i in memory_ids])

        await self._write(clear())

    # -- tombstones ---------------------------------------------------------------------------

    async def pending_vector_deletes(self, limit: int) -> list[VectorTombstone]:
        def pending() -> Program[list[VectorTombstone]]:
            sql = "SELECT memory_id, ns, embedding_version FROM vector_tombstones ORDER BY at LIMIT %s"
            return [VectorTombstone(r[0], r[1], r[2]) for r in (yield q(sql, (limit,))).rows]

        return await self._read(pending())

    async def clear_vector_tombstones(self, memory_ids: Sequence[str]) -> None:
        if not memory_ids:
            return
        in_ids, values = self._sql.in_list("memory_id", memory_ids)

        def clear() -> Program[None]:
            yield q(f"DELETE FROM vector_tombstones WHERE {in_ids}", (*values,))

        await self._write(clear())

    async def pending_namespace_drops(self, limit: int) -> list[NamespaceTombstone]:
        def pending() -> Program[list[NamespaceTombstone]]:
            sql = "SELECT tenant, project, environment, user_id FROM namespace_tombstones ORDER BY at LIMIT %s"
            return [NamespaceTombstone(Namespace(*r)) for r in (yield q(sql, (limit,))).rows]

        return await self._read(pending())

    async def clear_namespace_tombstone(self, namespace: Namespace) -> None:
        def clear() -> Program[None]:
            yield q("DELETE FROM namespace_tombstones WHERE ns = %s", (namespace.digest,))
            # The vectors are erased: the drop's write clock has nothing left to guard.
            yield q("DELETE FROM vector_write_clock WHERE ns = %s", (namespace.digest,))

        await self._write(clear())

    # -- usage --------------------------------------------------------------------------------

    async def record_recalls(self, events: Sequence[RecallEvent]) -> None:
        if not events:
            return

        # One UPDATE per memory however often the batch recalled it: the hot ones recur.
        recalled: dict[tuple[str, str], tuple[int, float]] = {}
        for e in events:
            key = (e.memory_id, e.namespace.digest)
            count, last = recalled.get(key, (0, e.at))
            recalled[key] = (count + 1, max(last, e.at))

        def record() -> Program[None]:
            yield each(
                f"UPDATE memories SET usage_count = usage_count + %s, last_accessed_at = "
                f"{self._sql.greatest}(COALESCE(last_accessed_at, 0), %s) WHERE id = %s AND ns = %s",
                [(count, last, memory_id, digest) for (memory_id, digest), (count, last) in recalled.items()],
            )
            yield each(
                "INSERT INTO memory_events (memory_id, ns, event, request_id, score, rank, at) "
                "VALUES (%s, %s, 'recall', %s, %s, %s, %s)",
                [(e.memory_id, e.namespace.digest, e.request_id, e.score, e.rank, e.at) for e in events],
            )

        await self._write(record())

    async def record_feedback(
        self, namespace: Namespace, request_id: str, used: Sequence[str], unused: Sequence[str], now: float
    ) -> list[str]:
        digest = namespace.digest

        def record() -> Program[list[str]]:
            recorded: list[str] = []
            for event, column, ids in (("used", "feedback_used", used), ("unused", "feedback_unused", unused)):
                for memory_id in dict.fromkeys(ids):
                    if self._sql.row_locks:
                        # Lock the row first: concurrent reports of one (request, memory) serialise here.
                        locked = yield q(
                            "SELECT 1 FROM memories WHERE ns = %s AND id = %s FOR UPDATE", (digest, memory_id)
                        )
                        if locked.first() is None:
                            continue
                    # The event condition is the partial index's (memory_events_feedback), word for word.
                    seen = (
                        yield q(
                            "SELECT 1 FROM memory_events WHERE ns = %s AND request_id = %s AND memory_id = %s "
                            "AND event IN ('used', 'unused')",
                            (digest, request_id, memory_id),
                        )
                    ).first()
                    if seen is not None:
                        continue
                    counted = (
                        yield q(
                            f"UPDATE memories SET {column} = {column} + 1 WHERE ns = %s AND id = %s",
                            (digest, memory_id),
                        )
                    ).rowcount
                    if not counted:
                        continue
                    yield q(f"UPDATE memories SET vitality = {vitality_sql()} WHERE id = %s", (memory_id,))
                    yield q(
                        "INSERT INTO memory_events (memory_id, ns, event, request_id, at) VALUES (%s, %s, %s, %s, %s)",
                        (memory_id, digest, event, request_id, now),
                    )
                    recorded.append(memory_id)
            return recorded

        return await self._write(record())

    async def prune_recall_events(self, namespace: Namespace, before: float, limit: int) -> int:
        # The (ns, at) index finds them; the limit keeps each transaction, and the database lock
        # it holds, short however many accumulated.
        def prune() -> Program[int]:
            return (
                yield q(
                    "DELETE FROM memory_events WHERE id IN (SELECT id FROM memory_events "
                    "WHERE ns = %s AND at < %s AND event = 'recall' ORDER BY at LIMIT %s)",
                    (namespace.digest, before, limit),
                )
            ).rowcount

        return int(await self._write(prune()))

    async def put_usage_stats(self, stats: Sequence[UsageStats]) -> None:
        if not stats:
            return

        def put() -> Program[None]:
            yield each(
                f"INSERT INTO tenant_usage_stats ({_USAGE_STATS_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (tenant) DO UPDATE SET p50 = excluded.p50, p90 = excluded.p90, p99 = excluded.p99, "
                "memories = excluded.memories, computed_at = excluded.computed_at",
                [(s.tenant, s.p50, s.p90, s.p99, s.memories, s.computed_at) for s in stats],
            )

        await self._write(put())

    async def get_usage_stats(self, tenant: str) -> UsageStats | None:
        def get() -> Program[UsageStats | None]:
            row = (
                yield q(f"SELECT {_USAGE_STATS_COLUMNS} FROM tenant_usage_stats WHERE tenant = %s", (tenant,))
            ).first()
            return None if row is None else UsageStats(row[0], row[1], row[2], row[3], int(row[4]), row[5])

        return await self._read(get())

    # -- maintenance --------------------------------------------------------------------------

    async def scan_memories(self, after_id: str, limit: int) -> list[StoredMemory]:
        return await self._read(
            self._memories(
                f"SELECT {self._columns} FROM memories WHERE id > %s ORDER BY id LIMIT %s", (after_id, limit)
            )
        )

    async def apply_maintenance(self, updates: Sequence[MaintenanceUpdate], now: float) -> list[StoredMemory]:
        if not updates:
            return []

        def apply() -> Program[list[StoredMemory]]:
            moved: list[StoredMemory] = []
            for u in updates:
                if u.tier is None:
                    yield q(
                        "UPDATE memories SET decay = %s WHERE id = %s AND ns = %s AND revision = %s",
                        (u.decay, u.memory_id, u.namespace_digest, u.revision),
                    )
                    continue
                memory = yield from self._update_memory_row(
                    "UPDATE memories SET decay = %s, tier = %s, revision = revision + 1, indexed = 0, updated_at = %s "
                    "WHERE id = %s AND ns = %s AND revision = %s",
                    (u.decay, u.tier.value, now, u.memory_id, u.namespace_digest, u.revision),
                    u.namespace_digest,
                    u.memory_id,
                )
                if memory is not None:
                    moved.append(memory)
                    if u.version is not None:
                        yield from self._insert_version(u.version)
            return moved

        return await self._write(apply())

    # -- leases -------------------------------------------------------------------------------

    async def acquire_lease(self, name: str, holder: str, now: float, ttl_s: float) -> bool:
        upsert = (
            "INSERT INTO maintenance_leases (name, holder, expires_at) VALUES (%s, %s, %s) "
            "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at "
            "WHERE maintenance_leases.holder = excluded.holder OR maintenance_leases.expires_at <= %s"
        )

        def acquire() -> Program[bool]:
            if self._sql.returning:
                return (yield q(f"{upsert} RETURNING holder", (name, holder, now + ttl_s, now))).first() is not None
            yield q(upsert, (name, holder, now + ttl_s, now))
            row = (yield q("SELECT holder FROM maintenance_leases WHERE name = %s", (name,))).first()
            return bool(row is not None and row[0] == holder)

        return await self._write(acquire())

    async def release_lease(self, name: str, holder: str) -> None:
        def release() -> Program[None]:
            yield q("DELETE FROM maintenance_leases WHERE name = %s AND holder = %s", (name, holder))

        await self._write(release())

    # -- API keys -----------------------------------------------------------------------------

    async def insert_api_key(self, record: ApiKeyRecord) -> None:
        def insert() -> Program[None]:
            yield q(f"INSERT INTO api_keys ({API_KEY_COLUMNS}) VALUES ({_marks(10)})", api_key_to_params(record))

        await self._write(insert())

    async def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        def get() -> Program[ApiKeyRecord | None]:
            row = (yield q(f"SELECT {API_KEY_COLUMNS} FROM api_keys WHERE key_id = %s", (key_id,))).first()
            return None if row is None else api_key_from_row(row)

        return await self._read(get(), short=True)

    async def list_api_keys(self) -> list[ApiKeyRecord]:
        def listing() -> Program[list[ApiKeyRecord]]:
            return [
                api_key_from_row(r)
                for r in (yield q(f"SELECT {API_KEY_COLUMNS} FROM api_keys ORDER BY created_at")).rows
            ]

        return await self._read(listing())

    async def revoke_api_key(self, key_id: str, now: float) -> bool:
        def revoke() -> Program[bool]:
            sql = "UPDATE api_keys SET revoked_at = %s WHERE key_id = %s AND revoked_at IS NULL"
            return (yield q(sql, (now, key_id))).rowcount > 0

        return await self._write(revoke())

    # -- data keys ----------------------------------------------------------------------------

    async def get_data_key(self, namespace: Namespace) -> WrappedDataKey | None:
        def get() -> Program[WrappedDataKey | None]:
            row = (yield q(_LATEST_DATA_KEY, (namespace.digest,))).first()
            return None if row is None else WrappedDataKey(namespace.digest, row[0], row[1], bytes(row[2]))

        return await self._read(get())

    async def put_data_key_if_absent(self, namespace: Namespace, key: WrappedDataKey) -> WrappedDataKey:
        def put() -> Program[WrappedDataKey]:
            yield q(
                "INSERT INTO data_keys (ns, version, master_version, wrapped, created_at) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (ns, version) DO NOTHING",
                (namespace.digest, key.version, key.master_version, key.wrapped, time.time()),
            )
            row = (yield q(_LATEST_DATA_KEY, (namespace.digest,))).first()
            if row is None:  # only a concurrent forget can remove it between the two statements
                raise Unavailable("the data key was removed concurrently; retry", retry_after_s=0.1)
            return WrappedDataKey(namespace.digest, row[0], row[1], bytes(row[2]))

        return await self._write(put())

    async def stale_data_keys(self, master_version: int, after: tuple[str, int], limit: int) -> list[StaleDataKey]:
        sep = f"{self._sql.chr}(31)"

        def stale() -> Program[list[StaleDataKey]]:
            rows = (
                yield q(
                    f"SELECT d.ns, d.version, d.master_version, d.wrapped, (SELECT m.tenant || {sep} || m.project "
                    f"|| {sep} || m.environment || {sep} || m.user_id FROM memories m WHERE m.ns = d.ns LIMIT 1) "
                    "FROM data_keys d WHERE d.master_version <> %s AND (d.ns, d.version) > (%s, %s) "
                    "ORDER BY d.ns, d.version LIMIT %s",
                    (master_version, after[0], after[1], limit),
                )
            ).rows
            return [stale_data_key(r) for r in rows]

        return await self._read(stale())

    async def rewrap_data_key(self, key: WrappedDataKey, master_version: int, wrapped: bytes) -> bool:
        def rewrap() -> Program[bool]:
            changed = yield q(
                "UPDATE data_keys SET master_version = %s, wrapped = %s "
                "WHERE ns = %s AND version = %s AND master_version = %s AND wrapped = %s",
                (master_version, wrapped, key.namespace_digest, key.version, key.master_version, key.wrapped),
            )
            return changed.rowcount > 0

        return await self._write(rewrap())

    async def get_derivation_root(self) -> WrappedSecret | None:
        def get() -> Program[WrappedSecret | None]:
            row = (yield q(_DERIVATION_ROOT, ())).first()
            return None if row is None else WrappedSecret(int(row[0]), bytes(row[1]))

        return await self._read(get())

    async def put_derivation_root_if_absent(self, root: WrappedSecret) -> WrappedSecret:
        def put() -> Program[WrappedSecret]:
            yield q(
                "INSERT INTO derivation_root (id, master_version, wrapped) VALUES (1, %s, %s) "
                "ON CONFLICT (id) DO NOTHING",
                (root.master_version, root.wrapped),
            )
            row = (yield q(_DERIVATION_ROOT, ())).first()
            assert row is not None  # nothing deletes it
            return WrappedSecret(int(row[0]), bytes(row[1]))

        return await self._write(put())

    async def rewrap_derivation_root(self, current: WrappedSecret, replacement: WrappedSecret) -> bool:
        def rewrap() -> Program[bool]:
            changed = yield q(
                "UPDATE derivation_root SET master_version = %s, wrapped = %s "
                "WHERE id = 1 AND master_version = %s AND wrapped = %s",
                (replacement.master_version, replacement.wrapped, current.master_version, current.wrapped),
            )
            return changed.rowcount > 0

        return await self._write(rewrap())

    # -- vector placement and write clock ----------------------------------------------------

    async def get_placement(self, namespace_digest: str, prefix: str) -> VectorPlacement | None:
        def get() -> Program[VectorPlacement | None]:
            row = (yield q(_PLACEMENT, (namespace_digest, prefix))).first()
            return None if row is None else VectorPlacement(row[0], row[1])

        return await self._read(get(), short=True)

    async def assign_placement(
        self, namespace_digest: str, prefix: str, partitions_per_collection: int
    ) -> VectorPlacement:
        def assign() -> Program[VectorPlacement]:
            lock = self._sql.placement_lock(prefix)
            if lock is not None:
                yield lock
            existing = (yield q(_PLACEMENT, (namespace_digest, prefix))).first()
            if existing is not None:
                return VectorPlacement(existing[0], existing[1])
            row = (
                yield q(
                    "SELECT shard, COUNT(*) FROM vector_placements WHERE prefix = %s GROUP BY shard "
                    "ORDER BY shard DESC LIMIT 1",
                    (prefix,),
                )
            ).first()
            shard = 0 if row is None else (row[0] if row[1] < partitions_per_collection else row[0] + 1)
            placement = VectorPlacement(f"{prefix}_s{shard:04d}", f"p_{namespace_digest}")
            yield q(
                "INSERT INTO vector_placements (ns, prefix, shard, collection, partition_name) "
                "VALUES (%s, %s, %s, %s, %s)",
                (namespace_digest, prefix, shard, placement.collection, placement.partition),
            )
            return placement

        return await self._write(assign())

    async def note_vector_write(self, namespace_digest: str, prefix: str, timestamp: int) -> None:
        def note() -> Program[None]:
            yield q(
                "INSERT INTO vector_write_clock (ns, prefix, ts) VALUES (%s, %s, %s) ON CONFLICT (ns, prefix) "
                f"DO UPDATE SET ts = {self._sql.greatest}(vector_write_clock.ts, excluded.ts)",
                (namespace_digest, prefix, timestamp),
            )

        await self._write(note())

    async def last_vector_write(self, namespace_digest: str, prefix: str) -> int | None:
        def last() -> Program[int | None]:
            row = (
                yield q("SELECT ts FROM vector_write_clock WHERE ns = %s AND prefix = %s", (namespace_digest, prefix))
            ).first()
            return None if row is None else int(row[0])

        return await self._read(last(), short=True)
