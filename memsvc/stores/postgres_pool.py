"""A lazily opened psycopg pool whose connection trouble surfaces as service errors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import AsyncConnection, errors
from psycopg_pool import AsyncConnectionPool

from memsvc.errors import FailedPrecondition, Unavailable


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
            # retryable, never INTERNAL.
            raise Unavailable(f"the {self._what} is unavailable", retry_after_s=1.0) from exc
        except (errors.UndefinedTable, errors.UndefinedColumn) as exc:
            raise FailedPrecondition(f"the {self._what} schema is not migrated; run `memsvc migrate`") from exc

    async def close(self) -> None:
        if self._opened:
            await self._pool.close()
            self._opened = False
