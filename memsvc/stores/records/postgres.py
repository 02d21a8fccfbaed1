"""PostgreSQL record store (psycopg 3, async connection pool): the store of many replicas."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import psycopg
from psycopg import AsyncConnection

from memsvc.domain.models import (
    ApiKeyRecord,
    MemoryFilter,
    Namespace,
    RecallEvent,
    StoredMemory,
    StoredVersion,
    WrappedDataKey,
)
from memsvc.errors import FailedPrecondition, Unavailable
from memsvc.stores.postgres_pool import PostgresPool
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
from memsvc.stores.records.migrations import POSTGRES_MIGRATIONS
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

log = logging.getLogger(__name__)

# Tags are JSONB here; rows.py parses them from their JSON text, as SQLite stores them.
_SELECT_MEMORY = MEMORY_COLUMNS.replace(", tags,", ", tags::text,")
assert _SELECT_MEMORY != MEMORY_COLUMNS
_INSERT_MEMORY = (
    f"INSERT INTO memories ({INSERT_MEMORY_COLUMNS}) VALUES ({', '.join(['%s'] * INSERT_MEMORY_ARITY)}) "
    "ON CONFLICT (ns, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING RETURNING id"
)
# Serialises migrators (every replica's Job may run at once) and shard assignment per prefix.
_MIGRATION_LOCK = 0x6D656D737663  # "memsvc"
_LATEST_DATA_KEY = "SELECT version, master_version, wrapped FROM data_keys WHERE ns = %s ORDER BY version DESC LIMIT 1"


def _tags_any_sql(n: int) -> str:
    return f"tags ?| ARRAY[{', '.join(['%s::text'] * n)}]"


async def _insert_version(conn: AsyncConnection[Any], v: StoredVersion) -> None:
    """Record a version as the next number of its memory; callers hold the memory row's lock."""
    cur = await conn.execute(
        "SELECT COALESCE(MAX(version), 0) + 1 FROM memory_versions WHERE memory_id = %s", (v.memory_id,)
    )
    row = await cur.fetchone()
    number = int(row[0]) if row is not None else 1
    await conn.execute(
        f"INSERT INTO memory_versions ({INSERT_VERSION_COLUMNS}) VALUES ({', '.join(['%s'] * INSERT_VERSION_ARITY)})",
        version_to_params(v, number),
    )


class PostgresRecordStore:
    """Record store on PostgreSQL. Each method is one transaction on a pooled connection."""

    def __init__(self, url: str, *, max_connections: int = 10, timeout_s: float = 5.0) -> None:
        self._db = PostgresPool(
            url, max_connections=max_connections, timeout_s=timeout_s, name="memsvc-records", what="record store"
        )
        self._timeout_s = timeout_s

    # -- plumbing -----------------------------------------------------------------------------

    def _tx(self, *, pooled: bool = True) -> AbstractAsyncContextManager[AsyncConnection[Any]]:
        return self._db.connection(pooled=pooled)

    async def close(self) -> None:
        await self._db.close()

    # -- schema -------------------------------------------------------------------------------

    async def migrate(self) -> list[int]:
        async with self._tx(pooled=False) as conn:
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
            )
            cur = await conn.execute("SELECT version FROM schema_migrations")
            done = {row[0] for row in await cur.fetchall()}
            applied: list[int] = []
            for version, statements in POSTGRES_MIGRATIONS:
                if version in done:
                    continue
                for statement in statements:
                    await conn.execute(statement)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, applied_at) VALUES (%s, %s)", (version, time.time())
                )
                applied.append(version)
            return applied

    async def check_schema(self) -> None:
        async with self._tx(pooled=False) as conn:
            cur = await conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL")
            row = await cur.fetchone()
            done: set[int] = set()
            if row is not None and row[0]:
                cur = await conn.execute("SELECT version FROM schema_migrations")
                done = {r[0] for r in await cur.fetchall()}
        missing = [v for v, _ in POSTGRES_MIGRATIONS if v not in done]
        if missing:
            raise FailedPrecondition(f"schema migrations pending: {missing}; run `memsvc migrate`")

    async def ping(self) -> None:
        async def select_one() -> None:
            async with self._tx() as conn:
                await conn.execute("SELECT 1")

        try:
            # Readiness must answer even when the server accepts connections but never replies.
            await asyncio.wait_for(select_one(), self._timeout_s)
        except (TimeoutError, psycopg.Error) as exc:
            raise Unavailable("the record store is unavailable", retry_after_s=1.0) from exc

    # -- memories -----------------------------------------------------------------------------

    async def insert_memories(
        self, rows: Sequence[StoredMemory], versions: Sequence[StoredVersion] = ()
    ) -> list[tuple[StoredMemory, bool]]:
        out: list[tuple[StoredMemory, bool]] = []
        async with self._tx() as conn:
            for row in rows:
                # ON CONFLICT waits for a concurrent insert of the same key to commit, then
                # skips; the next statement (a fresh snapshot) sees the winner's row.
                cur = await conn.execute(_INSERT_MEMORY, memory_to_params(row))
                if await cur.fetchone() is not None:
                    out.append((row, True))
                    continue
                cur = await conn.execute(
                    f"SELECT {_SELECT_MEMORY} FROM memories WHERE ns = %s AND idempotency_key = %s",
                    (row.namespace.digest, row.idempotency_key),
                )
                existing = await cur.fetchone()
                if existing is None:
                    raise Unavailable("an idempotent insert raced with a delete; retry", retry_after_s=0.1)
                out.append((memory_from_row(existing), False))
            created = {row.id for row, fresh in out if fresh}
            for version in versions:
                if version.memory_id in created:
                    await _insert_version(conn, version)
        return out

    async def fetch_memories(self, namespace: Namespace, ids: Sequence[str]) -> list[StoredMemory]:
        if not ids:
            return []
        async with self._tx() as conn:
            cur = await conn.execute(
                f"SELECT {_SELECT_MEMORY} FROM memories WHERE ns = %s AND id = ANY(%s)", (namespace.digest, list(ids))
            )
            return [memory_from_row(r) for r in await cur.fetchall()]

    async def session_neighbors(
        self, namespace: Namespace, ids: Sequence[str], window: int, include_inactive: bool = False
    ) -> list[StoredMemory]:
        if not ids or window <= 0:
            return []
        async with self._tx() as conn:
            cur = await conn.execute(
                f"""WITH anchors AS (
                        SELECT id, session_id FROM memories WHERE ns = %s AND id = ANY(%s) AND session_id <> ''
                    ), session_rows AS (
                        SELECT m.id, m.session_id,
                               ROW_NUMBER() OVER (PARTITION BY m.session_id ORDER BY m.created_at, m.id) AS pos
                        FROM memories m
                        WHERE m.ns = %s AND m.session_id IN (SELECT session_id FROM anchors)
                          AND (%s OR m.retention_status = 'active' OR m.id IN (SELECT id FROM anchors))
                    ), anchor_pos AS (
                        SELECT s.session_id, s.pos FROM session_rows s JOIN anchors a ON a.id = s.id
                    )
                    SELECT {_SELECT_MEMORY} FROM memories WHERE id IN (
                        SELECT s.id FROM session_rows s JOIN anchor_pos p
                          ON s.session_id = p.session_id AND s.pos BETWEEN p.pos - %s AND p.pos + %s
                    ) AND NOT (id = ANY(%s)) ORDER BY created_at, id""",
                (namespace.digest, list(ids), namespace.digest, include_inactive, window, window, list(ids)),
            )
            return [memory_from_row(r) for r in await cur.fetchall()]

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
        sets = ", ".join(f"{column} = %s" for column in params)
        prefix = f"{sets}, " if sets else ""
        async with self._tx() as conn:
            cur = await conn.execute(
                f"UPDATE memories SET {prefix}updated_at = %s, revision = revision + 1, indexed = 0 "
                f"WHERE ns = %s AND id = %s RETURNING {_SELECT_MEMORY}",
                (*params.values(), now, namespace.digest, memory_id),
            )
            row = await cur.fetchone()
            if row is not None and version is not None:
                await _insert_version(conn, version)
        return None if row is None else memory_from_row(row)

    async def delete_memory(
        self, namespace: Namespace, memory_id: str, version: StoredVersion | None = None
    ) -> StoredMemory | None:
        async with self._tx() as conn:
            cur = await conn.execute(
                f"DELETE FROM memories WHERE ns = %s AND id = %s RETURNING {_SELECT_MEMORY}",
                (namespace.digest, memory_id),
            )
            row = await cur.fetchone()
            if row is None:
                return None
            memory = memory_from_row(row)
            await conn.execute(
                "INSERT INTO vector_tombstones (memory_id, ns, embedding_version, at) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (memory_id) DO UPDATE SET ns = excluded.ns, "
                "embedding_version = excluded.embedding_version, at = excluded.at",
                (memory_id, namespace.digest, memory.embedding_version, time.time()),
            )
            await conn.execute(
                "DELETE FROM memory_versions WHERE memory_id = %s AND ns = %s", (memory_id, namespace.digest)
            )
            if version is not None:
                await _insert_version(conn, version)
            return memory

    async def forget_namespace(self, namespace: Namespace) -> int:
        digest = namespace.digest
        async with self._tx() as conn:
            cur = await conn.execute("DELETE FROM memories WHERE ns = %s", (digest,))
            count = cur.rowcount
            await conn.execute("DELETE FROM memory_events WHERE ns = %s", (digest,))
            await conn.execute("DELETE FROM memory_versions WHERE ns = %s", (digest,))
            await conn.execute("DELETE FROM data_keys WHERE ns = %s", (digest,))
            await conn.execute("DELETE FROM vector_tombstones WHERE ns = %s", (digest,))
            await conn.execute("DELETE FROM vector_write_clock WHERE ns = %s", (digest,))
            await conn.execute(
                "INSERT INTO namespace_tombstones (ns, tenant, project, environment, user_id, at) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (ns) DO UPDATE SET at = excluded.at",
                (digest, namespace.tenant, namespace.project, namespace.environment, namespace.user_id, time.time()),
            )
            return int(count)

    async def list_memories(
        self, namespace: Namespace, memory_filter: MemoryFilter, after: PageCursor | None, limit: int
    ) -> list[StoredMemory]:
        where, params = filter_sql(memory_filter, "%s", _tags_any_sql)
        clauses = ["ns = %s"] + ([where] if where else [])
        values: list[Any] = [namespace.digest, *params]
        if after is not None:
            clauses.append("(created_at < %s OR (created_at = %s AND id < %s))")
            values.extend([after.created_at, after.created_at, after.memory_id])
        async with self._tx() as conn:
            cur = await conn.execute(
                f"SELECT {_SELECT_MEMORY} FROM memories WHERE {' AND '.join(clauses)} "
                "ORDER BY created_at DESC, id DESC LIMIT %s",
                (*values, limit),
            )
            return [memory_from_row(r) for r in await cur.fetchall()]

    # -- outbox -------------------------------------------------------------------------------

    async def mark_indexed(self, tickets: Sequence[IndexTicket]) -> None:
        if not tickets:
            return
        async with self._tx() as conn, conn.cursor() as cur:
            await cur.executemany(
                "UPDATE memories SET indexed = 1 WHERE id = %s AND revision = %s",
                [(t.memory_id, t.revision) for t in tickets],
            )

    async def pending_index(self, limit: int, older_than: float) -> list[StoredMemory]:
        async with self._tx() as conn:
            cur = await conn.execute(
                f"SELECT {_SELECT_MEMORY} FROM memories WHERE indexed = 0 AND updated_at <= %s "
                "ORDER BY updated_at LIMIT %s",
                (older_than, limit),
            )
            return [memory_from_row(r) for r in await cur.fetchall()]

    async def pending_extractions(self, limit: int, older_than: float) -> list[StoredMemory]:
        async with self._tx() as conn:
            cur = await conn.execute(
                f"SELECT {_SELECT_MEMORY} FROM memories WHERE extraction_pending = 1 AND updated_at <= %s "
                "ORDER BY updated_at, created_at LIMIT %s",
                (older_than, limit),
            )
            return [memory_from_row(r) for r in await cur.fetchall()]

    async def clear_extraction_pending(self, memory_ids: Sequence[str]) -> None:
        if not memory_ids:
            return
        async with self._tx() as conn, conn.cursor() as cur:
            await cur.executemany(
                "UPDATE memories SET extraction_pending = 0 WHERE id = %s", [(i,) for i in memory_ids]
            )

    async def mark_stale(self, namespace: Namespace, memory_ids: Sequence[str], stale: bool) -> None:
        if not memory_ids:
            return
        async with self._tx() as conn, conn.cursor() as cur:
            await cur.executemany(
                "UPDATE memories SET stale = %s WHERE ns = %s AND id = %s",
                [(int(stale), namespace.digest, i) for i in memory_ids],
            )

    async def count_pending_index(self) -> int:
        async with self._tx() as conn:
            cur = await conn.execute("SELECT COUNT(*) FROM memories WHERE indexed = 0")
            row = await cur.fetchone()
        return 0 if row is None else int(row[0])

    async def pending_vector_deletes(self, limit: int) -> list[VectorTombstone]:
        async with self._tx() as conn:
            cur = await conn.execute(
                "SELECT memory_id, ns, embedding_version FROM vector_tombstones ORDER BY at LIMIT %s", (limit,)
            )
            return [VectorTombstone(r[0], r[1], r[2]) for r in await cur.fetchall()]

    async def clear_vector_tombstones(self, memory_ids: Sequence[str]) -> None:
        if not memory_ids:
            return
        async with self._tx() as conn:
            await conn.execute("DELETE FROM vector_tombstones WHERE memory_id = ANY(%s)", (list(memory_ids),))

    async def pending_namespace_drops(self, limit: int) -> list[NamespaceTombstone]:
        async with self._tx() as conn:
            cur = await conn.execute(
                "SELECT tenant, project, environment, user_id FROM namespace_tombstones ORDER BY at LIMIT %s",
                (limit,),
            )
            return [NamespaceTombstone(Namespace(*r)) for r in await cur.fetchall()]

    async def clear_namespace_tombstone(self, namespace: Namespace) -> None:
        async with self._tx() as conn:
            # The vectors are erased: the drop's write clock has nothing left to guard.
            await conn.execute("DELETE FROM namespace_tombstones WHERE ns = %s", (namespace.digest,))
            await conn.execute("DELETE FROM vector_write_clock WHERE ns = %s", (namespace.digest,))

    # -- bookkeeping --------------------------------------------------------------------------

    async def record_recalls(self, events: Sequence[RecallEvent]) -> None:
        if not events:
            return
        async with self._tx() as conn, conn.cursor() as cur:
            await cur.executemany(
                "UPDATE memories SET usage_count = usage_count + 1, "
                "last_accessed_at = GREATEST(COALESCE(last_accessed_at, 0), %s) WHERE id = %s AND ns = %s",
                [(e.at, e.memory_id, e.namespace.digest) for e in events],
            )
            await cur.executemany(
                "INSERT INTO memory_events (memory_id, ns, event, request_id, score, rank, at) "
                "VALUES (%s, %s, 'recall', %s, %s, %s, %s)",
                [(e.memory_id, e.namespace.digest, e.request_id, e.score, e.rank, e.at) for e in events],
            )

    # -- lifecycle ----------------------------------------------------------------------------

    async def fetch_by_idempotency_keys(self, namespace: Namespace, keys: Sequence[str]) -> list[StoredMemory]:
        if not keys:
            return []
        async with self._tx() as conn:
            cur = await conn.execute(
                f"SELECT {_SELECT_MEMORY} FROM memories WHERE ns = %s AND idempotency_key = ANY(%s)",
                (namespace.digest, list(keys)),
            )
            return [memory_from_row(r) for r in await cur.fetchall()]

    async def existing_memory_ids(self, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        async with self._tx() as conn:
            cur = await conn.execute("SELECT id FROM memories WHERE id = ANY(%s)", (list(ids),))
            return {r[0] for r in await cur.fetchall()}

    async def superseded_ids(self, namespace: Namespace, successor_id: str) -> list[str]:
        async with self._tx() as conn:
            cur = await conn.execute(
                "SELECT id FROM memories WHERE ns = %s AND superseded_by = %s ORDER BY id",
                (namespace.digest, successor_id),
            )
            return [r[0] for r in await cur.fetchall()]

    async def confirm_memory(
        self, namespace: Namespace, memory_id: str, now: float, version: StoredVersion
    ) -> StoredMemory | None:
        async with self._tx() as conn:
            cur = await conn.execute(
                "UPDATE memories SET confirmation_count = confirmation_count + 1, updated_at = %s "
                f"WHERE ns = %s AND id = %s RETURNING {_SELECT_MEMORY}",
                (now, namespace.digest, memory_id),
            )
            row = await cur.fetchone()
            if row is None:
                return None
            await _insert_version(conn, version)
            return memory_from_row(row)

    async def list_versions(
        self, namespace: Namespace, memory_ids: Sequence[str], after_version: int, limit: int
    ) -> list[StoredVersion]:
        if not memory_ids:
            return []
        async with self._tx() as conn:
            cur = await conn.execute(
                f"SELECT {VERSION_COLUMNS} FROM memory_versions WHERE ns = %s AND memory_id = ANY(%s) "
                "AND version > %s ORDER BY memory_id, version LIMIT %s",
                (namespace.digest, list(memory_ids), after_version, limit),
            )
            return [version_from_row(r) for r in await cur.fetchall()]

    async def record_feedback(
        self, namespace: Namespace, request_id: str, used: Sequence[str], unused: Sequence[str], now: float
    ) -> list[str]:
        recorded: list[str] = []
        async with self._tx() as conn:
            for event, column, ids in (("used", "feedback_used", used), ("unused", "feedback_unused", unused)):
                for memory_id in dict.fromkeys(ids):
                    # Lock the row first: concurrent reports of one (request, memory) serialise here.
                    cur = await conn.execute(
                        "SELECT 1 FROM memories WHERE ns = %s AND id = %s FOR UPDATE", (namespace.digest, memory_id)
                    )
                    if await cur.fetchone() is None:
                        continue
                    cur = await conn.execute(
                        "SELECT 1 FROM memory_events WHERE ns = %s AND request_id = %s AND memory_id = %s "
                        "AND event IN ('used', 'unused')",
                        (namespace.digest, request_id, memory_id),
                    )
                    if await cur.fetchone() is not None:
                        continue
                    await conn.execute(f"UPDATE memories SET {column} = {column} + 1 WHERE id = %s", (memory_id,))
                    await conn.execute(f"UPDATE memories SET vitality = {vitality_sql()} WHERE id = %s", (memory_id,))
                    await conn.execute(
                        "INSERT INTO memory_events (memory_id, ns, event, request_id, at) VALUES (%s, %s, %s, %s, %s)",
                        (memory_id, namespace.digest, event, request_id, now),
                    )
                    recorded.append(memory_id)
        return recorded

    async def acquire_lease(self, name: str, holder: str, now: float, ttl_s: float) -> bool:
        async with self._tx() as conn:
            cur = await conn.execute(
                "INSERT INTO maintenance_leases (name, holder, expires_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at "
                "WHERE maintenance_leases.holder = excluded.holder OR maintenance_leases.expires_at <= %s "
                "RETURNING holder",
                (name, holder, now + ttl_s, now),
            )
            return await cur.fetchone() is not None

    async def release_lease(self, name: str, holder: str) -> None:
        async with self._tx() as conn:
            await conn.execute("DELETE FROM maintenance_leases WHERE name = %s AND holder = %s", (name, holder))

    async def scan_memories(self, after_id: str, limit: int) -> list[StoredMemory]:
        async with self._tx() as conn:
            cur = await conn.execute(
                f"SELECT {_SELECT_MEMORY} FROM memories WHERE id > %s ORDER BY id LIMIT %s", (after_id, limit)
            )
            return [memory_from_row(r) for r in await cur.fetchall()]

    async def apply_maintenance(self, updates: Sequence[MaintenanceUpdate], now: float) -> list[StoredMemory]:
        if not updates:
            return []
        moved: list[StoredMemory] = []
        async with self._tx() as conn:
            for u in updates:
                if u.tier is None:
                    await conn.execute(
                        "UPDATE memories SET decay = %s WHERE id = %s AND ns = %s AND revision = %s",
                        (u.decay, u.memory_id, u.namespace_digest, u.revision),
                    )
                    continue
                cur = await conn.execute(
                    "UPDATE memories SET decay = %s, tier = %s, revision = revision + 1, indexed = 0, "
                    f"updated_at = %s WHERE id = %s AND ns = %s AND revision = %s RETURNING {_SELECT_MEMORY}",
                    (u.decay, u.tier.value, now, u.memory_id, u.namespace_digest, u.revision),
                )
                row = await cur.fetchone()
                if row is not None:
                    moved.append(memory_from_row(row))
                    if u.version is not None:
                        await _insert_version(conn, u.version)
        return moved

    async def put_usage_stats(self, stats: Sequence[UsageStats]) -> None:
        if not stats:
            return
        async with self._tx() as conn, conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO tenant_usage_stats (tenant, p50, p90, p99, memories, computed_at) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (tenant) DO UPDATE SET p50 = excluded.p50, "
                "p90 = excluded.p90, p99 = excluded.p99, memories = excluded.memories, "
                "computed_at = excluded.computed_at",
                [(s.tenant, s.p50, s.p90, s.p99, s.memories, s.computed_at) for s in stats],
            )

    async def get_usage_stats(self, tenant: str) -> UsageStats | None:
        async with self._tx() as conn:
            cur = await conn.execute(
                "SELECT tenant, p50, p90, p99, memories, computed_at FROM tenant_usage_stats WHERE tenant = %s",
                (tenant,),
            )
            row = await cur.fetchone()
        return None if row is None else UsageStats(row[0], row[1], row[2], row[3], int(row[4]), row[5])

    # -- API keys -----------------------------------------------------------------------------

    async def insert_api_key(self, record: ApiKeyRecord) -> None:
        async with self._tx() as conn:
            await conn.execute(
                f"INSERT INTO api_keys ({API_KEY_COLUMNS}) VALUES ({', '.join(['%s'] * 10)})",
                api_key_to_params(record),
            )

    async def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        async with self._tx() as conn:
            cur = await conn.execute(f"SELECT {API_KEY_COLUMNS} FROM api_keys WHERE key_id = %s", (key_id,))
            row = await cur.fetchone()
        return None if row is None else api_key_from_row(row)

    async def list_api_keys(self) -> list[ApiKeyRecord]:
        async with self._tx() as conn:
            cur = await conn.execute(f"SELECT {API_KEY_COLUMNS} FROM api_keys ORDER BY created_at")
            return [api_key_from_row(r) for r in await cur.fetchall()]

    async def revoke_api_key(self, key_id: str, now: float) -> bool:
        async with self._tx() as conn:
            cur = await conn.execute(
                "UPDATE api_keys SET revoked_at = %s WHERE key_id = %s AND revoked_at IS NULL", (now, key_id)
            )
            return cur.rowcount > 0

    # -- data keys ----------------------------------------------------------------------------

    async def get_data_key(self, namespace: Namespace) -> WrappedDataKey | None:
        async with self._tx() as conn:
            cur = await conn.execute(_LATEST_DATA_KEY, (namespace.digest,))
            row = await cur.fetchone()
        return None if row is None else WrappedDataKey(namespace.digest, row[0], row[1], bytes(row[2]))

    async def put_data_key_if_absent(self, namespace: Namespace, key: WrappedDataKey) -> WrappedDataKey:
        async with self._tx() as conn:
            await conn.execute(
                "INSERT INTO data_keys (ns, version, master_version, wrapped, created_at) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (ns, version) DO NOTHING",
                (namespace.digest, key.version, key.master_version, key.wrapped, time.time()),
            )
            cur = await conn.execute(_LATEST_DATA_KEY, (namespace.digest,))
            row = await cur.fetchone()
        if row is None:  # only a concurrent forget can remove it between the two statements
            raise Unavailable("the data key was removed concurrently; retry", retry_after_s=0.1)
        return WrappedDataKey(namespace.digest, row[0], row[1], bytes(row[2]))

    async def stale_data_keys(self, master_version: int, after: tuple[str, int], limit: int) -> list[StaleDataKey]:
        async with self._tx() as conn:
            cur = await conn.execute(
                "SELECT d.ns, d.version, d.master_version, d.wrapped, (SELECT m.tenant || chr(31) || m.project "
                "|| chr(31) || m.environment || chr(31) || m.user_id FROM memories m WHERE m.ns = d.ns LIMIT 1) "
                "FROM data_keys d WHERE d.master_version <> %s AND (d.ns, d.version) > (%s, %s) "
                "ORDER BY d.ns, d.version LIMIT %s",
                (master_version, after[0], after[1], limit),
            )
            rows = await cur.fetchall()
        return [stale_data_key(r) for r in rows]

    async def rewrap_data_key(self, key: WrappedDataKey, master_version: int, wrapped: bytes) -> bool:
        async with self._tx() as conn:
            cur = await conn.execute(
                "UPDATE data_keys SET master_version = %s, wrapped = %s "
                "WHERE ns = %s AND version = %s AND master_version = %s AND wrapped = %s",
                (master_version, wrapped, key.namespace_digest, key.version, key.master_version, key.wrapped),
            )
            return cur.rowcount > 0

    # -- vector placement ---------------------------------------------------------------------

    async def get_placement(self, namespace_digest: str, prefix: str) -> VectorPlacement | None:
        async with self._tx() as conn:
            cur = await conn.execute(
                "SELECT collection, partition_name FROM vector_placements WHERE ns = %s AND prefix = %s",
                (namespace_digest, prefix),
            )
            row = await cur.fetchone()
        return None if row is None else VectorPlacement(row[0], row[1])

    async def note_vector_write(self, namespace_digest: str, prefix: str, timestamp: int) -> None:
        async with self._tx() as conn:
            await conn.execute(
                "INSERT INTO vector_write_clock (ns, prefix, ts) VALUES (%s, %s, %s) "
                "ON CONFLICT (ns, prefix) DO UPDATE SET ts = GREATEST(vector_write_clock.ts, excluded.ts)",
                (namespace_digest, prefix, timestamp),
            )

    async def last_vector_write(self, namespace_digest: str, prefix: str) -> int | None:
        async with self._tx() as conn:
            cur = await conn.execute(
                "SELECT ts FROM vector_write_clock WHERE ns = %s AND prefix = %s", (namespace_digest, prefix)
            )
            row = await cur.fetchone()
        return None if row is None else int(row[0])

    async def assign_placement(
        self, namespace_digest: str, prefix: str, partitions_per_collection: int
    ) -> VectorPlacement:
        async with self._tx() as conn:
            # Replicas assigning at once must count shard sizes one after another.
            await conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_MIGRATION_LOCK >> 16, prefix))
            cur = await conn.execute(
                "SELECT collection, partition_name FROM vector_placements WHERE ns = %s AND prefix = %s",
                (namespace_digest, prefix),
            )
            existing = await cur.fetchone()
            if existing is not None:
                return VectorPlacement(existing[0], existing[1])
            cur = await conn.execute(
                "SELECT shard, COUNT(*) FROM vector_placements WHERE prefix = %s GROUP BY shard "
                "ORDER BY shard DESC LIMIT 1",
                (prefix,),
            )
            row = await cur.fetchone()
            shard = 0 if row is None else (row[0] if row[1] < partitions_per_collection else row[0] + 1)
            placement = VectorPlacement(f"{prefix}_s{shard:04d}", f"p_{namespace_digest}")
            await conn.execute(
                "INSERT INTO vector_placements (ns, prefix, shard, collection, partition_name) "
                "VALUES (%s, %s, %s, %s, %s)",
                (namespace_digest, prefix, shard, placement.collection, placement.partition),
            )
            return placement
