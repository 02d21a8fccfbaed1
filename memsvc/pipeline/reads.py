"""Reads of stored memories by id and by listing: GetMemory and ListMemories."""

from __future__ import annotations

from dataclasses import dataclass

from memsvc.deadline import Deadline
from memsvc.domain.models import Memory, MemoryFilter, Namespace, Permission, Principal, metadata_matches
from memsvc.errors import NotFound
from memsvc.memories.codec import MemoryCodec
from memsvc.pipeline.paging import PageTokens
from memsvc.pipeline.validation import Limits, Violations, check_memory_id, check_user_id, validate_listing
from memsvc.pipeline.write.path import require
from memsvc.stores.records.base import MemoryRecords, PageCursor


@dataclass(frozen=True)
class Page:
    memories: list[Memory]
    next_page_token: str


class MemoryReads:
    def __init__(
        self,
        *,
        store: MemoryRecords,
        codec: MemoryCodec,
        page_tokens: PageTokens,
        limits: Limits,
        default_page_size: int,
    ) -> None:
        self._store = store
        self._codec = codec
        self._pages = page_tokens
        self._limits = limits
        self._default_page_size = default_page_size

    async def get(self, principal: Principal, user_id: str, memory_id: str, deadline: Deadline) -> Memory:
        require(principal, Permission.READ)
        v = Violations()
        check_user_id(v, user_id)
        check_memory_id(v, memory_id)
        v.raise_if_any()
        namespace = Namespace.of(principal, user_id)
        rows = await deadline.run(self._store.fetch_memories(namespace, [memory_id]), "the record store")
        if not rows:
            raise NotFound("no such memory")
        return await self._codec.open(rows[0])

    async def list(
        self,
        principal: Principal,
        user_id: str,
        memory_filter: MemoryFilter,
        page_size: int,
        page_token: str,
        deadline: Deadline,
    ) -> Page:
        require(principal, Permission.READ)
        size = page_size or self._default_page_size
        validate_listing(user_id, size, memory_filter, self._limits)
        namespace = Namespace.of(principal, user_id)
        fingerprint = memory_filter.fingerprint()
        cursor = self._pages.decode(page_token, namespace, fingerprint) if page_token else None
        rows = await deadline.run(
            self._store.list_memories(namespace, memory_filter, cursor, size + 1), "the record store"
        )
        has_more = len(rows) > size
        rows = rows[:size]
        memories = await self._codec.open_all(rows)
        if memory_filter.metadata:
            memories = [m for m in memories if metadata_matches(m.metadata, memory_filter.metadata)]
        token = ""
        if has_more and rows:
            token = self._pages.encode(namespace, fingerprint, PageCursor(rows[-1].created_at, rows[-1].id))
        return Page(memories, token)
