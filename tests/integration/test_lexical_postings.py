"""The record-store postings of the lexical channel on real SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import math
import sqlite3
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import apsw
import pytest

from memsvc.domain.models import (
    MemoryFilter,
    MemoryKind,
    Namespace,
    RetentionStatus,
    Role,
    StoredMemory,
    Tier,
    new_memory_id,
)
from memsvc.memories.codec import with_plaintext
from memsvc.memories.indexer import LexicalWriter
from memsvc.stores.lexical.analysis import TermHasher
from memsvc.stores.lexical.base import Bm25, LexicalDoc, LexicalHit
from memsvc.stores.lexical.postgres import PostgresLexicalIndex
from memsvc.stores.lexical.sql import bm25_sql
from memsvc.stores.lexical.sqlite import SqliteLexicalIndex
from memsvc.stores.records.postgres import PostgresRecordStore
from memsvc.stores.records.sqlite import SqliteRecordStore
from memsvc.stores.sql import Program, q
from memsvc.stores.sqlite_threads import SqliteDialect
from tests.backends import fresh_schema

pytestmark = pytest.mark.integration
T = TypeVar("T")

ALICE = Namespace("acme", "default", "development", "alice")
BOB = Namespace("acme", "default", "development", "bob")


def row(
    ns: Namespace,
    *,
    tier: Tier = Tier.HOT,
    tags: tuple[str, ...] = (),
    session: str = "",
    retention_status: RetentionStatus = RetentionStatus.ACTIVE,
) -> StoredMemory:
    return StoredMemory(
        id=new_memory_id(),
        namespace=ns,
        ciphertext=b"sealed",
        role=Role.USER,
        kind=MemoryKind.FACT,
        tags=tags,
        session_id=session,
        importance=0.5,
        tier=tier,
        created_at=1_000.0,
        updated_at=1_000.0,
        usage_count=0,
        last_accessed_at=None,
        quality=0.5,
        consistency=1.0,
        decay=1.0,
        retention_status=retention_status,
        embedding_version="v",
        superseded_by="",
        idempotency_key="",
        indexed=False,
    )


class Stores:
    def __init__(self, path: Path | None = None, url: str = "") -> None:
        self.loop = asyncio.new_event_loop()
        self.url = url
        self.records: Any
        self.lexical: Any
        if url:
            self.records = PostgresRecordStore(url)
            self.lexical = PostgresLexicalIndex(url, Bm25(k1=1.2, b=0.75))
        else:
            assert path is not None
            self.records = SqliteRecordStore(path)
            self.lexical = SqliteLexicalIndex(path, Bm25(k1=1.2, b=0.75))
        self.run(self.records.migrate())

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def add(self, ns: Namespace, terms: dict[int, int], **fields: Any) -> str:
        stored = row(ns, **fields)
        self.run(self.records.insert_memories([stored]))
        self.run(self.lexical.index(ns, [LexicalDoc(stored.id, terms, sum(terms.values()))]))
        return stored.id

    def search(self, ns: Namespace, query: dict[int, int], f: MemoryFilter | None = None) -> list[tuple[str, float]]:
        hits = self.run(self.lexical.search(ns, query, 10, f or MemoryFilter()))
        return [(h.memory_id, h.score) for h in hits]

    def close(self) -> None:
        self.run(self.lexical.close())
        self.run(self.records.close())
        self.loop.close()


@pytest.fixture(params=["sqlite", "postgres"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    if request.param == "sqlite":
        s = Stores(tmp_path / "memsvc.db")
        yield s
        s.close()
        return
    with fresh_schema() as url:
        s = Stores(url=url)
        yield s
        s.close()


def bm25(tf: int, df: int, docs: int, length: int, avgdl: float, k1: float = 1.2, b: float = 0.75) -> float:
    idf = math.log(1 + (docs - df + 0.5) / (df + 0.5))
    return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avgdl))


def test_bm25_summed_in_sql_matches_the_formula(stores: Stores) -> None:
    a = stores.add(ALICE, {1: 2, 2: 1})  # length 3
    b = stores.add(ALICE, {1: 1, 3: 4})  # length 5
    stores.add(ALICE, {4: 1})  # length 1
    avgdl = 9 / 3
    hits = dict(stores.search(ALICE, {1: 1, 2: 1}))
    assert hits[a] == pytest.approx(bm25(2, 2, 3, 3, avgdl) + bm25(1, 1, 3, 3, avgdl))
    assert hits[b] == pytest.approx(bm25(1, 2, 3, 5, avgdl))
    assert list(hits) == [a, b]  # best first, and the memory without a query term is absent
    # A repeated query term counts twice.
    assert dict(stores.search(ALICE, {2: 2}))[a] == pytest.approx(2 * bm25(1, 1, 3, 3, avgdl))
    assert stores.run(stores.lexical.stats(ALICE)) == (3, 9)


def test_bm25_weighs_the_query_terms_once_per_search_on_old_and_new_sqlite(tmp_path: Path) -> None:
    """The namespace's statistics and each query term's weight are computed once, not again for
    every posting: on the system's SQLite and on the newest (apsw's own build), whose planner
    folds a CTE that is read twice into the join unless the statement says otherwise. Each
    posting's document is read from one index, without its row."""
    path = tmp_path / "memsvc.db"
    Stores(path).close()  # the schema, as the migrations leave it
    sql = SqliteDialect.native(bm25_sql(3, "", active_only=True))
    params = (1, 1, 2, 1, 3, 1, 1.2, 0.75, "ns", "ns", "ns", 10)
    with contextlib.closing(sqlite3.connect(path)) as system:
        plans = {sqlite3.sqlite_version: [r[3] for r in system.execute(f"EXPLAIN QUERY PLAN {sql}", params)]}
    with contextlib.closing(apsw.Connection(str(path))) as newest:
        plans[apsw.sqlite_lib_version()] = [r[3] for r in newest.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
    assert len(plans) == 2, "apsw should bring a SQLite of its own, newer than the system's"
    for version, plan in plans.items():
        assert {"MATERIALIZE st", "MATERIALIZE w", "MATERIALIZE tw"} <= set(plan), (version, plan)
        assert any(step.startswith("SEARCH d USING COVERING INDEX lexical_docs_search") for step in plan), plan


def test_coverage_is_the_share_of_the_query_idf_weight_a_memory_holds(stores: Stores) -> None:
    a = stores.add(ALICE, {1: 2, 2: 1})
    b = stores.add(ALICE, {1: 1, 3: 4})
    stores.add(ALICE, {4: 1})

    def idf(df: int) -> float:
        return math.log(1 + (3 - df + 0.5) / (df + 0.5))

    # Terms 1 (in two memories), 2 (in one) and 9 (in none: it weighs the most).
    hits = {
        h.memory_id: h.coverage
        for h in stores.run(stores.lexical.search(ALICE, {1: 1, 2: 1, 9: 1}, 10, MemoryFilter()))
    }
    weight = idf(2) + idf(1) + idf(0)
    assert hits[a] == pytest.approx((idf(2) + idf(1)) / weight)
    assert hits[b] == pytest.approx(idf(2) / weight)
    full = stores.run(stores.lexical.search(ALICE, {1: 1, 2: 1}, 10, MemoryFilter()))
    assert full[0].memory_id == a and full[0].coverage == pytest.approx(1.0)


def test_namespaces_are_isolated_with_their_own_frequencies(stores: Stores) -> None:
    mine = stores.add(ALICE, {7: 1})
    theirs = stores.add(BOB, {7: 1})
    stores.add(BOB, {7: 1, 8: 1})
    assert [m for m, _ in stores.search(ALICE, {7: 1})] == [mine]
    assert theirs in [m for m, _ in stores.search(BOB, {7: 1})]
    # In Alice's namespace term 7 is in every document, so its IDF is the floor ln(1 + 0.5 / 1.5).
    assert stores.search(ALICE, {7: 1})[0][1] == pytest.approx(bm25(1, 1, 1, 1, 1.0))


def test_filters_apply_to_lexical_hits(stores: Stores) -> None:
    hot = stores.add(ALICE, {5: 1}, tier=Tier.HOT, tags=("travel",), session="s1")
    cold = stores.add(ALICE, {5: 1}, tier=Tier.COLD, tags=("work",), session="s2")
    assert {m for m, _ in stores.search(ALICE, {5: 1})} == {hot, cold}
    assert [m for m, _ in stores.search(ALICE, {5: 1}, MemoryFilter(tier=Tier.COLD))] == [cold]
    assert [m for m, _ in stores.search(ALICE, {5: 1}, MemoryFilter(tags_any=("travel", "x")))] == [hot]
    assert [m for m, _ in stores.search(ALICE, {5: 1}, MemoryFilter(session_id="s2"))] == [cold]
    assert stores.search(ALICE, {5: 1}, MemoryFilter(created_after=2_000.0)) == []
    stores.run(stores.records.update_memory(ALICE, hot, {"retention_status": RetentionStatus.ARCHIVED}, 1_001.0))
    assert [m for m, _ in stores.search(ALICE, {5: 1})] == [cold]
    assert {m for m, _ in stores.search(ALICE, {5: 1}, MemoryFilter(include_inactive=True))} == {hot, cold}


def test_a_memory_is_found_by_words_only_while_active_whatever_changes_its_status(stores: Stores) -> None:
    # Indexed while already superseded: absent from a default search, found with inactive ones.
    old = stores.add(ALICE, {5: 1}, retention_status=RetentionStatus.SUPERSEDED, tier=Tier.COLD)
    new = stores.add(ALICE, {5: 1}, tier=Tier.COLD)
    assert [m for m, _ in stores.search(ALICE, {5: 1})] == [new]
    assert {m for m, _ in stores.search(ALICE, {5: 1}, MemoryFilter(include_inactive=True))} == {old, new}
    # With a filter on the rows' columns too (the search then joins the memory rows).
    assert [m for m, _ in stores.search(ALICE, {5: 1}, MemoryFilter(tier=Tier.COLD))] == [new]
    # Status changes through any update: the search follows.
    stores.run(stores.records.update_memory(ALICE, old, {"retention_status": RetentionStatus.ACTIVE}, 1_001.0))
    stores.run(stores.records.update_memory(ALICE, new, {"retention_status": RetentionStatus.ARCHIVED}, 1_001.0))
    assert [m for m, _ in stores.search(ALICE, {5: 1})] == [old]
    stores.run(stores.records.update_memory(ALICE, old, {"importance": 0.9}, 1_002.0))  # status untouched
    assert [m for m, _ in stores.search(ALICE, {5: 1}, MemoryFilter(tier=Tier.COLD))] == [old]
    # Reindexing a memory keeps its status.
    stores.run(stores.lexical.index(ALICE, [LexicalDoc(new, {5: 2}, 2)]))
    assert [m for m, _ in stores.search(ALICE, {5: 1})] == [old]


def test_the_migration_marks_the_documents_of_inactive_memories(stores: Stores) -> None:
    # A store written before documents carried the status: migration 8 and those after it undone.
    undone = [version for version, _ in stores.records._migrations if version >= 8]
    postgres = isinstance(stores.records, PostgresRecordStore)
    archived, active = row(ALICE), row(ALICE)

    def before() -> Program[None]:
        yield q("DROP INDEX lexical_docs_search")  # migration 9's, on the status column
        yield q("DROP TRIGGER memories_lexical_status" + (" ON memories" if postgres else ""))
        if postgres:
            yield q("DROP FUNCTION memsvc_memory_status_lexical()")
        yield q("ALTER TABLE lexical_docs DROP COLUMN active")
        yield q("ALTER TABLE memories DROP COLUMN acknowledgement")  # migration 10's
        for trigger in ("lexical_postings_inserted", "lexical_postings_deleted"):  # migration 11's
            yield q(f"DROP TRIGGER {trigger}" + (" ON lexical_postings" if postgres else ""))
        if postgres:
            yield q("DROP FUNCTION memsvc_lexical_posting_inserted()")
            yield q("DROP FUNCTION memsvc_lexical_posting_deleted()")
        yield q("DROP TABLE lexical_terms")
        yield q("DROP INDEX memories_ns_kind_created")  # migration 12's
        yield q("DROP INDEX memories_ns_session_created")  # migration 13's
        yield q("DROP INDEX memories_ns_id_session")  # migration 14's
        yield q("DELETE FROM schema_migrations WHERE version >= 8")
        for memory in (archived, active):
            yield q("INSERT INTO lexical_docs (memory_id, ns, length) VALUES (%s, %s, 1)", (memory.id, ALICE.digest))
            posting = "INSERT INTO lexical_postings (ns, term, memory_id, tf) VALUES (%s, 5, %s, 1)"
            yield q(posting, (ALICE.digest, memory.id))
        yield q("UPDATE memories SET retention_status = 'archived' WHERE id = %s", (archived.id,))

    stores.run(stores.records.insert_memories([archived, active]))
    stores.run(stores.records._write(before()))
    assert stores.run(stores.records.migrate()) == undone
    assert _document_frequencies(stores, ALICE) == {5: (2, 2)}, "counted from the postings"
    assert [m for m, _ in stores.search(ALICE, {5: 1})] == [active.id]
    found = {m for m, _ in stores.search(ALICE, {5: 1}, MemoryFilter(include_inactive=True))}
    assert found == {archived.id, active.id}


def test_reindex_replaces_and_delete_and_forget_remove_postings(stores: Stores) -> None:
    a = stores.add(ALICE, {1: 1, 2: 1})
    b = stores.add(ALICE, {1: 1})
    stores.run(stores.lexical.index(ALICE, [LexicalDoc(a, {3: 3}, 3)]))  # content changed
    assert stores.search(ALICE, {2: 1}) == []
    assert [m for m, _ in stores.search(ALICE, {3: 1})] == [a]
    assert stores.run(stores.lexical.stats(ALICE)) == (2, 4)
    stores.run(stores.lexical.index(ALICE, [LexicalDoc(a, {3: 3}, 3)]))  # idempotent
    assert stores.run(stores.lexical.stats(ALICE)) == (2, 4)
    # Deleting the row drops its postings in the same transaction.
    stores.run(stores.records.delete_memory(ALICE, a))
    assert stores.search(ALICE, {3: 1}) == []
    assert stores.run(stores.lexical.stats(ALICE)) == (1, 1)
    # A late index call for a deleted row writes nothing.
    stores.run(stores.lexical.index(ALICE, [LexicalDoc(a, {3: 1}, 1)]))
    assert stores.search(ALICE, {3: 1}) == []
    other = stores.add(BOB, {1: 1})
    stores.run(stores.records.forget_namespace(ALICE))
    assert stores.run(stores.lexical.postings_count(ALICE)) == 0
    assert stores.run(stores.lexical.stats(ALICE)) == (0, 0)
    assert [m for m, _ in stores.search(BOB, {1: 1})] == [other]
    assert b not in [m for m, _ in stores.search(BOB, {1: 1})]


def test_remove_and_empty_queries(stores: Stores) -> None:
    a = stores.add(ALICE, {1: 1})
    assert stores.search(ALICE, {}) == []
    stores.run(stores.lexical.remove(ALICE, [a]))
    assert stores.search(ALICE, {1: 1}) == []
    assert stores.run(stores.lexical.stats(ALICE)) == (0, 0)
    assert stores.run(stores.records.list_memories(ALICE, MemoryFilter(), None, 10))  # the row stays


def test_terms_held_names_the_asked_terms_each_memory_holds(stores: Stores) -> None:
    a = stores.add(ALICE, {1: 2, 2: 1, 3: 1})
    b = stores.add(ALICE, {2: 1})
    c = stores.add(ALICE, {4: 1})
    theirs = stores.add(BOB, {1: 1, 2: 1})
    held = stores.run(stores.lexical.terms_held(ALICE, [a, b, c, theirs], [1, 2, 9, 2]))
    # Only the asked terms, only the asked memories of the namespace; one holding none is absent.
    assert held == {a: frozenset({1, 2}), b: frozenset({2})}
    # Term ids are full signed 64-bit keyed hashes.
    big = stores.add(ALICE, {-(2**63): 1, 2**63 - 1: 3})
    assert stores.run(stores.lexical.terms_held(ALICE, [big, a], [2**63 - 1, -(2**63), 1])) == {
        big: frozenset({-(2**63), 2**63 - 1}),
        a: frozenset({1}),
    }
    assert stores.run(stores.lexical.terms_held(ALICE, [], [1])) == {}
    assert stores.run(stores.lexical.terms_held(ALICE, [a], [])) == {}
    # Reindexed content answers with its new terms.
    stores.run(stores.lexical.index(ALICE, [LexicalDoc(a, {9: 1}, 1)]))
    assert stores.run(stores.lexical.terms_held(ALICE, [a, b], [1, 2, 9])) == {a: frozenset({9}), b: frozenset({2})}


def test_sessions_holding_names_the_memories_holding_a_term_those_of_their_sessions_and_the_rest(
    stores: Stores,
) -> None:
    said = stores.add(ALICE, {1: 1, 5: 1}, session="chat")  # holds the name's term
    other_side = stores.add(ALICE, {5: 1}, session="chat")  # the other side of that chat
    elsewhere = stores.add(ALICE, {5: 1}, session="another")
    loose = stores.add(ALICE, {1: 1})  # no session: only itself
    unsessioned = stores.add(ALICE, {5: 1})
    theirs = stores.add(BOB, {1: 1}, session="chat")
    asked = [said, other_side, elsewhere, loose, unsessioned, theirs]
    named, conversation, without = stores.run(stores.lexical.sessions_holding(ALICE, asked, [1, 9]))
    assert named == frozenset({said, loose})
    assert conversation == frozenset({said, other_side, loose})
    # Of a session none of the holders is of; a memory of no session is of no conversation.
    assert without == frozenset({elsewhere})
    # Every asked memory holding a term: all of them are of a conversation with the name.
    assert stores.run(stores.lexical.sessions_holding(ALICE, [said, loose], [1])) == (
        frozenset({said, loose}),
        frozenset({said, loose}),
        frozenset(),
    )
    # The same answer once the term has many more postings than there are asked memories (each
    # asked memory is then looked up, not every posting read).
    for _ in range(30):
        stores.add(ALICE, {1: 1}, session="crowd")
    assert stores.run(stores.lexical.sessions_holding(ALICE, asked, [1, 9])) == (named, conversation, without)
    # Only among the asked memories: a session's holder that is not asked does not count, and
    # with no holder asked nothing is known of any conversation.
    empty: tuple[frozenset[str], ...] = (frozenset(), frozenset(), frozenset())
    assert stores.run(stores.lexical.sessions_holding(ALICE, [other_side, elsewhere], [1])) == empty
    assert stores.run(stores.lexical.sessions_holding(ALICE, [], [1])) == empty
    assert stores.run(stores.lexical.sessions_holding(ALICE, [said], [])) == empty


def test_sessions_with_names_every_session_in_which_a_memory_holds_a_term(stores: Stores) -> None:
    stores.add(ALICE, {1: 1, 5: 1}, session="chat")
    stores.add(ALICE, {5: 1}, session="chat")
    stores.add(ALICE, {2: 1}, session="another")
    stores.add(ALICE, {5: 1}, session="elsewhere")  # no asked term
    stores.add(ALICE, {1: 1})  # no session
    stores.add(BOB, {1: 1}, session="bobs")  # another namespace
    assert stores.run(stores.lexical.sessions_with(ALICE, [1, 2, 9])) == frozenset({"chat", "another"})
    assert stores.run(stores.lexical.sessions_with(ALICE, [9])) == frozenset()
    assert stores.run(stores.lexical.sessions_with(ALICE, [])) == frozenset()


def test_terms_present_names_the_asked_terms_any_memory_of_the_namespace_holds(stores: Stores) -> None:
    a = stores.add(ALICE, {1: 1, 2: 1})
    stores.add(ALICE, {3: 1})
    stores.add(BOB, {4: 1})
    assert stores.run(stores.lexical.terms_present(ALICE, [1, 3, 4, 9, 1])) == frozenset({1, 3})
    assert stores.run(stores.lexical.terms_present(BOB, [1, 4])) == frozenset({4})
    assert stores.run(stores.lexical.terms_present(ALICE, [])) == frozenset()
    # Gone with the postings that held it.
    stores.run(stores.lexical.remove(ALICE, [a]))
    assert stores.run(stores.lexical.terms_present(ALICE, [1, 2, 3])) == frozenset({3})


def test_a_turn_is_posted_with_its_speakers_markers_outside_its_length(stores: Stores) -> None:
    hasher = TermHasher(lambda purpose: purpose.encode().ljust(32, b"k"))
    writer = LexicalWriter(hasher, stores.lexical)
    turn, fact = row(ALICE), row(ALICE)
    stores.run(stores.records.insert_memories([turn, fact]))
    text = "Melanie: I swim laps at dawn"
    opened = [(turn.id, with_plaintext(turn, "I swim laps at dawn", {}, "Melanie", text))]
    stores.run(writer.write(ALICE, [*opened, (fact.id, with_plaintext(fact, "Caroline paints", {}))]))
    melanie, caroline = hasher.speaker_ids("acme", "Melanie"), hasher.speaker_ids("acme", "Caroline")
    # Melanie spoke; Caroline is only talked about: her name is a word of the fact, not a speaker.
    assert stores.run(stores.lexical.terms_present(ALICE, [*melanie, *caroline])) == frozenset(melanie)
    assert stores.run(stores.lexical.terms_present(BOB, melanie)) == frozenset()
    # BM25's lengths are the texts' own: the marker is not a word of the turn.
    words = hasher.bag("acme", text).length + hasher.bag("acme", "Caroline paints").length
    assert stores.run(stores.lexical.stats(ALICE)) == (2, words)


def test_document_frequencies_count_the_namespaces_memories_holding_each_term(stores: Stores) -> None:
    stores.add(ALICE, {1: 3, 2: 1})
    stores.add(ALICE, {1: 1})
    stores.add(BOB, {1: 1, 2: 1})
    assert stores.run(stores.lexical.document_frequencies(ALICE, [1, 2, 9])) == (2, {1: 2, 2: 1})
    assert stores.run(stores.lexical.document_frequencies(ALICE, [])) == (2, {})
    assert stores.run(stores.lexical.document_frequencies(Namespace("acme", "default", "development", "x"), [1])) == (
        0,
        {},
    )


class _Plan:
    """What LexicalRecall reads of a query plan."""

    namespace = ALICE
    limit = 10
    memory_filter = MemoryFilter()


def _indexed(stores: Stores, texts: list[str]) -> tuple[TermHasher, list[str]]:
    """`texts` posted as Alice's memories under a test key: the hasher and their ids."""
    hasher = TermHasher(lambda purpose: purpose.encode().ljust(32, b"k"))
    return hasher, [stores.add(ALICE, hasher.bag(ALICE.tenant, t).counts) for t in texts]


def test_a_term_most_memories_hold_only_adds_its_weight_to_what_the_other_terms_found(stores: Stores) -> None:
    """A user's own name in most of a long history: left out of the scan, it still tells apart
    the memories the question's other words found, and a memory with nothing but the name is no
    hit (it weighs little: IDF 0.1 here against 1.9 for "bassoon")."""
    from memsvc.deadline import Deadline
    from memsvc.pipeline.query.lexical import LexicalRecall

    hasher, ids = _indexed(
        stores,
        [
            "melanie plays the bassoon",
            "melanie bought a new bassoon reed",
            "the orchestra needs a bassoon",
            *[f"melanie went for a walk number {i}" for i in range(20)],
        ],
    )

    def hits(common_terms_from: int) -> list[tuple[str, float, float]]:
        recall = LexicalRecall(hasher, stores.lexical, 30, common_terms_from=common_terms_from)
        found = stores.run(recall.run(_Plan(), "melanie bassoon", Deadline.after(10)))  # type: ignore[arg-type]
        return [(c.memory_id, c.lexical_score, c.term_coverage) for c in found]

    scanned = hits(common_terms_from=1_000)  # a small store: every term is scanned
    split = hits(common_terms_from=5)
    # The same order of what holds "bassoon"; the memories with the name alone are left out.
    assert [m for m, _, _ in scanned][:3] == [m for m, _, _ in split]
    assert {m for m, _, _ in split} == set(ids[:3])
    assert {m for m, _, _ in scanned} == set(ids)  # the walks hold the name alone
    # The coverage is over both terms either way: the reed memory holds all of the query.
    assert dict((m, c) for m, _, c in split)[ids[1]] == pytest.approx(1.0)
    assert dict((m, c) for m, _, c in split)[ids[2]] == pytest.approx(dict((m, c) for m, _, c in scanned)[ids[2]])


def test_a_name_weighed_only_finds_nothing_alone_and_lifts_what_the_other_words_found(stores: Stores) -> None:
    """A speaker's name that few memories hold (a long history of other people's chats): where
    common terms are left out of the scan, a memory that only says it is no hit, and one that
    says it beside the question's other words outranks one that says those words alone. In a
    small namespace every term is scanned, the name too. In either, the name's weight is no
    part of what a hit covers of the question's topic (the relevance floor's words)."""
    from memsvc.deadline import Deadline
    from memsvc.pipeline.query.lexical import LexicalRecall
    from memsvc.pipeline.query.recall import Candidate

    hasher, ids = _indexed(
        stores,
        [
            "good for you jon",
            "jon visited rome",
            "rosa visited lisbon and porto",
            "omar visited berlin twice",
            *[f"a grocery list number {i}" for i in range(20)],
        ],
    )

    def found(
        common_terms_from: int, names: list[str], question: str = "which cities has jon visited"
    ) -> list[Candidate]:
        recall = LexicalRecall(hasher, stores.lexical, 30, common_terms_from=common_terms_from)
        return stores.run(recall.run(_Plan(), question, Deadline.after(10), names=names))  # type: ignore[arg-type]

    unnamed = {c.memory_id: c for c in found(common_terms_from=10, names=[])}
    assert ids[0] in unnamed  # found by the name alone
    assert unnamed[ids[0]].topic_coverage == unnamed[ids[0]].term_coverage > 0
    small = {c.memory_id: c for c in found(common_terms_from=1_000, names=["Jon"])}
    assert ids[0] in small  # a small namespace scans the name
    assert small[ids[0]].term_coverage > 0 and small[ids[0]].topic_coverage == 0
    assert small[ids[1]].topic_coverage == pytest.approx(small[ids[2]].term_coverage)  # "visited" alone
    weighed = found(common_terms_from=10, names=["Jon"])
    assert weighed[0].memory_id == ids[1]
    assert {c.memory_id for c in weighed} == set(ids[1:4])
    assert weighed[0].term_coverage > weighed[0].topic_coverage == pytest.approx(weighed[1].term_coverage)
    # A question of nothing but the name: holding it is what it asks.
    only = {c.memory_id: c for c in found(common_terms_from=1_000, names=["Jon"], question="jon")}
    assert only[ids[0]].topic_coverage == only[ids[0]].term_coverage == pytest.approx(1.0)


def _document_frequencies(stores: Stores, ns: Namespace) -> dict[int, tuple[int, int]]:
    """term -> (df kept in lexical_terms, postings counted)."""

    def read() -> Program[dict[int, tuple[int, int]]]:
        kept = (yield q("SELECT term, df FROM lexical_terms WHERE ns = %s", (ns.digest,))).rows
        counted = (
            yield q("SELECT term, COUNT(*) FROM lexical_postings WHERE ns = %s GROUP BY term", (ns.digest,))
        ).rows
        kept_of = {int(t): int(n) for t, n in kept}
        counted_of = {int(t): int(n) for t, n in counted}
        return {t: (kept_of.get(t, 0), counted_of.get(t, 0)) for t in kept_of.keys() | counted_of.keys()}

    return stores.run(stores.lexical._db.transact(read(), write=False))


def test_each_terms_document_frequency_follows_its_postings(stores: Stores) -> None:
    a = stores.add(ALICE, {1: 2, 2: 1})
    stores.add(ALICE, {1: 1, 3: 1})
    stores.add(BOB, {1: 1})
    stores.run(stores.lexical.index(ALICE, [LexicalDoc(a, {3: 1}, 1)]))  # content changed
    frequencies = _document_frequencies(stores, ALICE)
    assert frequencies == {1: (1, 1), 3: (2, 2)}
    stores.run(stores.records.delete_memory(ALICE, a))
    assert _document_frequencies(stores, ALICE) == {1: (1, 1), 3: (1, 1)}
    stores.run(stores.records.forget_namespace(ALICE))
    assert _document_frequencies(stores, ALICE) == {}
    assert _document_frequencies(stores, BOB) == {1: (1, 1)}


def _capped(stores: Stores, path: Path) -> Any:
    """A second index on the same store that treats a namespace of over 10 memories as large and
    reads 5 postings of a term there."""
    if isinstance(stores.records, PostgresRecordStore):
        return PostgresLexicalIndex(stores.url, Bm25(k1=1.2, b=0.75), short_search_docs=10, term_postings=5)
    return SqliteLexicalIndex(path, Bm25(k1=1.2, b=0.75), short_search_docs=10, term_postings=5)


def test_a_large_namespace_reads_the_newest_postings_of_a_common_term_and_scores_exactly(
    stores: Stores, tmp_path: Path
) -> None:
    """Term 1 is in every memory, term 2 in three old ones. Through the capped search the three
    are still found (by term 2) with their exact BM25, term 1's share included; term 1 itself
    reaches only its newest postings; a query of rare terms alone is the exact search."""
    old = [stores.add(ALICE, {1: 1, 2: 1, 5: i % 3 + 1}) for i in range(3)]
    newest = [stores.add(ALICE, {1: 1 + i % 2, 4: 1}) for i in range(37)]
    capped = _capped(stores, tmp_path / "memsvc.db")

    def search(index: Any, query: dict[int, int], limit: int = 10) -> list[LexicalHit]:
        return list(stores.run(index.search(ALICE, query, limit, MemoryFilter())))

    try:
        search(capped, {2: 1})  # counts the namespace: large from now on
        exact = search(stores.lexical, {2: 1, 5: 1})
        found = search(capped, {2: 1, 5: 1})
        assert [h.memory_id for h in found] == [h.memory_id for h in exact] and len(found) == 3
        assert [h.score for h in found] == pytest.approx([h.score for h in exact])
        assert [h.coverage for h in found] == pytest.approx([h.coverage for h in exact])
        exact_of = {h.memory_id: h for h in search(stores.lexical, {1: 1, 2: 1}, 100)}
        found = search(capped, {1: 1, 2: 1})
        assert {h.memory_id for h in found[:3]} == set(old)
        assert {h.memory_id for h in found[3:]} <= set(newest[-5:]) and len(found) == 8
        for hit in found:
            assert hit.score == pytest.approx(exact_of[hit.memory_id].score)
            assert hit.coverage == pytest.approx(exact_of[hit.memory_id].coverage)
        assert [h.score for h in found] == sorted((h.score for h in found), reverse=True)
        inactive = MemoryFilter(include_inactive=True)
        assert stores.run(capped.search(ALICE, {2: 1}, 10, inactive))
    finally:
        stores.run(capped.close())


def test_the_share_of_memories_involving_a_name_counts_each_memory_once(stores: Stores) -> None:
    """Said by a speaker (their markers) or to or about them (the name's word), over the
    namespace's memories; a name of two words counts each memory once, not once a word."""
    from memsvc.deadline import Deadline
    from memsvc.pipeline.query.lexical import LexicalRecall

    hasher = TermHasher(lambda purpose: purpose.encode().ljust(32, b"k"))
    mel = hasher.speaker_ids(ALICE.tenant, "Mel Jones")
    said_by_mel = {**hasher.bag(ALICE.tenant, "I swim laps").counts, **dict.fromkeys(mel, 1)}
    for _ in range(3):
        stores.add(ALICE, said_by_mel)
    stores.add(ALICE, hasher.bag(ALICE.tenant, "good luck Mel Jones").counts)
    for i in range(4):
        stores.add(ALICE, hasher.bag(ALICE.tenant, f"a grocery list number {i}").counts)
    recall = LexicalRecall(hasher, stores.lexical, 30)
    share = stores.run(recall.share_involving(_Plan(), ["Mel Jones"], Deadline.after(10)))  # type: ignore[arg-type]
    assert share == pytest.approx(4 / 8)
    assert stores.run(recall.share_involving(_Plan(), ["Omar"], Deadline.after(10))) == 0.0  # type: ignore[arg-type]
