"""A lazily opened psycopg pool whose connection trouble surfaces as service errors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import psycopg
from psycopg import AsyncConnection, errors
from psycopg_pool import AsyncConnectionPool

from memsvc.errors import FailedPrecondition, Unavailable
from memsvc.stores.sql import Program, Result, Statement

T = TypeVar("T")
# Advisory lock keys: "memsvc" serialises migrators; its top 32 bits with the prefix's hash,
# shard assignment per prefix.
_MIGRATION_LOCK = 0x6D656D737663


class PostgresDialect:
    """PostgreSQL's side of the shared statements (`memsvc.stores.sql.SqlDialect`)."""

    returning = True
    row_locks = True
    greatest = "GREATEST"
    chr = "chr"
    real = "DOUBLE PRECISION"
    migrations_table_exists = "SELECT to_regclass('schema_migrations') IS NOT NULL"

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} = ANY(%s)", [list(values)]

    def tags_any(self, count: int) -> str:
        # Tags are JSONB here, so the GIN index answers `?|`.
        return f"memories.tags ?| ARRAY[{', '.join(['%s::text'] * count)}]"

    def tags_text(self, column: str) -> str:
        return f"{column}::text"

    def unindexed(self, column: str) -> str:
        return column

    def migration_lock(self) -> Statement | None:
        return Statement("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))

    def placement_lock(self, prefix: str) -> Statement | None:
        return Statement("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_MIGRATION_LOCK >> 16, prefix))


POSTGRES = PostgresDialect()


async def _execute(conn: AsyncConnection[Any], statement: Statement) -> Result:
    if statement.many:
        async with conn.cursor() as cur:
            await cur.executemany(statement.sql, statement.params)
            return Result([], cur.rowcount)
    cur = await conn.execute(statement.sql, statement.params or None)
    rows = await cur.fetchall() if cur.description is not None else []
    return Result(rows, cur.rowcount)


class PostgresPool:
    """Opens on first use, so a server starts while the database is down and calls report it."""

    def __init__(self, url: str, *, max_connections: int, timeout_s: float, name: str, what: str) -> None:
        self._url = url
        self._what = what
        self._connect_timeout_s = max(2, int(timeout_s))
        self._pool = AsyncConnectionPool(
            url,
            min_size=1,
            max_size=max_connections,
            open=False,
            timeout=timeout_s,
            kwargs={"connect_timeout": self._connect_timeout_s},
            name=name,
        )
        self._opened = False
        self._open_lock = asyncio.Lock()

    @asynccontextmanager
    async def connection(self, *, pooled: bool = True) -> AsyncIterator[AsyncConnection[Any]]:
        """One transaction on a pooled (or a fresh) connection; connection trouble becomes Unavailable."""
        try:
            if pooled:
                if not self._opened:
                    async with self._open_lock:
                        if not self._opened:
                            # wait=False: start even while the database is down; calls report Unavailable.
                            await self._pool.open(wait=False)
                            self._opened = True
                async with self._pool.connection() as conn:
                    yield conn
            else:
                # Schema work at start-up gets its own connection: a failed check leaves no pool
                # (and no pool tasks) behind to keep the process from exiting.
                async with await AsyncConnection.connect(self._url, connect_timeout=self._connect_timeout_s) as conn:
                    yield conn
        except (psycopg.OperationalError, psycopg.InterfaceError, errors.ReadOnlySqlTransaction) as exc:
            # Down, restarting, pool exhausted, serialization conflict, a standby after failover:
            # retryable, never INTERNAL. Start-up (schema work) says why, for the operator: a
            # refused certificate (sslmode=verify-full) reads differently from a server that is down.
            why = "" if pooled else f" ({(str(exc).strip().splitlines() or [type(exc).__name__])[0]})"
            raise Unavailable(f"the {self._what} is unavailable{why}", retry_after_s=1.0) from exc
        except (errors.UndefinedTable, errors.UndefinedColumn) as exc:
            raise FailedPrecondition(f"the {self._what} schema is not migrated; run `memsvc migrate`") from exc

    async def transact(
        self, program: Program[T], *, write: bool = True, schema: bool = False, short: bool = False
    ) -> T:
        """Run a shared-SQL program as one transaction (reads too), awaiting each statement it
        yields; schema work at start-up on a connection of its own (see `connection`). Every
        statement is awaited on the event loop already, `short` or not."""
        async with self.connection(pooled=not schema) as conn:
            try:
                statement = next(program)
                while True:
                    statement = program.send(await _execute(conn, statement))
            except StopIteration as done:
                value: T = done.value
                return value
            finally:
                program.close()

    async def close(self) -> None:
        if self._opened:
            await self._pool.close()
            self._opened = False
