"""Lexical postings in the SQLite record store's file (the SQL: `memsvc/stores/lexical/sql.py`)."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

from memsvc.stores.lexical.base import Bm25
from memsvc.stores.lexical.sql import DEFAULT_TERM_POSTINGS, SHORT_SEARCH_DOCS, SqlLexicalIndex
from memsvc.stores.sqlite_threads import SQLITE, SqliteThreads

_BUSY_TIMEOUT_MS = 5000


def _ensure_ln(conn: sqlite3.Connection) -> None:
    try:
        conn.execute("SELECT ln(1.0)")
    except sqlite3.OperationalError:
        # SQLite built without its math functions: the one BM25 needs, from Python.
        conn.create_function("ln", 1, math.log, deterministic=True)


class SqliteLexicalIndex(SqlLexicalIndex):
    """LexicalIndex on the record store's SQLite file; each worker thread keeps its own connection."""

    def __init__(
        self,
        path: Path,
        bm25: Bm25 | None = None,
        workers: int = 2,
        busy_timeout_ms: int = _BUSY_TIMEOUT_MS,
        *,
        short_search_docs: int = SHORT_SEARCH_DOCS,
        term_postings: int = DEFAULT_TERM_POSTINGS,
    ) -> None:
        threads = SqliteThreads(
            path,
            workers=workers,
            busy_timeout_ms=busy_timeout_ms,
            thread_name="lexical",
            what="lexical index",
            setup=_ensure_ln,
        )
        super().__init__(SQLITE, threads, bm25, short_search_docs, term_postings)
