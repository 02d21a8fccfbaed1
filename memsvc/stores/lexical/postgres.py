"""Lexical postings in the PostgreSQL record store, BM25 summed in one SQL query.

Tables come from migration 2 (`POSTGRES_MIGRATIONS`); the query is the SQLite one with
PostgreSQL placeholders, so both rank identically.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from psycopg import AsyncConnection

from memsvc.domain.models import MemoryFilter, Namespace
from memsvc.stores.lexical.base import Bm25, LexicalDoc, LexicalHit, postings_filter
from memsvc.stores.lexical.sqlite import bm25_sql
from memsvc.stores.postgres_pool import PostgresPool
from memsvc.stores.records.rows import filter_sql


def _tags_any_sql(n: int) -> str:
    return f"memories.tags ?| ARRAY[{', '.join(['%s::text'] * n)}]"


class PostgresLexicalIndex:
    """LexicalIndex on the PostgreSQL record store's database, with a small pool of its own."""

    def __init__(self, url: str, bm25: Bm25 | None = None, *, max_connections: int = 4, timeout_s: float = 5.0) -> None:
        self._bm25 = bm25 or Bm25()
        self._db = PostgresPool(
            url, max_connections=max_connections, timeout_s=timeout_s, name="memsvc-lexical", what="lexical index"
        )

    def _tx(self) -> AbstractAsyncContextManager[AsyncConnection[Any]]:
        return self._db.connection()

    async def close(self) -> None:
        await self._db.close()

    async def index(self, namespace: Namespace, docs: Sequence[LexicalDoc]) -> None:
        if not docs:
            return
        digest = namespace.digest
        async with self._tx() as conn:
            for doc in docs:
                # The delete trigger removes the old postings and corrects the namespace totals.
                await conn.execute("DELETE FROM lexical_docs WHERE memory_id = %s", (doc.memory_id,))
                cur = await conn.execute(
                    "INSERT INTO lexical_docs (memory_id, ns, length) SELECT %s, %s, %s "
                    "WHERE EXISTS (SELECT 1 FROM memories WHERE id = %s AND ns = %s)",
                    (doc.memory_id, digest, doc.length, doc.memory_id, digest),
                )
                if cur.rowcount and doc.terms:  # a row deleted meanwhile gets no postings
                    async with conn.cursor() as many:
                        await many.executemany(
                            "INSERT INTO lexical_postings (ns, term, memory_id, tf) VALUES (%s, %s, %s, %s)",
                            [(digest, term, doc.memory_id, tf) for term, tf in doc.terms.items()],
                        )

    async def remove(self, namespace: Namespace, memory_ids: Sequence[str]) -> None:
        if not memory_ids:
            return
        async with self._tx() as conn:
            await conn.execute(
                "DELETE FROM lexical_docs WHERE ns = %s AND memory_id = ANY(%s)", (namespace.digest, list(memory_ids))
            )

    async def search(
        self, namespace: Namespace, query: Mapping[int, int], limit: int, memory_filter: MemoryFilter
    ) -> list[LexicalHit]:
        if not query or limit <= 0:
            return []
        where, values = filter_sql(postings_filter(memory_filter), "%s", _tags_any_sql)
        sql = bm25_sql(len(query), where, "%s")
        digest = namespace.digest
        params: list[Any] = [v for term, count in query.items() for v in (term, count)]
        params += [self._bm25.k1, self._bm25.b, digest, digest, digest, *values, limit]
        async with self._tx() as conn:
            cur = await conn.execute(sql, params)
            rows = await cur.fetchall()
        return [LexicalHit(str(r[0]), float(r[1]), float(r[2])) for r in rows]

    async def stats(self, namespace: Namespace) -> tuple[int, int]:
        """(documents, total length) of a namespace; (0, 0) when it has none."""
        async with self._tx() as conn:
            cur = await conn.execute("SELECT docs, total_length FROM lexical_stats WHERE ns = %s", (namespace.digest,))
            row = await cur.fetchone()
        return (0, 0) if row is None else (int(row[0]), int(row[1]))

    async def postings_count(self, namespace: Namespace) -> int:
        async with self._tx() as conn:
            cur = await conn.execute("SELECT COUNT(*) FROM lexical_postings WHERE ns = %s", (namespace.digest,))
            row = await cur.fetchone()
        return 0 if row is None else int(row[0])
