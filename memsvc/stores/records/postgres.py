"""PostgreSQL record store (psycopg 3, async connection pool): the store of many replicas."""

from __future__ import annotations

import asyncio
from typing import TypeVar

import psycopg

from memsvc.errors import Unavailable
from memsvc.stores.postgres_pool import POSTGRES, PostgresPool
from memsvc.stores.records.migrations import POSTGRES_MIGRATIONS
from memsvc.stores.records.sql import SqlRecordStore
from memsvc.stores.sql import Program, q

T = TypeVar("T")


class PostgresRecordStore(SqlRecordStore):
    """Record store on PostgreSQL. Each method is one transaction on a pooled connection."""

    def __init__(self, url: str, *, max_connections: int = 10, timeout_s: float = 5.0) -> None:
        super().__init__(POSTGRES, POSTGRES_MIGRATIONS)
        self._db = PostgresPool(
            url, max_connections=max_connections, timeout_s=timeout_s, name="memsvc-records", what="record store"
        )
        self._timeout_s = timeout_s

    async def _transact(self, program: Program[T], *, write: bool, schema: bool = False) -> T:
        # Schema work at start-up runs on a connection of its own (see PostgresPool.connection).
        return await self._db.transact(program, pooled=not schema)

    async def close(self) -> None:
        await self._db.close()

    async def ping(self) -> None:
        def select_one() -> Program[None]:
            yield q("SELECT 1")

        try:
            # Readiness must answer even when the server accepts connections but never replies.
            await asyncio.wait_for(self._db.transact(select_one()), self._timeout_s)
        except (TimeoutError, psycopg.Error) as exc:
            raise Unavailable("the record store is unavailable", retry_after_s=1.0) from exc
