"""Small helpers of the security suites: calls over gRPC and the details of a failed call."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from memsvc.v1 import memory_pb2, query_service_pb2, write_service_pb2
from tests.conftest import RunningServer


@dataclass
class Failure:
    """What a failed call told the caller: code, message, field violations, reason, retry delay."""

    code: grpc.StatusCode
    message: str
    fields: list[str] = field(default_factory=list)
    reason: str = ""
    retry_delay_s: float | None = None
    texts: list[str] = field(default_factory=list)  # every string the caller can see


def failure_of(error: grpc.RpcError) -> Failure:
    code: grpc.StatusCode = error.code()  # type: ignore[attr-defined]
    message: str = error.details() or ""  # type: ignore[attr-defined]
    result = Failure(code, message, texts=[message])
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    if status is None:
        return result
    result.texts.append(status.message)
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            for v in bad.field_violations:
                result.fields.append(v.field)
                result.texts += [v.field, v.description]
        elif detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            result.reason = info.reason
            result.texts += [info.reason, info.domain, *info.metadata.keys(), *info.metadata.values()]
        elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            detail.Unpack(retry)
            result.retry_delay_s = retry.retry_delay.ToMilliseconds() / 1000
    return result


def expect_failure(call: Callable[[], Any]) -> Failure:
    try:
        call()
    except grpc.RpcError as error:
        return failure_of(error)
    raise AssertionError("the call succeeded but was expected to fail")


def add(s: RunningServer, key: str, user: str, *contents: str, **fields: Any) -> list[Any]:
    request = write_service_pb2.AddMemoriesRequest(
        user_id=user, memories=[write_service_pb2.NewMemory(content=c, **fields) for c in contents]
    )
    return list(s.writes.AddMemories(request, metadata=s.auth(key), timeout=60).memories)


def query(s: RunningServer, key: str, user: str, text: str, **fields: Any) -> Any:
    request = query_service_pb2.QueryRequest(user_id=user, query=text, **fields)
    return s.queries.Query(request, metadata=s.auth(key), timeout=60)


def get(s: RunningServer, key: str, user: str, memory_id: str) -> Any:
    request = write_service_pb2.GetMemoryRequest(user_id=user, id=memory_id)
    return s.writes.GetMemory(request, metadata=s.auth(key), timeout=30).memory


def everything() -> memory_pb2.MemoryFilter:
    """A filter that drops nothing for importance reasons."""
    return memory_pb2.MemoryFilter(min_importance=0.0)
