"""MemoryClient: the synchronous typed client of memsvc.v1 over the generated gRPC stubs."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypeVar

import grpc

from memsvc_client import _common
from memsvc_client._common import QueryStub, RetryPolicy, WriteStub
from memsvc_client._gen.memsvc.v1 import query_service_pb2_grpc, write_service_pb2, write_service_pb2_grpc
from memsvc_client.errors import InternalError, UnavailableError, error_from_rpc
from memsvc_client.types import (
    AddResult,
    ConversationResult,
    ConversationTurn,
    Memory,
    MemoryFilter,
    MemoryKind,
    MemoryPage,
    NewMemory,
    QueryMode,
    QueryResult,
    Role,
    Tier,
)

_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")


class MemoryClient:
    """Calls memsvc's WriteService and QueryService with an API key.

    Every call has a deadline (``timeout_s`` of the client, or of the call) and raises a
    ``MemsvcError`` subclass on failure. With ``retries`` on (the default), the channel's gRPC
    service config retries Query, GetMemory, ListMemories, DeleteMemory and ForgetUser on
    UNAVAILABLE within the call's deadline; AddMemories is retried only when every item has an
    idempotency key, and UpdateMemory never. Use it as a context manager, or call ``close()``.

    ``write_stub``, ``query_stub``, ``channel`` and ``metadata`` are the escape hatch to the raw
    generated stubs: ``client.write_stub.GetMemory(request, metadata=client.metadata, timeout=5)``.
    """

    @classmethod
    def from_env(cls, **options: Any) -> Self:
        """A client of the server the `memsvc` command would call in this environment (MEMSVC_ADDRESS
        or MEMSVC_LISTEN, MEMSVC_API_KEY or the development key in MEMSVC_DATA_DIR); `options` are
        the constructor's."""
        address, api_key = _common.target_from_env()
        return cls(address, api_key, **options)

    def __init__(
        self,
        address: str,
        api_key: str,
        *,
        timeout_s: float = _common.DEFAULT_TIMEOUT_S,
        tls: bool | grpc.ChannelCredentials = False,
        retries: bool | RetryPolicy = True,
        channel_options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        _common.check_target(address, api_key)
        self.timeout_s = timeout_s
        self.retry_policy = _common.retry_policy_of(retries)
        self.channel_options = _common.channel_options(self.retry_policy, channel_options)
        credentials = _common.credentials_of(tls)
        if credentials is None:
            self.channel: grpc.Channel = grpc.insecure_channel(address, options=self.channel_options)
        else:
            self.channel = grpc.secure_channel(address, credentials, options=self.channel_options)
        self.metadata: tuple[tuple[str, str], ...] = (("authorization", f"Bearer {api_key}"),)
        self.write_stub: WriteStub = write_service_pb2_grpc.WriteServiceStub(self.channel)
        self.query_stub: QueryStub = query_service_pb2_grpc.QueryServiceStub(self.channel)

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the channel; calls in flight are cancelled and the client is unusable after."""
        self.channel.close()

    def _call(self, method: _common.UnaryCall[_Req, _Resp], request: _Req, timeout_s: float | None) -> _Resp:
        try:
            return method(request, timeout=self.timeout_s if timeout_s is None else timeout_s, metadata=self.metadata)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc) from exc

    def _call_retrying(self, call: Callable[[float], _Resp], timeout_s: float | None) -> _Resp:
        """Repeat a call on UNAVAILABLE within one deadline; for requests that are safe to repeat."""
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        attempt = 1
        while True:
            try:
                return call(deadline - time.monotonic())
            except UnavailableError as error:
                pause_s = _common.retry_pause_s(self.retry_policy, error, attempt, deadline - time.monotonic())
                if pause_s is None:
                    raise
                time.sleep(pause_s)
                attempt += 1

    def add_memories(
        self, user_id: str, memories: Sequence[NewMemory | str], *, timeout_s: float | None = None
    ) -> AddResult:
        """Store memories for one user (a plain string is a memory with only content).

        The call is retried on UNAVAILABLE only when every item has an idempotency key.
        """
        items = _common.new_memories(memories)
        request = _common.add_request(user_id, items)
        if self.retry_policy is None or not _common.all_keyed(items):
            return AddResult.from_proto(self._call(self.write_stub.AddMemories, request, timeout_s))
        response = self._call_retrying(
            lambda left_s: self._call(self.write_stub.AddMemories, request, left_s), timeout_s
        )
        return AddResult.from_proto(response)

    def add(
        self,
        user_id: str,
        content: str,
        *,
        role: Role = Role.UNSPECIFIED,
        kind: MemoryKind = MemoryKind.UNSPECIFIED,
        tags: Sequence[str] = (),
        session_id: str = "",
        importance: float | None = None,
        metadata: Mapping[str, Any] | None = None,
        tier: Tier = Tier.UNSPECIFIED,
        create_time: datetime | None = None,
        idempotency_key: str = "",
        timeout_s: float | None = None,
    ) -> Memory:
        """Store one memory and return it as stored."""
        item = _common.one_memory(
            content,
            role=role,
            kind=kind,
            tags=tags,
            session_id=session_id,
            importance=importance,
            metadata=metadata,
            tier=tier,
            create_time=create_time,
            idempotency_key=idempotency_key,
        )
        result = self.add_memories(user_id, [item], timeout_s=timeout_s)
        if len(result.memories) != 1:
            raise InternalError(f"the server returned {len(result.memories)} memories for one")
        return result.memories[0]

    def add_conversation(
        self,
        user_id: str,
        session_id: str,
        turns: Sequence[ConversationTurn | str],
        *,
        first_turn_index: int = 0,
        timeout_s: float | None = None,
    ) -> ConversationResult:
        """Hand memsvc a session's new turns (oldest first, `first_turn_index` the first one's
        index in the session): each is stored as evidence, and the memories it states and the
        session's summary are derived from the new ones. A plain string is a user turn said now.

        Retried on UNAVAILABLE: the session index of each turn makes resending it store nothing twice.
        """
        request = _common.conversation_request(user_id, session_id, turns, first_turn_index)
        if self.retry_policy is None:
            return ConversationResult.from_proto(self._call(self.write_stub.AddConversation, request, timeout_s))
        response = self._call_retrying(
            lambda left_s: self._call(self.write_stub.AddConversation, request, left_s), timeout_s
        )
        return ConversationResult.from_proto(response)

    def query(
        self,
        user_id: str,
        query: str,
        *,
        limit: int = 0,
        mode: QueryMode = QueryMode.UNSPECIFIED,
        filter: MemoryFilter | None = None,
        additional_queries: Sequence[str] = (),
        recent_turns: Sequence[ConversationTurn] = (),
        context_window: int = 0,
        token_budget: int = 0,
        skip_cache: bool = False,
        include_sources: bool = False,
        min_relevance: float | None = None,
        include_context: bool = False,
        timeout_s: float | None = None,
    ) -> QueryResult:
        """The memories of a user that matter for a query text, best first, with a report.

        Zero and empty values leave the server's defaults (limit 10, direct mode, importance gate
        0.5); `min_relevance` None leaves DIRECT's relevance floor the server's, 0 turns it off.
        `include_sources` returns with each derived memory the turns it came from;
        `include_context` composes QueryResult.context in any mode (applicability always does).
        """
        request = _common.query_request(
            user_id,
            query,
            limit=limit,
            mode=mode,
            filter=filter,
            additional_queries=additional_queries,
            recent_turns=recent_turns,
            context_window=context_window,
            token_budget=token_budget,
            skip_cache=skip_cache,
            include_sources=include_sources,
            min_relevance=min_relevance,
            include_context=include_context,
        )
        return QueryResult.from_proto(self._call(self.query_stub.Query, request, timeout_s))

    def get_memory(self, user_id: str, memory_id: str, *, timeout_s: float | None = None) -> Memory:
        """One memory; NotFoundError when it does not exist."""
        request = write_service_pb2.GetMemoryRequest(user_id=user_id, id=memory_id)
        response = self._call(self.write_stub.GetMemory, request, timeout_s)
        if not response.HasField("memory"):
            raise InternalError("the server returned no memory")
        return Memory.from_proto(response.memory)

    def list_memories(
        self,
        user_id: str,
        *,
        filter: MemoryFilter | None = None,
        page_size: int = 0,
        page_token: str = "",
        timeout_s: float | None = None,
    ) -> MemoryPage:
        """One page of a user's memories, newest first; pass next_page_token back for the next one."""
        request = _common.list_request(user_id, filter=filter, page_size=page_size, page_token=page_token)
        return MemoryPage.from_proto(self._call(self.write_stub.ListMemories, request, timeout_s))

    def iter_memories(
        self,
        user_id: str,
        *,
        filter: MemoryFilter | None = None,
        page_size: int = 0,
        timeout_s: float | None = None,
    ) -> Iterator[Memory]:
        """Every memory of a user, newest first, fetching pages as needed (timeout_s is per page)."""
        page_token = ""
        while True:
            page = self.list_memories(
                user_id, filter=filter, page_size=page_size, page_token=page_token, timeout_s=timeout_s
            )
            yield from page.memories
            page_token = page.next_page_token
            if not page_token:
                return

    def update_memory(
        self,
        user_id: str,
        memory_id: str,
        *,
        content: str | None = None,
        tags: Sequence[str] | None = None,
        tier: Tier | None = None,
        importance: float | None = None,
        metadata: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Memory:
        """Change the fields given (the field mask names exactly those); returns the memory after."""
        request = _common.update_request(
            user_id, memory_id, content=content, tags=tags, tier=tier, importance=importance, metadata=metadata
        )
        response = self._call(self.write_stub.UpdateMemory, request, timeout_s)
        if not response.HasField("memory"):
            raise InternalError("the server returned no memory")
        return Memory.from_proto(response.memory)

    def delete_memory(self, user_id: str, memory_id: str, *, timeout_s: float | None = None) -> None:
        """Remove one memory: its record, its vector and every cached result naming it."""
        request = write_service_pb2.DeleteMemoryRequest(user_id=user_id, id=memory_id)
        self._call(self.write_stub.DeleteMemory, request, timeout_s)

    def forget_user(self, user_id: str, *, timeout_s: float | None = None) -> int:
        """Erase everything of one user, data key included; returns how many memories were erased."""
        request = write_service_pb2.ForgetUserRequest(user_id=user_id)
        return self._call(self.write_stub.ForgetUser, request, timeout_s).deleted_count
