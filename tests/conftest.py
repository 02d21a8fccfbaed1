"""Shared fixtures: one background event loop, one embedding model, real servers on free ports."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memsvc import eventloop
from memsvc.config import Settings
from memsvc.domain.models import Permission
from memsvc.server import Components, Service, build_components
from memsvc.v1 import query_service_pb2_grpc, write_service_pb2_grpc
from tests.live_server import live_server  # noqa: F401  (a fixture, shared by the suites)
from tests.milvus_server import MilvusServer, milvus_server, milvus_server_session  # noqa: F401  (fixtures, as above)
from tests.tls_certs import pki  # noqa: F401  (a fixture, as above)

T = TypeVar("T")


class LoopThread:
    """An asyncio loop in a daemon thread: servers live there, tests stay synchronous."""

    def __init__(self) -> None:
        self.loop = eventloop.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="test-loop")
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float = 120) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self.loop.close()  # an unclosed loop is a ResourceWarning, an error under strict warnings


@pytest.fixture(scope="session")
def loop_thread() -> Iterator[LoopThread]:
    lt = LoopThread()
    yield lt
    lt.close()


@pytest.fixture(scope="session")
def embedder(loop_thread: LoopThread, tmp_path_factory: pytest.TempPathFactory, onnx_dir: Path) -> Any:
    """The shared model, on MEMSVC_EMBEDDING_RUNTIME when set (so the suite can run on ONNX)."""
    from memsvc.server import build_local_embedder

    return build_local_embedder(Settings(data_dir=tmp_path_factory.mktemp("embedder"), embedding_onnx_dir=onnx_dir))


@pytest.fixture(scope="session")
def onnx_dir() -> Path:
    """The machine's ONNX export cache (MEMSVC_EMBEDDING_ONNX_DIR, else ~/.cache/memsvc/onnx): each
    runtime exports once per model, and every test and server process reuses the file."""
    return Settings().resolved_onnx_dir


@pytest.fixture(scope="session", autouse=True)
def model_ready(embedder: Any) -> None:
    """Build the shared model (and its ONNX export) before any test: server processes started by
    the tests then find the export in place instead of each exporting it at start-up."""


@dataclass
class RunningServer:
    """A real memsvc gRPC server on a free port, with an admin key of tenant `acme`."""

    address: str
    api_key: str
    components: Components
    server: Service
    spans: InMemorySpanExporter
    loop_thread: LoopThread
    channel: grpc.Channel
    writes: Any = field(init=False)
    queries: Any = field(init=False)

    def __post_init__(self) -> None:
        self.writes = write_service_pb2_grpc.WriteServiceStub(self.channel)
        self.queries = query_service_pb2_grpc.QueryServiceStub(self.channel)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop_thread.run(coro)

    def create_key(
        self,
        tenant: str = "acme",
        project: str = "default",
        environment: str = "development",
        permissions: frozenset[Permission] = frozenset(Permission),
        ttl_s: float | None = None,
    ) -> str:
        issued = self.run(self.components.keys.create(tenant, project, environment, permissions, ttl_s))
        return issued.token

    @staticmethod
    def auth(key: str) -> tuple[tuple[str, str]]:
        return (("authorization", f"Bearer {key}"),)

    @property
    def md(self) -> tuple[tuple[str, str]]:
        return self.auth(self.api_key)


ServerFactory = Callable[..., RunningServer]


@pytest.fixture
def server_factory(loop_thread: LoopThread, embedder: Any, tmp_path: Path) -> Iterator[ServerFactory]:
    started: list[RunningServer] = []

    def start(data_dir: Path | None = None, own_embedder: bool = False, **overrides: Any) -> RunningServer:
        """Start a server; `own_embedder` builds the embedder from settings instead of sharing the model."""
        values: dict[str, Any] = {
            "data_dir": data_dir or tmp_path / f"data{len(started)}",
            "listen": "127.0.0.1:0",
            "bootstrap_dev_key": False,
            "reconcile_interval_s": 3600.0,
            "index_flush_delay_s": 0.2,
            "bookkeeping_flush_interval_ms": 20.0,
        }
        values.update(overrides)
        settings = Settings(**values)
        spans = InMemorySpanExporter()
        components = loop_thread.run(
            build_components(
                settings, embedder=None if own_embedder else embedder, span_processor=SimpleSpanProcessor(spans)
            )
        )

        async def make_server() -> Service:
            return Service(components)  # grpc.aio binds the server to the running loop

        server = loop_thread.run(make_server())
        port = loop_thread.run(server.start("127.0.0.1:0"))
        address = f"127.0.0.1:{port}"
        key = loop_thread.run(components.keys.create("acme", "default", "development", frozenset(Permission))).token
        running = RunningServer(address, key, components, server, spans, loop_thread, grpc.insecure_channel(address))
        started.append(running)
        return running

    yield start
    for running in started:
        running.channel.close()
        loop_thread.run(running.server.stop(0))


@pytest.fixture(params=["milvus-lite", "milvus-server"])
def engine_server_factory(request: pytest.FixtureRequest, server_factory: ServerFactory) -> ServerFactory:
    """`server_factory` on Milvus Lite in process, or on the session's C++ Milvus server."""
    if request.param == "milvus-lite":
        return server_factory
    milvus: MilvusServer = request.getfixturevalue("milvus_server")
    return lambda **overrides: server_factory(milvus_uri=milvus.uri, **overrides)


@pytest.fixture
def server(server_factory: ServerFactory) -> RunningServer:
    return server_factory()
