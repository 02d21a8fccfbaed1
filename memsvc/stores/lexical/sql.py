"""The lexical index's SQL, written once for SQLite and PostgreSQL: BM25 summed in one query.

Tables come from migration 2 (`memsvc/stores/records/migrations.py`). The search joins the
memory rows, so the caller's filters apply inside the query, as they do in the vector index;
both backends run the same statements, so both rank identically.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from memsvc.domain.models import MemoryFilter, Namespace
from memsvc.stores.lexical.base import Bm25, LexicalDoc, LexicalHit, postings_filter
from memsvc.stores.records.rows import filter_sql
from memsvc.stores.sql import Program, SqlDialect, SqlTransactions, each, q


def _filtered(conditions: list[str], active_only: bool, where: str) -> tuple[str, list[str]]:
    """The join and conditions a search's memory filter adds: active documents only, and the
    record store's row conditions (`where`) through a join of `memories`."""
    if active_only:
        conditions = [*conditions, "d.active = 1"]
    if not where:
        return "", conditions
    return "CROSS JOIN memories ", [*conditions, "memories.id = p.memory_id", where]


def bm25_sql(terms: int, where: str, *, active_only: bool) -> str:
    """One query: document frequencies of the query terms, then BM25 summed per memory, and
    the share of the query's IDF weight the memory contains (its term coverage).

    Bound in order: (term, query count) x terms, k1, b, namespace (stats), namespace (df),
    namespace (postings), the filter's values, limit. IDF is Lucene's, never negative. A query
    term no memory has weighs the most: a query about something never said covers little.
    Each row also carries the namespace's document count.

    Everything that depends only on the query term (its IDF, BM25's constants, the query's
    whole weight) is computed once per term, in `w` and `tw`, and the postings are read term by
    term from `tw`: SQLite keeps a CROSS JOIN's order, so it never scans a namespace's postings
    to meet the few query terms (other engines plan the joins themselves). Each posting then
    joins only its document (and the memory row, for a filter on its columns: whether a memory
    is active is on its document). Joining the one-row statistics, parameters and weight to
    every posting instead cost 5 % more instructions a search (docs/performance.md).

    `st`, `w` and `tw` are computed once (MATERIALIZED), as PostgreSQL and SQLite up to 3.40 do
    for a CTE read twice. Newer SQLite (3.46, Debian 13's, which the `python:3.11-slim` image
    now builds on) folds them into the join instead and looks up the namespace's statistics and
    the term's weight again for every posting: 435 against 303 us a search on the bench store.
    """
    ph = "%s"
    values = ", ".join(f"({ph}, {ph})" for _ in range(terms))
    rows, conditions = _filtered([f"p.ns = {ph}", "p.term = tw.term", "d.memory_id = p.memory_id"], active_only, where)
    return (
        f"WITH q(term, qtf) AS (VALUES {values}), "
        f"params(k1, b) AS (SELECT {ph}, {ph}), "
        "st AS MATERIALIZED (SELECT docs, CAST(total_length AS DOUBLE PRECISION) / docs AS avgdl FROM lexical_stats "
        f"WHERE ns = {ph} AND docs > 0), "
        "df AS (SELECT term, COUNT(*) AS n FROM lexical_postings "
        f"WHERE ns = {ph} AND term IN (SELECT term FROM q) GROUP BY term), "
        "w AS MATERIALIZED (SELECT q.term, "
        "q.qtf * ln(1.0 + (st.docs - COALESCE(df.n, 0) + 0.5) / (COALESCE(df.n, 0) + 0.5)) AS idf, "
        "params.k1 + 1 AS k1_1, params.k1 * (1 - params.b) AS k1_fixed, "
        "params.k1 * params.b / st.avgdl AS k1_per_length, "
        "st.docs AS docs "
        "FROM q CROSS JOIN st CROSS JOIN params LEFT JOIN df ON df.term = q.term), "
        # BM25 of a posting: idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avgdl)).
        "tw AS MATERIALIZED (SELECT term, idf, idf * k1_1 AS idf_k1_1, k1_fixed, k1_per_length, docs, "
        "(SELECT SUM(idf) FROM w) AS weight FROM w) "
        "SELECT p.memory_id, SUM(tw.idf_k1_1 * p.tf / (p.tf + tw.k1_fixed + tw.k1_per_length * d.length)) AS score, "
        "SUM(tw.idf) / MAX(tw.weight) AS coverage, MAX(tw.docs) AS docs "
        f"FROM tw CROSS JOIN lexical_postings p CROSS JOIN lexical_docs d {rows}"
        f"WHERE {' AND '.join(conditions)} "
        "GROUP BY p.memory_id ORDER BY score DESC, p.memory_id LIMIT " + ph
    )


def capped_bm25_sql(terms: int, where: str, *, active_only: bool) -> str:
    """BM25 over each term's newest `cap` postings at most, exact for the best candidates.

    For a large namespace, whose common terms have postings in the tens of thousands: a search
    that read them all cost in proportion to the longest lists (the user's memory count). Here
    each term's postings are read newest first (memory ids sort by creation time), at most `cap`
    of them: a term in fewer memories is read whole, as before. The memories reached are ranked
    by what was read, and the best `pool` of them then scored exactly: their BM25 and coverage
    are those of the exact search. Only a memory that none of the query's rarer terms reaches
    and that is older than a common term's newest `cap` is left to the dense channel.

    Every posting read is exact; what a pool memory may lack is a posting of a term whose list
    was cut (`capped` 1) where the memory is older than the oldest the list holds: only those
    are looked up again, by their key, with the document length the pool carries. Probing
    every pool memory for every term and reading each document again cost twice the time of
    the whole search (20 against 9 ms p50 at 100,000 memories).

    The IDF of each term is computed by the caller from `lexical_terms` (a row per term, kept by
    triggers), not counted from the postings. Bound in order: namespace and term x terms (the
    capped lists, each with cap), (term, idf, idf * (k1 + 1), k1 * (1 - b), k1 * b / avgdl,
    capped) x terms, the query's whole weight, the filter's values, pool, namespace, limit.
    """
    ph = "%s"
    lists = " UNION ALL ".join(
        f"SELECT * FROM (SELECT term, memory_id, tf FROM lexical_postings WHERE ns = {ph} AND term = {ph} "
        f"ORDER BY memory_id DESC LIMIT {ph}) AS l{i}"
        for i in range(terms)
    )
    weights = ", ".join(f"({ph}, {ph}, {ph}, {ph}, {ph}, {ph})" for _ in range(terms))
    rows, conditions = _filtered(["p.term = w.term", "d.memory_id = p.memory_id"], active_only, where)
    bm25 = "w.idf_k1_1 * p.tf / (p.tf + w.k1_fixed + w.k1_per_length * {length})"
    read = bm25.format(length="d.length")
    return (
        f"WITH p AS ({lists}), "
        f"w(term, idf, idf_k1_1, k1_fixed, k1_per_length, capped) AS (VALUES {weights}), "
        f"total(weight) AS (SELECT {ph}), "
        "cut AS (SELECT term, MIN(memory_id) AS oldest FROM p GROUP BY term), "
        f"pool AS (SELECT p.memory_id, MAX(d.length) AS length, SUM({read}) AS known, SUM(w.idf) AS known_idf "
        f"FROM p CROSS JOIN w CROSS JOIN lexical_docs d {rows}"
        f"WHERE {' AND '.join(conditions)} GROUP BY p.memory_id ORDER BY known DESC, p.memory_id LIMIT {ph}), "
        f"probed AS (SELECT pool.memory_id, SUM({bm25.format(length='pool.length')}) AS score, SUM(w.idf) AS idf "
        "FROM pool CROSS JOIN w CROSS JOIN cut CROSS JOIN lexical_postings p "
        "WHERE w.capped = 1 AND cut.term = w.term AND pool.memory_id < cut.oldest "
        f"AND p.ns = {ph} AND p.term = w.term AND p.memory_id = pool.memory_id "
        "GROUP BY pool.memory_id) "
        "SELECT pool.memory_id, pool.known + COALESCE(probed.score, 0) AS score, "
        "(pool.known_idf + COALESCE(probed.idf, 0)) / total.weight AS coverage "
        "FROM pool CROSS JOIN total LEFT JOIN probed ON probed.memory_id = pool.memory_id "
        f"ORDER BY score DESC, pool.memory_id LIMIT {ph}"
    )


# A search's cost grows with the postings of its terms, so with its namespace: about 1 ms at
# 1,000 documents on a 2-core machine. Up to this many it is a short read (`transact`), and
# reads every posting of its terms; past it, each term's newest `term_postings` (capped_bm25_sql).
SHORT_SEARCH_DOCS = 5_000
# Postings read per query term in a large namespace, and candidates scored exactly per hit asked.
DEFAULT_TERM_POSTINGS = 500
_POOL_PER_HIT = 4
# Postings of the asked terms per candidate id below which `sessions_holding` reads the terms'
# postings rather than probing each id's.
_SCAN_POSTINGS_PER_ID = 4


class SqlLexicalIndex:
    """LexicalIndex as SQL on the record store's database; each call is one transaction run by the backend."""

    def __init__(
        self,
        sql: SqlDialect,
        db: SqlTransactions,
        bm25: Bm25 | None,
        short_search_docs: int = SHORT_SEARCH_DOCS,
        term_postings: int = DEFAULT_TERM_POSTINGS,
    ) -> None:
        self._sql = sql
        self._db = db
        self._bm25 = bm25 or Bm25()
        self._short_search_docs = short_search_docs
        self._term_postings = term_postings
        # The namespaces whose last search counted more documents than that: few, as such users are.
        self._large: set[str] = set()

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
                        "INSERT INTO lexical_docs (memory_id, ns, length, active) "
                        "SELECT %s, %s, %s, CASE WHEN retention_status = 'active' THEN 1 ELSE 0 END "
                        "FROM memories WHERE id = %s AND ns = %s",
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
        # Whether a memory is active is on its document (bm25_sql); the rest is on its row.
        row_filter = replace(postings_filter(memory_filter), include_inactive=True)
        where, values = filter_sql(row_filter, "%s", self._sql.tags_any)
        digest = namespace.digest
        if digest in self._large:
            return await self._capped_search(digest, query, limit, where, values, memory_filter.include_inactive)
        sql = bm25_sql(len(query), where, active_only=not memory_filter.include_inactive)
        params: list[Any] = [v for term, count in query.items() for v in (term, count)]
        params += [self._bm25.k1, self._bm25.b, digest, digest, digest, *values, limit]

        def search() -> Program[list[LexicalHit]]:
            rows = (yield q(sql, (*params,))).rows
            if rows and rows[0][3] > self._short_search_docs:
                self._large.add(digest)
            return [LexicalHit(str(r[0]), float(r[1]), float(r[2])) for r in rows]

        return await self._db.transact(search(), write=False, short=True)

    async def _capped_search(
        self,
        digest: str,
        query: Mapping[int, int],
        limit: int,
        where: str,
        values: Sequence[Any],
        include_inactive: bool,
    ) -> list[LexicalHit]:
        """A large namespace's search: the document frequencies of its terms from `lexical_terms`;
        the exact query when all their postings number no more than the cap for each term, else
        capped_bm25_sql."""
        terms = list(query)
        in_terms, term_values = self._sql.in_list("term", terms)
        k1, b = self._bm25.k1, self._bm25.b
        sql = capped_bm25_sql(len(terms), where, active_only=not include_inactive)
        exact_sql = bm25_sql(len(terms), where, active_only=not include_inactive)
        exact_params: list[Any] = [v for term, count in query.items() for v in (term, count)]
        exact_params += [k1, b, digest, digest, digest, *values, limit]

        def search() -> Program[list[LexicalHit]]:
            stats = (yield q("SELECT docs, total_length FROM lexical_stats WHERE ns = %s", (digest,))).first()
            if stats is None or not stats[0]:
                return []
            docs, avgdl = int(stats[0]), float(stats[1]) / int(stats[0])
            if docs <= self._short_search_docs:
                self._large.discard(digest)  # shrunk (deletions): the exact search serves it again
            found = yield q(f"SELECT term, df FROM lexical_terms WHERE ns = %s AND {in_terms}", (digest, *term_values))
            df = {int(r[0]): int(r[1]) for r in found.rows}
            if sum(df.values()) <= self._term_postings * len(terms):
                # All the postings cost no more than the capped read: the exact search.
                rows = (yield q(exact_sql, (*exact_params,))).rows
                return [LexicalHit(str(r[0]), float(r[1]), float(r[2])) for r in rows]
            # Lucene's IDF, as bm25_sql: a term no memory has weighs the most.
            idf = {t: query[t] * math.log(1.0 + (docs - df.get(t, 0) + 0.5) / (df.get(t, 0) + 0.5)) for t in terms}
            cap = self._term_postings
            params: list[Any] = [v for t in terms for v in (digest, t, cap)]
            params += [
                v
                for t in terms
                for v in (t, idf[t], idf[t] * (k1 + 1), k1 * (1 - b), k1 * b / avgdl, int(df.get(t, 0) > cap))
            ]
            params += [sum(idf.values()) or 1.0, *values, limit * _POOL_PER_HIT, digest, limit]
            rows = (yield q(sql, (*params,))).rows
            return [LexicalHit(str(r[0]), float(r[1]), float(r[2])) for r in rows]

        return await self._db.transact(search(), write=False, short=False)

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

        return await self._db.transact(held(), write=False, short=True)

    async def sessions_holding(
        self, namespace: Namespace, memory_ids: Sequence[str], terms: Sequence[int]
    ) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
        if not memory_ids or not terms:
            return frozenset(), frozenset(), frozenset()
        ids = list(dict.fromkeys(memory_ids))
        in_terms, term_values = self._sql.in_list("term", list(dict.fromkeys(terms)))
        postings = f"SELECT COALESCE(SUM(df), 0) FROM lexical_terms WHERE ns = %s AND {in_terms}"
        scanned = f"SELECT memory_id FROM lexical_postings WHERE ns = %s AND {in_terms}"
        in_rows, row_values = self._sql.in_list("id", ids)
        # Read from the (ns, id, session_id) index alone, not the rows.
        sessions = f"SELECT id, session_id FROM memories WHERE ns = %s AND {in_rows}"

        def read() -> Program[tuple[frozenset[str], frozenset[str], frozenset[str]]]:
            row = (yield q(postings, (namespace.digest, *term_values))).first()
            # A speaker's marker is on each of their turns: the few hundred postings of a person
            # among other people's chats are read in a fraction of the time a key probe per
            # candidate takes (1.2 against 6.7 ms for 899 postings and 570 ids); the postings of
            # a name on every turn of a long history are not.
            if row is not None and int(row[0]) <= _SCAN_POSTINGS_PER_ID * len(ids):
                asked = set(ids)
                rows = (yield q(scanned, (namespace.digest, *term_values))).rows
                held = frozenset(str(r[0]) for r in rows if r[0] in asked)
            else:
                in_ids, id_values = self._sql.in_list("memory_id", ids)
                probed = f"SELECT DISTINCT memory_id FROM lexical_postings WHERE ns = %s AND {in_terms} AND {in_ids}"
                rows = (yield q(probed, (namespace.digest, *term_values, *id_values))).rows
                held = frozenset(str(r[0]) for r in rows)
            if not held or len(held) == len(ids):
                # None holds a term: no conversation is known. All do: all are of one with the name.
                return held, held, frozenset()
            session_of = {str(r[0]): str(r[1]) for r in (yield q(sessions, (namespace.digest, *row_values))).rows}
            involved = {session_of[m] for m in held if session_of.get(m)}
            elsewhere = frozenset(m for m, s in session_of.items() if s and s not in involved)
            return held, held | {m for m, s in session_of.items() if s and s in involved}, elsewhere

        return await self._db.transact(read(), write=False, short=True)

    async def sessions_with(self, namespace: Namespace, terms: Sequence[int]) -> frozenset[str]:
        if not terms:
            return frozenset()
        in_terms, values = self._sql.in_list("p.term", list(dict.fromkeys(terms)))
        # From the terms' postings to each memory's session by its key (the (ns, id, session_id)
        # index alone), in that order: left to choose, SQLite walked every memory of the
        # namespace instead (20 against 4 ms at 13,000 memories).
        sql = (
            "SELECT DISTINCT m.session_id FROM lexical_postings p CROSS JOIN memories m "
            f"WHERE p.ns = %s AND {in_terms} AND m.ns = p.ns AND m.id = p.memory_id AND m.session_id <> ''"
        )

        def read() -> Program[frozenset[str]]:
            rows = (yield q(sql, (namespace.digest, *values))).rows
            return frozenset(str(r[0]) for r in rows)

        return await self._db.transact(read(), write=False, short=True)

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

        return await self._db.transact(present(), write=False, short=True)

    async def document_frequencies(self, namespace: Namespace, terms: Sequence[int]) -> tuple[int, dict[int, int]]:
        if not terms:
            return (await self.stats(namespace))[0], {}
        in_terms, values = self._sql.in_list("term", list(dict.fromkeys(terms)))
        # Kept per term by the postings' triggers (`lexical_terms`): nothing is counted here.
        sql = f"SELECT term, df FROM lexical_terms WHERE ns = %s AND {in_terms} AND df > 0"

        def frequencies() -> Program[tuple[int, dict[int, int]]]:
            row = (yield q("SELECT docs FROM lexical_stats WHERE ns = %s", (namespace.digest,))).first()
            rows = (yield q(sql, (namespace.digest, *values))).rows
            return (0 if row is None else int(row[0])), {int(t): int(n) for t, n in rows}

        return await self._db.transact(frequencies(), write=False, short=True)

    async def stats(self, namespace: Namespace) -> tuple[int, int]:
        """(documents, total length) of a namespace; (0, 0) when it has none."""

        def stats() -> Program[tuple[int, int]]:
            sql = "SELECT docs, total_length FROM lexical_stats WHERE ns = %s"
            row = (yield q(sql, (namespace.digest,))).first()
            return (0, 0) if row is None else (int(row[0]), int(row[1]))

        return await self._db.transact(stats(), write=False, short=True)

    async def postings_count(self, namespace: Namespace) -> int:
        def count() -> Program[int]:
            row = (yield q("SELECT COUNT(*) FROM lexical_postings WHERE ns = %s", (namespace.digest,))).first()
            return 0 if row is None else int(row[0])

        return await self._db.transact(count(), write=False)
