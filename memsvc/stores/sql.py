"""SQL written once for SQLite and PostgreSQL: statements as data, a dialect for what differs.

A store method is a *program*: a generator that yields `Statement`s and receives each one's
`Result`. It holds the SQL and the row mapping but no connection, so one program runs on a
SQLite worker thread (driven synchronously, `SqliteThreads`) or on a pooled PostgreSQL
connection (driven with awaits, `PostgresPool`), each time as one transaction.

Statements use psycopg's `%s` placeholders; the SQLite runner turns them into `?`. No shared
statement holds any other `%`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Statement:
    """One SQL statement and its bound values; with `many`, `params` is a sequence of rows."""

    sql: str
    params: Sequence[Any] = ()
    many: bool = False


@dataclass(frozen=True)
class Result:
    """What a statement returned: its rows (none for writes) and the rows it changed."""

    rows: Sequence[Sequence[Any]]
    rowcount: int

    def first(self) -> Sequence[Any] | None:
        return self.rows[0] if self.rows else None


Program: TypeAlias = Generator[Statement, Result, T]


def q(sql: str, params: Sequence[Any] = ()) -> Statement:
    return Statement(sql, params)


def each(sql: str, rows: Sequence[Sequence[Any]]) -> Statement:
    """`sql` once per parameter row (executemany)."""
    return Statement(sql, rows, many=True)


def drive(program: Program[T], execute: Callable[[Statement], Result]) -> T:
    """Run a program to its end, executing each statement it yields, on the calling thread."""
    try:
        statement = next(program)
        while True:
            statement = program.send(execute(statement))
    except StopIteration as done:
        value: T = done.value
        return value
    finally:
        program.close()


class SqlTransactions(Protocol):
    """A backend's connections: each program runs as one transaction (`SqliteThreads`, `PostgresPool`)."""

    async def transact(self, program: Program[T], *, write: bool, schema: bool = False, short: bool = False) -> T:
        """Run `program` to its end (`write`: it changes rows; `schema`: start-up schema work;
        `short`: a read of a few rows by index, which a backend may run on the calling thread)."""
        ...

    async def close(self) -> None: ...


class SqlDialect(Protocol):
    """What the shared statements leave to the backend (`SqliteDialect`, `PostgresDialect`)."""

    # INSERT/UPDATE/DELETE ... RETURNING reads a changed row in the same statement; without it
    # the row is read by a second statement of the same transaction.
    returning: bool
    # SELECT ... FOR UPDATE serialises the writers of one row; without it the database is the
    # unit of locking (SQLite's BEGIN IMMEDIATE).
    row_locks: bool
    # The two-argument maximum, the code-point-to-character function, a float column type.
    greatest: str
    chr: str
    real: str
    # One row, one column: whether schema_migrations exists.
    migrations_table_exists: str

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """`column` is one of `values`: the condition and its bound values."""
        ...

    def tags_any(self, count: int) -> str:
        """The memory's JSON tags contain any of `count` bound values."""
        ...

    def tags_text(self, column: str) -> str:
        """The tags column as JSON text, as the row mapping parses it."""
        ...

    def unindexed(self, column: str) -> str:
        """`column` in a condition the planner should check per row rather than look up by."""
        ...

    def migration_lock(self) -> Statement | None:
        """Taken before migrating, when replicas' start-up Jobs may migrate at once."""
        ...

    def placement_lock(self, prefix: str) -> Statement | None:
        """Taken before counting shard sizes, when replicas may assign placements at once."""
        ...
