"""SQLite record store (WAL): the embedded default. Blocking calls run on a small thread pool.

The SQL is shared with PostgreSQL (`memsvc/stores/records/sql.py`); what is SQLite's own is
the thread pool of connections, the dialect (`SqliteDialect`) and what a readiness probe takes.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memsvc.stores.records.migrations import SQLITE_MIGRATIONS
from memsvc.stores.records.sql import SqlRecordStore, fetch_memories_statement
from memsvc.stores.sqlite_threads import SQLITE, SqliteDialect, SqliteThreads

_BUSY_TIMEOUT_MS = 5000


def _enable_foreign_keys(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA foreign_keys=ON")


def fetch_sql(count: int) -> str:
    """SQLite's text of a fetch of `count` ids within one namespace (bound: namespace, then the ids)."""
    return SqliteDialect.native(fetch_memories_statement(SQLITE, "", [""] * count).sql)


class SqliteRecordStore(SqlRecordStore):
    """Record store on one SQLite file; each worker thread keeps its own connection."""

    def __init__(self, path: Path, workers: int = 4, busy_timeout_ms: int = _BUSY_TIMEOUT_MS) -> None:
        self._threads = SqliteThreads(
            path,
            workers=workers,
            busy_timeout_ms=busy_timeout_ms,
            thread_name="sqlite",
            what="record store",
            setup=_enable_foreign_keys,
        )
        super().__init__(SQLITE, SQLITE_MIGRATIONS, self._threads)

    async def ping(self) -> None:
        """Can this store take a write now? Reads alone pass while another connection holds the lock."""

        def probe(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")

        await self._threads.run(probe)
