"""SQLite on a small thread pool: one WAL connection per worker thread, awaited from asyncio."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from memsvc.errors import Unavailable

T = TypeVar("T")


class SqliteThreads:
    """Runs blocking SQLite work off the event loop; locked or unreadable files are outages."""

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

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self._path, timeout=self._busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_ms)}")
            if self._setup is not None:
                self._setup(conn)
            self._local.conn = conn
            with self._connections_lock:
                self._connections.append(conn)
        return conn

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def call() -> T:
            try:
                return fn(self._connection())
            except sqlite3.OperationalError as exc:
                # Locked or unreadable database: a retryable outage, never an internal error.
                raise Unavailable(f"the {self._what} is unavailable", retry_after_s=1.0) from exc

        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

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

    async def close(self) -> None:
        def close_all() -> None:
            with self._connections_lock:
                for conn in self._connections:
                    conn.close()
                self._connections.clear()

        await asyncio.get_running_loop().run_in_executor(None, close_all)
        self._executor.shutdown(wait=False, cancel_futures=True)
