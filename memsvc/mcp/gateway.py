"""The MCP server's way into memsvc: asyncio gRPC calls carrying the caller's API key.

Every tool call becomes one RPC on a shared channel, with the key of that call in the
`authorization` metadata, so authentication, tenant scoping, rate limits, validation and spans
are the server's, exactly as for any other gRPC client.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import timestamp_pb2
from google.rpc import error_details_pb2, status_pb2

from memsvc.api.tls import open_aio_channel
from memsvc.tls import ClientTls
from memsvc.v1 import query_service_pb2, query_service_pb2_grpc, write_service_pb2, write_service_pb2_grpc

_STATUS_DETAILS_KEY = "grpc-status-details-bin"


@dataclass(frozen=True)
class FieldViolation:
    """One invalid field of a request, named by its path in the request message (`memories[0].content`)."""

    field: str
    description: str


class CallFailed(Exception):
    """An RPC that failed: its status code name, the server's message and the decoded details."""

    def __init__(
        self,
        code: str,
        message: str,
        violations: Sequence[FieldViolation] = (),
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.violations = tuple(violations)
        self.retry_after_s = retry_after_s


def _status_details(error: grpc.aio.AioRpcError) -> status_pb2.Status | None:
    for key, value in error.trailing_metadata() or ():
        if key == _STATUS_DETAILS_KEY:
            return status_pb2.Status.FromString(value)
    return None


def call_failed(error: grpc.aio.AioRpcError) -> CallFailed:
    """The CallFailed of an RPC error, with the BadRequest violations and RetryInfo it carries."""
    violations: list[FieldViolation] = []
    retry_after_s: float | None = None
    status = _status_details(error)
    for detail in status.details if status is not None else ():
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad_request = error_details_pb2.BadRequest()
            detail.Unpack(bad_request)
            violations.extend(FieldViolation(v.field, v.description) for v in bad_request.field_violations)
        elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            detail.Unpack(retry)
            retry_after_s = retry.retry_delay.ToMilliseconds() / 1000
    return CallFailed(error.code().name, error.details() or "", violations, retry_after_s)


@dataclass(frozen=True)
class NewTurn:
    """One conversation turn to store: who spoke (a Role name), what was said, the speaker's name, when."""

    role: str
    content: str
    name: str = ""
    said_at: timestamp_pb2.Timestamp | None = None


def _turn_message(turn: NewTurn) -> query_service_pb2.ConversationTurn:
    message = query_service_pb2.ConversationTurn(role=turn.role, content=turn.content, name=turn.name)
    if turn.said_at is not None:
        message.create_time.CopyFrom(turn.said_at)
    return message


class MemoryGateway:
    """The asyncio gRPC channel to one memsvc server; each call names the API key it runs under.

    The channel binds to the running event loop, so it is opened inside it (`open`) and closed
    before the loop ends (`close`).
    """

    def __init__(self, address: str, timeout_s: float, tls: ClientTls | None = None) -> None:
        self.address = address
        self._timeout_s = timeout_s
        self._tls = tls
        self._channel: grpc.aio.Channel | None = None
        self._writes: Any = None
        self._queries: Any = None

    def open(self) -> None:
        self._channel = open_aio_channel(self.address, self._tls)
        self._writes = write_service_pb2_grpc.WriteServiceStub(self._channel)
        self._queries = query_service_pb2_grpc.QueryServiceStub(self._channel)

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    async def _call(self, method: Any, request: Any, api_key: str) -> Any:
        if self._channel is None:
            raise RuntimeError("MemoryGateway.open() was not called")
        try:
            return await method(request, metadata=(("authorization", f"Bearer {api_key}"),), timeout=self._timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise call_failed(exc) from exc

    async def add_memory(
        self,
        api_key: str,
        user_id: str,
        content: str,
        kind: str,
        tags: Sequence[str],
        session_id: str,
        importance: float | None,
    ) -> write_service_pb2.AddMemoriesResponse:
        memory = write_service_pb2.NewMemory(content=content, kind=kind, tags=list(tags), session_id=session_id)
        if importance is not None:
            memory.importance = importance
        request = write_service_pb2.AddMemoriesRequest(user_id=user_id, memories=[memory])
        response: write_service_pb2.AddMemoriesResponse = await self._call(self._writes.AddMemories, request, api_key)
        return response

    async def add_conversation(
        self, api_key: str, user_id: str, session_id: str, turns: Sequence[NewTurn], first_turn_index: int
    ) -> write_service_pb2.AddConversationResponse:
        request = write_service_pb2.AddConversationRequest(
            user_id=user_id,
            session_id=session_id,
            first_turn_index=first_turn_index,
            turns=[_turn_message(t) for t in turns],
        )
        response: write_service_pb2.AddConversationResponse = await self._call(
            self._writes.AddConversation, request, api_key
        )
        return response

    async def query(
        self, api_key: str, user_id: str, query: str, mode: str, limit: int
    ) -> query_service_pb2.QueryResponse:
        # The server composes the context block (the user's instructions included) in every mode.
        request = query_service_pb2.QueryRequest(
            user_id=user_id, query=query, mode=mode, limit=limit, include_context=True
        )
        response: query_service_pb2.QueryResponse = await self._call(self._queries.Query, request, api_key)
        return response

    async def delete(self, api_key: str, user_id: str, memory_id: str) -> None:
        request = write_service_pb2.DeleteMemoryRequest(user_id=user_id, id=memory_id)
        await self._call(self._writes.DeleteMemory, request, api_key)

    async def list_memories(
        self, api_key: str, user_id: str, page_size: int, page_token: str
    ) -> write_service_pb2.ListMemoriesResponse:
        request = write_service_pb2.ListMemoriesRequest(user_id=user_id, page_size=page_size, page_token=page_token)
        response: write_service_pb2.ListMemoriesResponse = await self._call(self._writes.ListMemories, request, api_key)
        return response

    async def history(
        self, api_key: str, user_id: str, memory_id: str, page_size: int, page_token: str
    ) -> write_service_pb2.GetMemoryHistoryResponse:
        request = write_service_pb2.GetMemoryHistoryRequest(
            user_id=user_id, id=memory_id, page_size=page_size, page_token=page_token
        )
        response: write_service_pb2.GetMemoryHistoryResponse = await self._call(
            self._writes.GetMemoryHistory, request, api_key
        )
        return response
