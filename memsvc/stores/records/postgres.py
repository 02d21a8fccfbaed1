"""PostgreSQL record store (psycopg 3, async connection pool): the store of many replicas.

The SQL is shared with SQLite (`memsvc/stores/records/sql.py`); what is PostgreSQL's own is
the connection pool, the dialect (`PostgresDialect`) and a readiness probe with a deadline.
"""

from __future__ import annotations

import asyncio

import psycopg

from memsvc.errors import Unavailable
from memsvc.stores.postgres_pool import POSTGRES, PostgresPool
from memsvc.stores.records.migrations import POSTGRES_MIGRATIONS
from memsvc.stores.records.sql import SqlRecordStore
from memsvc.stores.sql import Program, q


class PostgresRecordStore(SqlRecordStore):
    """Record store on PostgreSQL. Each method is one transaction on a pooled connection."""

    def __init__(self, url: str, *, max_connections: int = 10, timeout_s: float = 5.0) -> None:
        self._pool = PostgresPool(
            url, max_connections=max_connections, timeout_s=timeout_s, name="memsvc-records", what="record store"
        )
        self._timeout_s = timeout_s
        super().__init__(POSTGRES, POSTGRES_MIGRATIONS, self._pool)

    async def ping(self) -> None:
        def select_one() -> Program[None]:
            yield q("SELECT 1")

        try:
            # Readiness must answer even when the server accepts connections but never replies.
            await asyncio.wait_for(self._pool.transact(select_one()), self._timeout_s)
        except (TimeoutError, psycopg.Error) as exc:
            raise Unavailable("the record store is unavailable", retry_after_s=1.0) from exc
