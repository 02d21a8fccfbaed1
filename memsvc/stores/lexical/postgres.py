"""Lexical postings in the PostgreSQL record store (the SQL: `memsvc/stores/lexical/sql.py`)."""

from __future__ import annotations

from memsvc.stores.lexical.base import Bm25
from memsvc.stores.lexical.sql import DEFAULT_TERM_POSTINGS, SHORT_SEARCH_DOCS, SqlLexicalIndex
from memsvc.stores.postgres_pool import POSTGRES, PostgresPool


class PostgresLexicalIndex(SqlLexicalIndex):
    """LexicalIndex on the PostgreSQL record store's database, with a small pool of its own."""

    def __init__(
        self,
        url: str,
        bm25: Bm25 | None = None,
        *,
        max_connections: int = 4,
        timeout_s: float = 5.0,
        short_search_docs: int = SHORT_SEARCH_DOCS,
        term_postings: int = DEFAULT_TERM_POSTINGS,
    ) -> None:
        pool = PostgresPool(
            url, max_connections=max_connections, timeout_s=timeout_s, name="memsvc-lexical", what="lexical index"
        )
        super().__init__(POSTGRES, pool, bm25, short_search_docs, term_postings)
