"""Searches started together go to the index together.

A retrieval mode searches its sub-queries at once: their vectors come out of one embedding
pass, so their searches start in the same turn of the event loop. Sent as one call of several
vectors, three searches cost Milvus Lite 4.6 ms of CPU against 6.7 ms as three calls (the
partition's deletion mask and the call's setup are paid once), and a Milvus server one round
trip instead of three.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from memsvc.domain.models import MemoryFilter, Namespace
from memsvc.stores.vectors.base import Vector, VectorHit

SearchMany = Callable[[Namespace, Sequence[Vector], int, MemoryFilter], Awaitable[list[list[VectorHit]]]]
_Key = tuple[str, int, str]


@dataclass
class _Batch:
    namespace: Namespace
    limit: int
    memory_filter: MemoryFilter
    hits: asyncio.Future[list[list[VectorHit]]]
    vectors: list[Vector] = field(default_factory=list)


class SearchBatcher:
    """Joins the searches asked for in one turn of the event loop that share a namespace, a
    limit and a filter into one `search_many`; each caller gets its own vector's hits, or the
    call's failure."""

    def __init__(self, search_many: SearchMany) -> None:
        self._search_many = search_many
        self._pending: dict[_Key, _Batch] = {}
        self._running: set[asyncio.Task[None]] = set()

    async def search(
        self, namespace: Namespace, vector: Vector, limit: int, memory_filter: MemoryFilter, filter_key: str
    ) -> list[VectorHit]:
        """`filter_key`: the filter as the index evaluates it (searches join only when equal)."""
        key = (namespace.digest, limit, filter_key)
        batch = self._pending.get(key)
        if batch is None:
            loop = asyncio.get_running_loop()
            batch = _Batch(namespace, limit, memory_filter, loop.create_future())
            self._pending[key] = batch
            loop.call_soon(self._send, key)
        position = len(batch.vectors)
        batch.vectors.append(vector)
        # Shielded: a caller giving up (its deadline) must not cancel the others' search.
        return (await asyncio.shield(batch.hits))[position]

    def _send(self, key: _Key) -> None:
        batch = self._pending.pop(key)
        task = asyncio.ensure_future(self._run(batch))
        self._running.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(self._running.discard)

    async def _run(self, batch: _Batch) -> None:
        try:
            hits = await self._search_many(batch.namespace, batch.vectors, batch.limit, batch.memory_filter)
        except asyncio.CancelledError:
            batch.hits.cancel()
            raise
        except Exception as exc:
            batch.hits.set_exception(exc)
            batch.hits.exception()  # retrieved: no warning when every caller gave up
        else:
            batch.hits.set_result(hits)
