"""Helpers of the fault suites: gRPC calls, status details, and ways to break a dependency."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from memsvc.domain.models import Namespace
from memsvc.stores.vectors.milvus import MilvusVectorIndex
from memsvc.v1 import memory_pb2, query_service_pb2, write_service_pb2
from tests.conftest import RunningServer

# Milvus Lite (in the test process) can drop a WAL file without closing it when its server is
# released or sustained writes rotate segments; the file is then garbage-collected mid-test.
# These marks ignore exactly that warning, nothing else.
MILVUS_LITE_WAL_LEAK = [
    pytest.mark.filterwarnings("ignore:unclosed file <_io.BufferedWriter name='[^']*/milvus.db/:ResourceWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <_io.FileIO name='[^']*/milvus.db/:pytest.PytestUnraisableExceptionWarning"
    ),
]


def namespace(user: str) -> Namespace:
    """The namespace of `user` under the admin key of RunningServer (tenant acme)."""
    return Namespace("acme", "default", "development", user)


def add(s: RunningServer, user: str, *contents: str, timeout_s: float = 30, **fields: Any) -> list[Any]:
    request = write_service_pb2.AddMemoriesRequest(
        user_id=user, memories=[write_service_pb2.NewMemory(content=c, **fields) for c in contents]
    )
    return list(s.writes.AddMemories(request, metadata=s.md, timeout=timeout_s).memories)


def query(s: RunningServer, user: str, text: str, timeout_s: float = 30, **fields: Any) -> Any:
    request = query_service_pb2.QueryRequest(
        user_id=user,
        query=text,
        filter=memory_pb2.MemoryFilter(min_importance=0.0),
        skip_cache=True,
        **fields,
    )
    return s.queries.Query(request, metadata=s.md, timeout=timeout_s)


def failure(call: Callable[[], Any]) -> grpc.RpcError:
    """Run a call that must fail; return its error."""
    try:
        call()
    except grpc.RpcError as error:
        return error
    raise AssertionError("the call succeeded; it should have failed")


def retry_delay_s(error: grpc.RpcError) -> float | None:
    """The RetryInfo delay of a failed call, or None when the status carries no RetryInfo."""
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    if status is None:
        return None
    for detail in status.details:
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            return float(info.retry_delay.ToMilliseconds()) / 1000
    return None


def wait_until(check: Callable[[], bool], timeout_s: float, what: str, every_s: float = 0.1) -> float:
    """Poll `check` until true; return the seconds it took; fail naming `what` on timeout."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        time.sleep(every_s)
    return time.monotonic() - started


class LiteIndexOutage:
    """Takes the embedded Milvus Lite of a server away, and brings it back.

    Milvus Lite runs inside the memsvc process, opened on the data directory of the `.db` path.
    The outage closes it under the running index and puts an unopenable file where its data
    directory was, so no reconnect can open it again until `restore`.
    """

    def __init__(self, index: MilvusVectorIndex, db_path: Path) -> None:
        self.index = index
        self.path = db_path.resolve()
        self.away = self.path.with_name(self.path.name + ".away")

    def start(self) -> None:
        self.index.client.close()
        os.rename(self.path, self.away)
        self.path.write_bytes(b"")  # a file, not a data directory: Milvus Lite cannot open it

    def restore(self) -> None:
        self.path.unlink()
        os.rename(self.away, self.path)
