"""What the sync and asyncio clients share: retry policy, channel options, request building, stub types."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import grpc

from memsvc_client._gen.memsvc.v1 import memory_pb2, query_service_pb2, write_service_pb2
from memsvc_client.errors import MemsvcError
from memsvc_client.types import (
    ConversationTurn,
    MemoryFilter,
    MemoryKind,
    NewMemory,
    QueryMode,
    Role,
    Tier,
    set_struct,
)

__version__ = "0.1.0"
DEFAULT_TIMEOUT_S = 10.0
USER_AGENT = f"memsvc-client-python/{__version__}"
WRITE_SERVICE = write_service_pb2.DESCRIPTOR.services_by_name["WriteService"].full_name
QUERY_SERVICE = query_service_pb2.DESCRIPTOR.services_by_name["QueryService"].full_name
# Methods that are safe to repeat: reads, and deletes whose repetition changes nothing more.
# AddMemories is retried by the client itself, only when every item has an idempotency key
# (a channel's service config cannot depend on the request); UpdateMemory is never retried.
IDEMPOTENT_METHODS: tuple[tuple[str, str], ...] = (
    (QUERY_SERVICE, "Query"),
    (WRITE_SERVICE, "GetMemory"),
    (WRITE_SERVICE, "ListMemories"),
    (WRITE_SERVICE, "DeleteMemory"),
    (WRITE_SERVICE, "ForgetUser"),
)

Metadata = Sequence[tuple[str, str]]
_Req = TypeVar("_Req", contravariant=True)
_Resp = TypeVar("_Resp", covariant=True)


@dataclass(frozen=True)
class RetryPolicy:
    """How calls are retried on UNAVAILABLE: gRPC's exponential backoff with full jitter.

    Every attempt counts against the call's one deadline, so retries never extend it.
    """

    max_attempts: int = 4
    initial_backoff_s: float = 0.1
    max_backoff_s: float = 2.0
    backoff_multiplier: float = 2.0

    def __post_init__(self) -> None:
        if not 2 <= self.max_attempts <= 5:  # gRPC caps maxAttempts at 5
            raise ValueError(f"max_attempts must be 2 to 5, got {self.max_attempts}")
        if self.initial_backoff_s <= 0 or self.max_backoff_s <= 0 or self.backoff_multiplier <= 0:
            raise ValueError("backoffs and multiplier must be positive")

    def backoff_s(self, attempt: int) -> float:
        """The pause after failed attempt number `attempt` (1-based), jittered as gRPC does."""
        ceiling = min(self.initial_backoff_s * self.backoff_multiplier ** (attempt - 1), self.max_backoff_s)
        return random.uniform(0, ceiling)

    def service_config(self) -> dict[str, Any]:
        """The gRPC service config that retries the idempotent methods on UNAVAILABLE."""
        return {
            "methodConfig": [
                {
                    "name": [{"service": service, "method": method} for service, method in IDEMPOTENT_METHODS],
                    "retryPolicy": {
                        "maxAttempts": self.max_attempts,
                        "initialBackoff": f"{self.initial_backoff_s:g}s",
                        "maxBackoff": f"{self.max_backoff_s:g}s",
                        "backoffMultiplier": self.backoff_multiplier,
                        "retryableStatusCodes": ["UNAVAILABLE"],
                    },
                }
            ]
        }


def retry_policy_of(retries: bool | RetryPolicy) -> RetryPolicy | None:
    if retries is True:
        return RetryPolicy()
    if retries is False:
        return None
    return retries


def retry_pause_s(policy: RetryPolicy | None, error: MemsvcError, attempt: int, left_s: float) -> float | None:
    """How long to wait before attempt `attempt + 1` of a call, or None to give up and raise.

    The pause is gRPC's jittered backoff, or the server's RetryInfo delay when that is longer,
    and must end before the deadline (`left_s` from now).
    """
    if policy is None or attempt >= policy.max_attempts:
        return None
    pause_s = policy.backoff_s(attempt)
    if error.retry_delay is not None:
        pause_s = max(pause_s, error.retry_delay.total_seconds())
    return pause_s if pause_s < left_s else None


def channel_options(policy: RetryPolicy | None, extra: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Channel arguments: the user agent, the retrying service config when enabled, then `extra`."""
    options: list[tuple[str, Any]] = [("grpc.primary_user_agent", USER_AGENT)]
    if policy is not None:
        options += [
            ("grpc.enable_retries", 1),
            ("grpc.service_config", json.dumps(policy.service_config())),
        ]
    return options + list(extra)


def credentials_of(tls: bool | grpc.ChannelCredentials) -> grpc.ChannelCredentials | None:
    """None for plaintext; the system trust store for True; the given credentials otherwise."""
    if tls is False:
        return None
    if tls is True:
        return grpc.ssl_channel_credentials()
    return tls


def target_from_env(environ: Mapping[str, str] = os.environ) -> tuple[str, str]:
    """The address and API key the `memsvc` command would use in this environment: MEMSVC_ADDRESS,
    else MEMSVC_LISTEN, else 127.0.0.1:50051; MEMSVC_API_KEY, else the development key that
    `memsvc serve` saved in MEMSVC_DATA_DIR (.memsvc, relative to the working directory)."""
    address = environ.get("MEMSVC_ADDRESS") or environ.get("MEMSVC_LISTEN") or "127.0.0.1:50051"
    api_key = environ.get("MEMSVC_API_KEY", "")
    if not api_key:
        path = Path(environ.get("MEMSVC_DATA_DIR") or ".memsvc") / "dev-api-key"
        try:
            api_key = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            raise ValueError(
                f"no API key: set MEMSVC_API_KEY, or MEMSVC_DATA_DIR to the data directory of a server whose "
                f"first start saved a development key ({path} does not exist)"
            ) from None
    return address, api_key


def check_target(address: str, api_key: str) -> None:
    if not address.strip():
        raise ValueError("memsvc address must be host:port (or any gRPC target), got an empty string")
    if not api_key:
        raise ValueError("memsvc api_key must not be empty")


class UnaryCall(Protocol[_Req, _Resp]):
    """One method of a generated stub: the request, a deadline in seconds, call metadata."""

    def __call__(self, request: _Req, *, timeout: float | None = ..., metadata: Metadata | None = ...) -> _Resp: ...


class WriteStub(Protocol):
    """The generated memsvc.v1.WriteService stub of a sync channel."""

    AddMemories: UnaryCall[write_service_pb2.AddMemoriesRequest, write_service_pb2.AddMemoriesResponse]
    AddConversation: UnaryCall[write_service_pb2.AddConversationRequest, write_service_pb2.AddConversationResponse]
    UpdateMemory: UnaryCall[write_service_pb2.UpdateMemoryRequest, write_service_pb2.UpdateMemoryResponse]
    DeleteMemory: UnaryCall[write_service_pb2.DeleteMemoryRequest, write_service_pb2.DeleteMemoryResponse]
    ForgetUser: UnaryCall[write_service_pb2.ForgetUserRequest, write_service_pb2.ForgetUserResponse]
    GetMemory: UnaryCall[write_service_pb2.GetMemoryRequest, write_service_pb2.GetMemoryResponse]
    ListMemories: UnaryCall[write_service_pb2.ListMemoriesRequest, write_service_pb2.ListMemoriesResponse]


class QueryStub(Protocol):
    """The generated memsvc.v1.QueryService stub of a sync channel."""

    Query: UnaryCall[query_service_pb2.QueryRequest, query_service_pb2.QueryResponse]


class AsyncWriteStub(Protocol):
    """The generated memsvc.v1.WriteService stub of a grpc.aio channel."""

    AddMemories: UnaryCall[write_service_pb2.AddMemoriesRequest, Awaitable[write_service_pb2.AddMemoriesResponse]]
    AddConversation: UnaryCall[
        write_service_pb2.AddConversationRequest, Awaitable[write_service_pb2.AddConversationResponse]
    ]
    UpdateMemory: UnaryCall[write_service_pb2.UpdateMemoryRequest, Awaitable[write_service_pb2.UpdateMemoryResponse]]
    DeleteMemory: UnaryCall[write_service_pb2.DeleteMemoryRequest, Awaitable[write_service_pb2.DeleteMemoryResponse]]
    ForgetUser: UnaryCall[write_service_pb2.ForgetUserRequest, Awaitable[write_service_pb2.ForgetUserResponse]]
    GetMemory: UnaryCall[write_service_pb2.GetMemoryRequest, Awaitable[write_service_pb2.GetMemoryResponse]]
    ListMemories: UnaryCall[write_service_pb2.ListMemoriesRequest, Awaitable[write_service_pb2.ListMemoriesResponse]]


class AsyncQueryStub(Protocol):
    """The generated memsvc.v1.QueryService stub of a grpc.aio channel."""

    Query: UnaryCall[query_service_pb2.QueryRequest, Awaitable[query_service_pb2.QueryResponse]]


# Request building, shared so that both clients send exactly the same messages.


def new_memories(memories: Sequence[NewMemory | str]) -> list[NewMemory]:
    return [NewMemory(m) if isinstance(m, str) else m for m in memories]


def all_keyed(memories: Sequence[NewMemory]) -> bool:
    """Whether every item carries an idempotency key, which makes repeating the call safe."""
    return bool(memories) and all(m.idempotency_key for m in memories)


def add_request(user_id: str, memories: Sequence[NewMemory]) -> write_service_pb2.AddMemoriesRequest:
    return write_service_pb2.AddMemoriesRequest(user_id=user_id, memories=[m.to_proto() for m in memories])


def one_memory(
    content: str,
    *,
    role: Role,
    kind: MemoryKind,
    tags: Sequence[str],
    session_id: str,
    importance: float | None,
    metadata: Mapping[str, Any] | None,
    tier: Tier,
    create_time: datetime | None,
    idempotency_key: str,
) -> NewMemory:
    return NewMemory(
        content=content,
        role=role,
        kind=kind,
        tags=tuple(tags),
        session_id=session_id,
        importance=importance,
        metadata=metadata,
        tier=tier,
        create_time=create_time,
        idempotency_key=idempotency_key,
    )


def query_request(
    user_id: str,
    query: str,
    *,
    limit: int,
    mode: QueryMode,
    filter: MemoryFilter | None,
    additional_queries: Sequence[str],
    recent_turns: Sequence[ConversationTurn],
    context_window: int,
    token_budget: int,
    skip_cache: bool,
    include_sources: bool,
    min_relevance: float | None,
    include_context: bool = False,
) -> query_service_pb2.QueryRequest:
    request = query_service_pb2.QueryRequest(
        user_id=user_id,
        query=query,
        limit=limit,
        mode=cast("query_service_pb2.QueryMode", int(mode)),
        additional_queries=list(additional_queries),
        recent_turns=[t.to_proto() for t in recent_turns],
        context_window=context_window,
        token_budget=token_budget,
        skip_cache=skip_cache,
        include_sources=include_sources,
        include_context=include_context,
    )
    if min_relevance is not None:
        request.min_relevance = min_relevance
    if filter is not None:
        request.filter.CopyFrom(filter.to_proto())
    return request


def conversation_request(
    user_id: str, session_id: str, turns: Sequence[ConversationTurn | str], first_turn_index: int
) -> write_service_pb2.AddConversationRequest:
    """A plain string is a turn of the user said now."""
    return write_service_pb2.AddConversationRequest(
        user_id=user_id,
        session_id=session_id,
        turns=[(ConversationTurn(Role.USER, t) if isinstance(t, str) else t).to_proto() for t in turns],
        first_turn_index=first_turn_index,
    )


def list_request(
    user_id: str, *, filter: MemoryFilter | None, page_size: int, page_token: str
) -> write_service_pb2.ListMemoriesRequest:
    request = write_service_pb2.ListMemoriesRequest(user_id=user_id, page_size=page_size, page_token=page_token)
    if filter is not None:
        request.filter.CopyFrom(filter.to_proto())
    return request


def update_request(
    user_id: str,
    memory_id: str,
    *,
    content: str | None,
    tags: Sequence[str] | None,
    tier: Tier | None,
    importance: float | None,
    metadata: Mapping[str, Any] | None,
) -> write_service_pb2.UpdateMemoryRequest:
    """An update whose field mask names exactly the fields given (not None)."""
    update = write_service_pb2.MemoryUpdate()
    paths: list[str] = []
    if content is not None:
        update.content = content
        paths.append("content")
    if tags is not None:
        update.tags.extend(tags)
        paths.append("tags")
    if tier is not None:
        update.tier = cast("memory_pb2.Tier", int(tier))
        paths.append("tier")
    if importance is not None:
        update.importance = importance
        paths.append("importance")
    if metadata is not None:
        set_struct(update.metadata, metadata)
        paths.append("metadata")
    if not paths:
        raise ValueError("update_memory needs at least one of content, tags, tier, importance, metadata")
    request = write_service_pb2.UpdateMemoryRequest(user_id=user_id, id=memory_id, memory=update)
    request.update_mask.paths.extend(paths)
    return request
