"""Lexical postings in the SQLite record store's file, BM25 summed in one SQL query.

Tables come from migration 2 (`memsvc/stores/records/migrations.py`). The search joins the
memory rows, so the caller's filters apply inside the query, as they do in the vector index.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from memsvc.domain.models import MemoryFilter, Namespace
from memsvc.stores.lexical.base import Bm25, LexicalDoc, LexicalHit, postings_filter
from memsvc.stores.records.rows import filter_sql
from memsvc.stores.sqlite_threads import SqliteThreads

T = TypeVar("T")
_BUSY_TIMEOUT_MS = 5000


def _tags_any_sql(n: int) -> str:
    return f"EXISTS (SELECT 1 FROM json_each(memories.tags) WHERE json_each.value IN ({', '.join('?' * n)}))"


def bm25_sql(terms: int, where: str, placeholder: str = "?") -> str:
    """One query: document frequencies of the query terms, then BM25 summed per memory, and
    the share of the query's IDF weight the memory contains (its term coverage).

    Bound in order: (term, query count) x terms, k1, b, namespace (stats), namespace (df),
    namespace (postings), the filter's values, limit. IDF is Lucene's, never negative. A query
    term no memory has weighs the most: a query about something never said covers little.
    """
    ph = placeholder
    values = ", ".join(f"({ph}, {ph})" for _ in range(terms))
    extra = f" AND {where}" if where else ""
    return (
        f"WITH q(term, qtf) AS (VALUES {values}), "
        f"params(k1, b) AS (SELECT {ph}, {ph}), "
        "st AS (SELECT docs, CAST(total_length AS DOUBLE PRECISION) / docs AS avgdl FROM lexical_stats "
        f"WHERE ns = {ph} AND docs > 0), "
        "df AS (SELECT term, COUNT(*) AS n FROM lexical_postings "
        f"WHERE ns = {ph} AND term IN (SELECT term FROM q) GROUP BY term), "
        "qw AS (SELECT SUM(q.qtf * ln(1.0 + (st.docs - COALESCE(df.n, 0) + 0.5) / (COALESCE(df.n, 0) + 0.5))) "
        "AS weight FROM q LEFT JOIN df ON df.term = q.term CROSS JOIN st) "
        "SELECT p.memory_id, SUM(q.qtf * ln(1.0 + (st.docs - df.n + 0.5) / (df.n + 0.5)) "
        "* p.tf * (params.k1 + 1) / (p.tf + params.k1 * (1 - params.b + params.b * d.length / st.avgdl))) AS score, "
        "SUM(q.qtf * ln(1.0 + (st.docs - df.n + 0.5) / (df.n + 0.5))) / MAX(qw.weight) AS coverage "
        "FROM lexical_postings p "
        "JOIN q ON q.term = p.term "
        "JOIN df ON df.term = p.term "
        "JOIN lexical_docs d ON d.memory_id = p.memory_id "
        "JOIN memories ON memories.id = p.memory_id "
        "CROSS JOIN st CROSS JOIN params CROSS JOIN qw "
        f"WHERE p.ns = {ph}{extra} "
        "GROUP BY p.memory_id ORDER BY score DESC, p.memory_id LIMIT " + ph
    )


def _ensure_ln(conn: sqlite3.Connection) -> None:
    try:
        conn.execute("SELECT ln(1.0)")
    except sqlite3.OperationalError:
        # SQLite built without its math functions: the one BM25 needs, from Python.
        conn.create_function("ln", 1, math.log, deterministic=True)


class SqliteLexicalIndex:
    """LexicalIndex on the record store's SQLite file; each worker thread keeps its own connection."""

    def __init__(
        self, path: Path, bm25: Bm25 | None = None, workers: int = 2, busy_timeout_ms: int = _BUSY_TIMEOUT_MS
    ) -> None:
        self._bm25 = bm25 or Bm25()
        self._db = SqliteThreads(
            path,
            workers=workers,
            busy_timeout_ms=busy_timeout_ms,
            thread_name="lexical",
            what="lexical index",
            setup=_ensure_ln,
        )

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await self._db.run(fn)

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await self._db.write(fn)

    async def close(self) -> None:
        await self._db.close()

    # -- LexicalIndex -------------------------------------------------------------------------

    async def index(self, namespace: Namespace, docs: Sequence[LexicalDoc]) -> None:
        if not docs:
            return
        digest = namespace.digest

        def write(conn: sqlite3.Connection) -> None:
            for doc in docs:
                # The delete trigger removes the old postings and corrects the namespace totals.
                conn.execute("DELETE FROM lexical_docs WHERE memory_id = ?", (doc.memory_id,))
                inserted = conn.execute(
                    "INSERT INTO lexical_docs (memory_id, ns, length) SELECT ?, ?, ? "
                    "WHERE EXISTS (SELECT 1 FROM memories WHERE id = ? AND ns = ?)",
                    (doc.memory_id, digest, doc.length, doc.memory_id, digest),
                ).rowcount
                if inserted:  # a row deleted meanwhile gets no postings
                    conn.executemany(
                        "INSERT INTO lexical_postings (ns, term, memory_id, tf) VALUES (?, ?, ?, ?)",
                        [(digest, term, doc.memory_id, tf) for term, tf in doc.terms.items()],
                    )

        await self._write(write)

    async def remove(self, namespace: Namespace, memory_ids: Sequence[str]) -> None:
        if not memory_ids:
            return
        digest = namespace.digest
        await self._write(
            lambda conn: conn.executemany(
                "DELETE FROM lexical_docs WHERE memory_id = ? AND ns = ?", [(i, digest) for i in memory_ids]
            )
        )

    async def search(
        self, namespace: Namespace, query: Mapping[int, int], limit: int, memory_filter: MemoryFilter
    ) -> list[LexicalHit]:
        if not query or limit <= 0:
            return []
        where, values = filter_sql(postings_filter(memory_filter), "?", _tags_any_sql)
        sql = bm25_sql(len(query), where)
        digest = namespace.digest
        params: list[Any] = [v for term, count in query.items() for v in (term, count)]
        params += [self._bm25.k1, self._bm25.b, digest, digest, digest, *values, limit]
        rows = await self._run(lambda conn: conn.execute(sql, params).fetchall())
        return [LexicalHit(str(r[0]), float(r[1]), float(r[2])) for r in rows]

    async def stats(self, namespace: Namespace) -> tuple[int, int]:
        """(documents, total length) of a namespace; (0, 0) when it has none."""
        row = await self._run(
            lambda conn: conn.execute(
                "SELECT docs, total_length FROM lexical_stats WHERE ns = ?", (namespace.digest,)
            ).fetchone()
        )
        return (0, 0) if row is None else (int(row[0]), int(row[1]))

    async def postings_count(self, namespace: Namespace) -> int:
        return await self._run(
            lambda conn: int(
                conn.execute("SELECT COUNT(*) FROM lexical_postings WHERE ns = ?", (namespace.digest,)).fetchone()[0]
            )
        )
