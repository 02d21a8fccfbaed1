"""Where SQLite work runs: short reads on the event loop's thread, the rest on worker threads."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from memsvc.domain.models import MemoryFilter, Namespace
from memsvc.errors import Unavailable
from memsvc.stores.lexical.base import Bm25, LexicalDoc
from memsvc.stores.lexical.sql import SqlLexicalIndex
from memsvc.stores.records.sqlite import SqliteRecordStore
from memsvc.stores.sql import Program, q
from memsvc.stores.sqlite_threads import SQLITE, SqliteThreads
from tests.integration.test_lexical_postings import row

pytestmark = pytest.mark.integration


def thread_of_a_read() -> Program[int]:
    yield q("SELECT 1")
    return threading.get_ident()


def threads(path: Path) -> SqliteThreads:
    return SqliteThreads(path, workers=2, busy_timeout_ms=1000, thread_name="test", what="test store")


def test_short_reads_run_on_the_loop_and_the_rest_on_workers(tmp_path: Path) -> None:
    async def main() -> None:
        db = threads(tmp_path / "t.db")
        loop_thread = threading.get_ident()
        assert await db.transact(thread_of_a_read(), write=False, short=True) == loop_thread
        assert await db.transact(thread_of_a_read(), write=False) != loop_thread
        # A write may wait for the database lock: never on the loop, short or not.
        assert await db.transact(thread_of_a_read(), write=True, short=True) != loop_thread
        await db.close()
        with pytest.raises(Unavailable):
            await db.transact(thread_of_a_read(), write=False, short=True)

    asyncio.run(main())


class RecordingTransactions:
    """The real SQLite backend, noting whether each read was offered as short."""

    def __init__(self, db: SqliteThreads) -> None:
        self.db = db
        self.short: list[bool] = []

    async def transact(self, program: Program[Any], *, write: bool, schema: bool = False, short: bool = False) -> Any:
        if not write:
            self.short.append(short)
        return await self.db.transact(program, write=write, schema=schema, short=short)

    async def close(self) -> None:
        await self.db.close()


def test_a_namespace_with_more_documents_than_the_bound_is_searched_on_a_worker(tmp_path: Path) -> None:
    small, large = Namespace("acme", "p", "e", "small"), Namespace("acme", "p", "e", "large")

    async def main() -> None:
        records = SqliteRecordStore(tmp_path / "m.db")
        await records.migrate()
        recording = RecordingTransactions(threads(tmp_path / "m.db"))
        index = SqlLexicalIndex(SQLITE, recording, Bm25(), short_search_docs=2)
        ids = {}
        for ns, count in ((small, 2), (large, 3)):
            rows = [row(ns) for _ in range(count)]
            await records.insert_memories(rows)
            await index.index(ns, [LexicalDoc(r.id, {7: 1}, 1) for r in rows])
            ids[ns] = [r.id for r in rows]

        async def searched_short(ns: Namespace) -> bool:
            recording.short.clear()
            assert await index.search(ns, {7: 1}, 10, MemoryFilter())
            return recording.short == [True]

        # Unknown namespaces are searched as short; the first search counts the documents.
        assert await searched_short(small) and await searched_short(small)
        assert await searched_short(large)
        assert not await searched_short(large)
        # Back within the bound (a memory forgotten), the namespace is short again.
        await index.remove(large, ids[large][:1])
        assert not await searched_short(large)
        assert await searched_short(large)
        await index.close()
        await records.close()

    asyncio.run(main())
