"""The lexical index's SQL, written once for SQLite and PostgreSQL: BM25 summed in one query.

Tables come from migration 2 (`memsvc/stores/records/migrations.py`). The search joins the
memory rows, so the caller's filters apply inside the query, as they do in the vector index;
both backends run the same statements, so both rank identically.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from memsvc.domain.models import MemoryFilter, Namespace
from memsvc.stores.lexical.base import Bm25, LexicalDoc, LexicalHit, postings_filter
from memsvc.stores.records.rows import filter_sql
from memsvc.stores.sql import Program, SqlDialect, SqlTransactions, each, q


def term_weights_sql(terms: int) -> str:
    """The search's first statement: the namespace's document count and total length, and how
    many of its memories hold each query term. Bound in order: the terms, namespace (postings),
    namespace (stats). No row when the namespace has no documents."""
    ph = "%s"
    values = ", ".join(f"({ph})" for _ in range(terms))
    return (
        f"WITH q(term) AS (VALUES {values}) "
        "SELECT st.docs, st.total_length, q.term, "
        f"(SELECT COUNT(*) FROM lexical_postings p WHERE p.ns = {ph} AND p.term = q.term) "
        f"FROM q CROSS JOIN lexical_stats st WHERE st.ns = {ph} AND st.docs > 0"
    )


def idf(docs: int, holding: int) -> float:
    """Lucene's BM25 IDF, never negative; a term no memory holds weighs the most, so a query about
    something never said covers little."""
    return math.log(1.0 + (docs - holding + 0.5) / (holding + 0.5))


def bm25_sql(terms: int, where: str) -> str:
    """The search's second statement: BM25 summed per memory over the query terms' postings, and
    the share of the query's IDF weight the memory contains (its term coverage).

    The IDFs come bound from the first statement (`term_weights_sql`), computed once per term
    rather than twice per joined posting. Bound in order: (term, query count, IDF) x terms, k1, b,
    the average document length, the query's whole IDF weight, namespace (postings), the
    filter's values, limit.
    """
    ph = "%s"
    values = ", ".join(f"({ph}, {ph}, {ph})" for _ in range(terms))
    extra = f" AND {where}" if where else ""
    return (
        f"WITH q(term, qtf, idf) AS (VALUES {values}), "
        f"params(k1, b, avgdl, weight) AS (SELECT {ph}, {ph}, {ph}, {ph}) "
        "SELECT p.memory_id, SUM(q.qtf * q.idf * p.tf * (params.k1 + 1) "
        "/ (p.tf + params.k1 * (1 - params.b + params.b * d.length / params.avgdl))) AS score, "
        "SUM(q.qtf * q.idf) / MAX(params.weight) AS coverage "
        "FROM lexical_postings p "
        "JOIN q ON q.term = p.term "
        "JOIN lexical_docs d ON d.memory_id = p.memory_id "
        "JOIN memories ON memories.id = p.memory_id "
        "CROSS JOIN params "
        f"WHERE p.ns = {ph}{extra} "
        "GROUP BY p.memory_id ORDER BY score DESC, p.memory_id LIMIT " + ph
    )


class SqlLexicalIndex:
    """LexicalIndex as SQL on the record store's database; each call is one transaction run by the backend."""

    def __init__(self, sql: SqlDialect, db: SqlTransactions, bm25: Bm25 | None) -> None:
        self._sql = sql
        self._db = db
        self._bm25 = bm25 or Bm25()

    async def close(self) -> None:
        await self._db.close()

    # -- LexicalIndex -------------------------------------------------------------------------

    async def index(self, namespace: Namespace, docs: Sequence[LexicalDoc]) -> None:
        if not docs:
            return
        digest = namespace.digest

        def write() -> Program[None]:
            for doc in docs:
                # The delete trigger removes the old postings and corrects the namespace totals.
                yield q("DELETE FROM lexical_docs WHERE memory_id = %s", (doc.memory_id,))
                inserted = (
                    yield q(
                        "INSERT INTO lexical_docs (memory_id, ns, length) SELECT %s, %s, %s "
                        "WHERE EXISTS (SELECT 1 FROM memories WHERE id = %s AND ns = %s)",
                        (doc.memory_id, digest, doc.length, doc.memory_id, digest),
                    )
                ).rowcount
                if inserted and doc.terms:  # a row deleted meanwhile gets no postings
                    yield each(
                        "INSERT INTO lexical_postings (ns, term, memory_id, tf) VALUES (%s, %s, %s, %s)",
                        [(digest, term, doc.memory_id, tf) for term, tf in doc.terms.items()],
                    )

        await self._db.transact(write(), write=True)

    async def remove(self, namespace: Namespace, memory_ids: Sequence[str]) -> None:
        if not memory_ids:
            return
        in_ids, values = self._sql.in_list("memory_id", memory_ids)

        def remove() -> Program[None]:
            yield q(f"DELETE FROM lexical_docs WHERE ns = %s AND {in_ids}", (namespace.digest, *values))

        await self._db.transact(remove(), write=True)

    async def search(
        self, namespace: Namespace, query: Mapping[int, int], limit: int, memory_filter: MemoryFilter
    ) -> list[LexicalHit]:
        if not query or limit <= 0:
            return []
        where, values = filter_sql(postings_filter(memory_filter), "%s", self._sql.tags_any)
        digest = namespace.digest
        k1, b = self._bm25.k1, self._bm25.b

        def search() -> Program[list[LexicalHit]]:
            # Two statements, each reading its own snapshot: a write between them shifts an IDF
            # by a document at most; the filters and the rows are the second statement's.
            counts = (yield q(term_weights_sql(len(query)), (*query, digest, digest))).rows
            if not counts:
                return []
            docs, total_length = int(counts[0][0]), int(counts[0][1])
            holding = {int(r[2]): int(r[3]) for r in counts}
            weights = {term: idf(docs, holding.get(term, 0)) for term in query}
            whole = sum(qtf * weights[term] for term, qtf in query.items())
            # Only the terms some memory holds can add to a score.
            held = [(term, qtf, weights[term]) for term, qtf in query.items() if holding.get(term, 0) > 0]
            if not held:
                return []
            params: list[object] = [v for row in held for v in row]
            params += [k1, b, float(total_length) / docs, whole, digest, *values, limit]
            rows = (yield q(bm25_sql(len(held), where), params)).rows
            return [LexicalHit(str(r[0]), float(r[1]), float(r[2])) for r in rows]

        return await self._db.transact(search(), write=False)

    async def terms_held(
        self, namespace: Namespace, memory_ids: Sequence[str], terms: Sequence[int]
    ) -> dict[str, frozenset[int]]:
        if not memory_ids or not terms:
            return {}
        in_ids, id_values = self._sql.in_list("memory_id", memory_ids)
        in_terms, term_values = self._sql.in_list("term", list(dict.fromkeys(terms)))
        # The primary key (ns, term, memory_id) answers it: a few index probes per term.
        sql = f"SELECT memory_id, term FROM lexical_postings WHERE ns = %s AND {in_terms} AND {in_ids}"

        def held() -> Program[dict[str, frozenset[int]]]:
            rows = (yield q(sql, (namespace.digest, *term_values, *id_values))).rows
            out: dict[str, set[int]] = {}
            for memory_id, term in rows:
                out.setdefault(str(memory_id), set()).add(int(term))
            return {m: frozenset(t) for m, t in out.items()}

        return await self._db.transact(held(), write=False)

    async def terms_present(self, namespace: Namespace, terms: Sequence[int]) -> frozenset[int]:
        if not terms:
            return frozenset()
        wanted = list(dict.fromkeys(terms))
        # One probe of the primary key (ns, term, memory_id) per term, whatever its postings
        # count (a speaker's marker is on every turn of theirs).
        sql = (
            f"WITH q(term) AS (VALUES {', '.join(['(%s)'] * len(wanted))}) SELECT term FROM q "
            "WHERE EXISTS (SELECT 1 FROM lexical_postings p WHERE p.ns = %s AND p.term = q.term)"
        )

        def present() -> Program[frozenset[int]]:
            rows = (yield q(sql, (*wanted, namespace.digest))).rows
            return frozenset(int(r[0]) for r in rows)

        return await self._db.transact(present(), write=False)

    async def stats(self, namespace: Namespace) -> tuple[int, int]:
        """(documents, total length) of a namespace; (0, 0) when it has none."""

        def stats() -> Program[tuple[int, int]]:
            sql = "SELECT docs, total_length FROM lexical_stats WHERE ns = %s"
            row = (yield q(sql, (namespace.digest,))).first()
            return (0, 0) if row is None else (int(row[0]), int(row[1]))

        return await self._db.transact(stats(), write=False)

    async def postings_count(self, namespace: Namespace) -> int:
        def count() -> Program[int]:
            row = (yield q("SELECT COUNT(*) FROM lexical_postings WHERE ns = %s", (namespace.digest,))).first()
            return 0 if row is None else int(row[0])

        return await self._db.transact(count(), write=False)
