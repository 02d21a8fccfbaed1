"""SQLite on a small thread pool: one WAL connection per worker thread, awaited from asyncio."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from memsvc.errors import Unavailable
from memsvc.stores.sql import Program, Result, Statement, drive

T = TypeVar("T")


class SqliteDialect:
    """SQLite's side of the shared statements (`memsvc.stores.sql.SqlDialect`)."""

    returning = False
    row_locks = False
    greatest = "MAX"
    chr = "char"
    real = "REAL"
    migrations_table_exists = (
        "SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    )

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} IN ({', '.join(['%s'] * len(values))})", list(values)

    def tags_any(self, count: int) -> str:
        return f"EXISTS (SELECT 1 FROM json_each(memories.tags) WHERE json_each.value IN ({', '.join(['%s'] * count)}))"

    def tags_text(self, column: str) -> str:
        return column

    def unindexed(self, column: str) -> str:
        # `+ns = ? AND id IN (...)` looks the ids up by primary key and checks the namespace on
        # each row. Left indexable, ns steers SQLite to the (ns, created_at) index, which walks
        # all of the user's rows to find the few asked for (50 of 1,000: 1.08 -> 0.87 ms).
        return f"+{column}"

    def migration_lock(self) -> Statement | None:
        return None  # migrations run in a write transaction, which holds the database lock

    def placement_lock(self, prefix: str) -> Statement | None:
        return None  # as above: one writer at a time

    @staticmethod
    def native(sql: str) -> str:
        """The statement with sqlite3's `?` placeholders for the shared `%s`."""
        return sql.replace("%s", "?")


SQLITE = SqliteDialect()
_INLINE_BUSY_TIMEOUT_MS = 100


def _execute(conn: sqlite3.Connection, statement: Statement) -> Result:
    sql = SqliteDialect.native(statement.sql)
    cur = conn.executemany(sql, statement.params) if statement.many else conn.execute(sql, statement.params)
    return Result(cur.fetchall(), cur.rowcount)


class SqliteThreads:
    """Runs blocking SQLite work off the event loop; locked or unreadable files are outages.

    Short reads (a few rows by index: a query's candidates, its namespace's write clock) run on
    the calling thread, the event loop's, on a connection of its own. A WAL reader never waits
    for a lock, so such a read blocks the loop for its own fraction of a millisecond, while a
    hand-off to a worker costs about as much CPU again and makes the worker and the loop
    contend for the GIL (docs/performance.md: 10-12 % less CPU per query at concurrency 16).

    Closing waits for every worker to finish what it runs before closing a connection: work
    still runs in a thread after the coroutine awaiting it was cancelled (a call cut at
    shutdown), and closing a connection another thread is using is undefined behaviour. An
    inline read cannot be running then: it would hold the loop that runs `close`.
    """

    def __init__(
        self,
        path: Path,
        *,
        workers: int,
        busy_timeout_ms: int,
        thread_name: str,
        what: str,
        setup: Callable[[sqlite3.Connection], None] | None = None,
    ) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._what = what
        self._setup = setup
        self._local = threading.local()
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=thread_name)
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._closing = False

    def _connection(self, inline: bool = False) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            # A reader is told "busy" only in rare moments (another connection recovering the
            # WAL): on the loop's connection that wait is kept short, and past it the read is an
            # outage like any other, so the loop never stalls for a worker's full timeout.
            busy_ms = min(self._busy_timeout_ms, _INLINE_BUSY_TIMEOUT_MS) if inline else self._busy_timeout_ms
            conn = sqlite3.connect(self._path, timeout=busy_ms / 1000, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA busy_timeout={int(busy_ms)}")
            if self._setup is not None:
                self._setup(conn)
            self._local.conn = conn
            with self._connections_lock:
                self._connections.append(conn)
        return conn

    async def run(self, fn: Callable[[sqlite3.Connection], T], *, inline: bool = False) -> T:
        """`fn` on a worker's connection, or with `inline` on the calling thread's (short reads)."""
        if self._closing:
            raise Unavailable(f"the {self._what} is shutting down", retry_after_s=1.0)

        def call() -> T:
            try:
                return fn(self._connection(inline))
            except sqlite3.OperationalError as exc:
                # Locked or unreadable database: a retryable outage, never an internal error.
                raise Unavailable(f"the {self._what} is unavailable", retry_after_s=1.0) from exc

        if inline:
            return call()
        try:
            future = asyncio.get_running_loop().run_in_executor(self._executor, call)
        except RuntimeError as exc:  # the executor shut down between the check above and here
            raise Unavailable(f"the {self._what} is shutting down", retry_after_s=1.0) from exc
        return await future

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` in one immediate transaction: committed if it returns, rolled back if it raises."""

        def tx(conn: sqlite3.Connection) -> T:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result

        return await self.run(tx)

    async def transact(self, program: Program[T], *, write: bool, schema: bool = False, short: bool = False) -> T:
        """Run a shared-SQL program on a worker's connection: in one immediate transaction when
        it writes, else statement by statement (each reads a consistent snapshot); a `short`
        read on the calling thread. Schema work needs no connection of its own here."""

        def call(conn: sqlite3.Connection) -> T:
            return drive(program, lambda statement: _execute(conn, statement))

        if write:
            return await self.write(call)
        return await self.run(call, inline=short)

    async def close(self) -> None:
        """Refuse new work, let queued and running work finish, then close every connection."""
        self._closing = True

        def drain_and_close() -> None:
            self._executor.shutdown(wait=True)  # the workers are gone: no connection is in use
            with self._connections_lock:
                for conn in self._connections:
                    conn.close()
                self._connections.clear()

        await asyncio.to_thread(drain_and_close)
