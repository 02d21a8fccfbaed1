"""What the benchmarks share: an in-process server, loading through gRPC, a query driver, the floor."""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, SynchronousMultiSpanProcessor

from memsvc import eventloop
from memsvc.bench.cpu import ServerCpu
from memsvc.bench.synthetic import memory_texts
from memsvc.pipeline.context import QueryMode
from memsvc.tls import ClientTls

if TYPE_CHECKING:
    from pymilvus import MilvusClient

    from memsvc.server import Components, Service

T = TypeVar("T")
# A Milvus server (2.3.5) builds no graph for a sealed segment of fewer rows (its
# minSegmentNumRowsToEnableIndex): such a segment is searched exhaustively.
_SERVER_INDEX_MIN_ROWS = 1024
# Tries of one AddMemories call of a benchmark's load before the load fails.
_LOAD_ATTEMPTS = 5

KINDS = ("MEMORY_KIND_FACT", "MEMORY_KIND_PREFERENCE", "MEMORY_KIND_EPISODE", "MEMORY_KIND_DECISION")
QUERY_MODES = tuple(mode.value for mode in QueryMode)


def parse_modes(text: str) -> list[str] | None:
    """A `--modes` comma list, lower-cased; None (after saying why) when it names an unknown mode."""
    modes = [m.strip().lower() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in QUERY_MODES]
    if unknown:
        print(f"unknown mode(s): {', '.join(unknown)}; choose from {', '.join(QUERY_MODES)}", file=sys.stderr)
        return None
    return modes


def machine() -> dict[str, Any]:
    """What the numbers ran on, and how busy it was (other processes share the cores)."""
    cpu = ""
    memory_gib = 0.0
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
                break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": memory_gib,
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if values else 0.0


def user_ids(count: int, start: int = 0) -> list[str]:
    return [f"bench-user-{i:05d}" for i in range(start, start + count)]


class LoopThread:
    """An asyncio loop in a daemon thread: the server lives there, the benchmark stays synchronous."""

    def __init__(self) -> None:
        self.loop = eventloop.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="bench-loop")
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float = 3600) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


class RpcTimes(SpanProcessor):
    """Server-side durations of RPCs by method (`Query`, `AddConversation`, ...), from their
    spans: the client's latency minus these is the transport (gRPC, the client, scheduling)."""

    def __init__(self) -> None:
        self.ms: dict[str, list[float]] = {}

    @property
    def query_ms(self) -> list[float]:
        return self.ms.setdefault("Query", [])

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return

    def on_end(self, span: ReadableSpan) -> None:
        if span.name.startswith("memsvc.v1.") and span.start_time is not None and span.end_time is not None:
            method = span.name.rsplit("/", 1)[-1]
            self.ms.setdefault(method, []).append((span.end_time - span.start_time) / 1e6)

    def shutdown(self) -> None:
        return

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


BENCH_DATABASE = "memsvc_bench"


def prepare_bench_database(uri: str, *, empty: bool) -> None:
    """Create the benchmarks' own database on a Milvus server; drop its collections if `empty`."""
    from pymilvus import MilvusClient

    client = MilvusClient(uri=uri)
    try:
        if BENCH_DATABASE not in client.list_databases():
            client.create_database(BENCH_DATABASE)
    finally:
        client.close()
    if not empty:
        return
    # A client of that database (switching one with using_database needs Milvus 2.4's DescribeDatabase).
    client = MilvusClient(uri=uri, db_name=BENCH_DATABASE)
    try:
        for name in client.list_collections():
            client.drop_collection(name)
    finally:
        client.close()


def add_milvus_uri_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--milvus-uri",
        help="a Milvus server (http://host:19530) instead of the embedded Milvus Lite (default: MEMSVC_MILVUS_URI "
        f"when it names a server); the benchmark writes into a database of its own ({BENCH_DATABASE})",
    )


def milvus_server_uri(given: str | None = None) -> str:
    """The Milvus server a benchmark runs on, however it was named: `given` (--milvus-uri), else
    MEMSVC_MILVUS_URI when it names a server; "" for Milvus Lite in the benchmark's own directory
    (a configured Lite file is the user's data, never the benchmark's)."""
    if given is not None:
        return given
    from memsvc.config import Settings

    configured = Settings()
    return "" if configured.is_embedded_milvus else configured.milvus_uri


def vector_engine(uri: str) -> dict[str, str]:
    """Which vector store a benchmark ran on, for its report."""
    if not uri:
        return {"engine": "milvus-lite", "milvus_uri": ""}
    from pymilvus import MilvusClient

    client = MilvusClient(uri=uri)
    try:
        version = str(client.get_server_version())
    finally:
        client.close()
    return {"engine": "milvus-server", "milvus_uri": uri, "server_version": version}


@dataclass
class BenchServer:
    """A real memsvc server (embedded default) on a free port in a temporary data directory."""

    loop: LoopThread
    components: Components
    server: Service
    address: str
    api_key: str
    data_dir: Path
    owns_data_dir: bool
    rpc_times: RpcTimes
    cpu: ServerCpu

    @classmethod
    def start(cls, data_dir: Path | None = None, milvus_uri: str | None = None, **overrides: Any) -> BenchServer:
        """A server on the embedded default, or on the Milvus server at `milvus_uri` (by default the
        configured one, `milvus_server_uri`): then in a database of its own (BENCH_DATABASE),
        emptied first unless `data_dir` holds an earlier load, so no production collection is
        touched and no earlier run's vectors are searched."""
        from memsvc.config import Settings
        from memsvc.domain.models import Permission
        from memsvc.server import Service, build_components

        owns = data_dir is None
        directory = data_dir or Path(tempfile.mkdtemp(prefix="memsvc-bench-"))
        milvus_uri = milvus_server_uri(milvus_uri)
        values: dict[str, Any] = {
            "data_dir": directory,
            "listen": "127.0.0.1:0",
            "bootstrap_dev_key": False,
            "milvus_uri": milvus_uri,
        }
        if milvus_uri:
            prepare_bench_database(milvus_uri, empty=owns or not (directory / "memsvc.db").exists())
            # Measure the steady state: a server's fresh segments sealed a second after the load
            # (`settle`), as they are a minute after writes in production, not growing.
            values.update(milvus_db_name=BENCH_DATABASE, milvus_seal_delay_s=1.0)
        values.update(overrides)
        settings = Settings(**values)
        loop = LoopThread()
        rpc_times = RpcTimes()
        cpu = ServerCpu()
        spans = SynchronousMultiSpanProcessor()  # type: ignore[no-untyped-call]  # unannotated in the SDK
        spans.add_span_processor(rpc_times)
        spans.add_span_processor(cpu)
        components = loop.run(build_components(settings, span_processor=spans))

        async def make_server() -> Service:
            return Service(components)  # grpc.aio binds the server to the running loop

        server = loop.run(make_server())
        port = loop.run(server.start("127.0.0.1:0"))
        key = loop.run(components.keys.create("bench", "default", "development", frozenset(Permission))).token
        return cls(loop, components, server, f"127.0.0.1:{port}", key, directory, owns, rpc_times, cpu)

    def stop(self) -> None:
        self.loop.run(self.server.stop(0))
        self.loop.close()
        if self.owns_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def settle(self, timeout_s: float = 120.0, maintenance_timeout_s: float = 900.0) -> None:
        """Wait until every row has its vector and Milvus has sealed the fresh segments, merged
        them and built their graphs."""
        store = self.components.store
        until = time.monotonic() + timeout_s
        while self.loop.run(store.count_pending_index()) and time.monotonic() < until:
            time.sleep(0.2)
        settings = self.components.settings
        client = self.components.index.client
        if settings.is_embedded_milvus:
            time.sleep(settings.index_flush_delay_s + 0.5)
        else:
            time.sleep(settings.milvus_seal_delay_s + server_handoff_s(client))
        # Imported here: pymilvus (with pandas) takes seconds to import, and every CLI command
        # imports this module to build its `bench` arguments.
        from memsvc.stores.vectors.milvus_lite import EmbeddedMilvus

        if isinstance(client, EmbeddedMilvus):
            # Milvus Lite merges sealed segments and builds their graphs in a thread of its own
            # after a flush: a merge of tens of thousands of rows takes seconds to minutes.
            for name in client.list_collections():
                client.wait_for_maintenance(name)
        else:
            for name in client.list_collections():
                wait_for_server_maintenance(client, name, maintenance_timeout_s)


def server_handoff_s(client: MilvusClient) -> float:
    """How long a Milvus server serves its sealed segments as they were before their persisted
    copies are loaded: after a seal of 20,000 rows, searches cost the most at 7-8 s (the hand-off)
    and the sealed segments' cost from about 15-20 s on (milvus-server 2.3.5, 2 cores). About a
    second per thousand rows, at least one, at most twenty."""
    rows = sum(int(client.get_collection_stats(name).get("row_count", 0)) for name in client.list_collections())
    return min(20.0, max(1.0, rows / 1000))


def wait_for_server_maintenance(client: MilvusClient, collection: str, timeout_s: float) -> None:
    """Compact `collection` on a Milvus server and wait until the query node serves the result
    with its graphs: the state a user's partition is in minutes after writes, which the benchmarks
    measure. A load sealed every second leaves tens of small segments per partition (and the rows
    an upsert replaced), each searched exhaustively until the server's own compaction merges them
    a few minutes later; measured during that, one user's 39,000 memories cost a search 7.9 ms
    against 3.0 ms once merged (milvus-server 2.3.5, 2 cores). Compacting now only brings forward
    what the server does by itself."""
    until = time.monotonic() + timeout_s
    job = client.compact(collection)
    while client.get_compaction_state(job) != "Completed" and time.monotonic() < until:
        time.sleep(1.0)
    stable_since, seen = time.monotonic(), None
    while time.monotonic() < until:
        segments = client.list_loaded_segments(collection)
        served = sorted((s.segment_id, bool(s.index_name)) for s in segments)
        pending = client.describe_index(collection, "vector").get("pending_index_rows", 0)
        # Segments below the server's indexing threshold (1,024 rows) are searched exhaustively
        # for good; every larger one must be served with its graph.
        unindexed = any(not s.index_name and s.num_rows >= _SERVER_INDEX_MIN_ROWS for s in segments)
        if served != seen:
            stable_since, seen = time.monotonic(), served
        elif not pending and not unindexed and time.monotonic() - stable_since >= 10.0:
            return
        time.sleep(1.0)


@dataclass(frozen=True)
class LoadResult:
    memories: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.memories / self.seconds if self.seconds > 0 else 0.0


def load_memories(
    address: str,
    api_key: str,
    users: Sequence[str],
    per_user: int,
    *,
    batch: int = 64,
    concurrency: int = 2,
    seed: int = 7,
) -> LoadResult:
    """Write `per_user` memories for each user through AddMemories, `batch` per call, from a
    separate client process (as the queries are driven), so the client's gRPC threads and
    message encoding never compete with the server for its GIL."""
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(_load, address, api_key, list(users), per_user, batch, concurrency, seed).result()


def _load(
    address: str, api_key: str, users: Sequence[str], per_user: int, batch: int, concurrency: int, seed: int
) -> LoadResult:
    import grpc

    from memsvc.v1 import write_service_pb2, write_service_pb2_grpc

    channel = grpc.insecure_channel(address)
    stub = write_service_pb2_grpc.WriteServiceStub(channel)  # type: ignore[no-untyped-call]  # generated, unannotated
    metadata = (("authorization", f"Bearer {api_key}"),)
    calls: list[write_service_pb2.AddMemoriesRequest] = []
    for u, user in enumerate(users):
        texts = memory_texts(seed * 1_000_003 + zlib.crc32(user.encode()), per_user)
        for start in range(0, per_user, batch):
            items = [
                write_service_pb2.NewMemory(
                    content=text,
                    kind=KINDS[(u + start + i) % len(KINDS)],
                    # Spread importance over [0.3, 1.0] so the importance gate drops some candidates.
                    importance=0.3 + 0.7 * (((u * 7919 + start + i) * 2654435761) % 1000) / 1000,
                    tags=[f"t{(start + i) % 5}"],
                )
                for i, text in enumerate(texts[start : start + batch])
            ]
            calls.append(write_service_pb2.AddMemoriesRequest(user_id=user, memories=items))

    def send(request: write_service_pb2.AddMemoriesRequest) -> int:
        # A busy shared machine can hold a store's lock past its timeout: the service answers
        # UNAVAILABLE; the call is sent again, as a client would (a repeat is confirmed, not stored twice).
        for attempt in range(_LOAD_ATTEMPTS):
            try:
                response = stub.AddMemories(request, metadata=metadata, timeout=300)
                return len(response.memories)
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.UNAVAILABLE or attempt == _LOAD_ATTEMPTS - 1:
                    # The error itself does not pickle back to the parent process.
                    raise RuntimeError(f"AddMemories failed: {exc.code()} {exc.details()}") from None
                time.sleep(2.0**attempt)
        raise AssertionError("unreachable")

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=concurrency) as pool:
        written = sum(pool.map(send, calls))
    seconds = time.perf_counter() - started
    channel.close()
    return LoadResult(written, seconds)


# -- the query driver (in a child process, so the client never competes for the server's GIL) --


@dataclass(frozen=True)
class Sample:
    latency_ms: float
    stages_ms: dict[str, float]
    code: str


@dataclass
class DriveResult:
    samples: list[Sample] = field(default_factory=list)
    seconds: float = 0.0
    # The client process's own CPU over the warm-up and the measured calls: on one machine the
    # load generator spends some of the cores the server would otherwise have.
    client_cpu_s: float = 0.0

    @property
    def ok(self) -> list[Sample]:
        return [s for s in self.samples if s.code == "OK"]


def _drive(
    address: str,
    api_key: str,
    warmup: Sequence[tuple[str, str]],
    requests: Sequence[tuple[str, str]],
    concurrency: int,
    mode: str,
    limit: int,
    max_seconds: float,
    tls: ClientTls | None,
) -> DriveResult:
    import grpc

    from memsvc.api.tls import open_channel
    from memsvc.v1 import query_service_pb2, query_service_pb2_grpc

    metadata = (("authorization", f"Bearer {api_key}"),)
    mode_name = f"QUERY_MODE_{mode.upper()}"
    # A connection per client thread, each with its own subchannel pool (channels of one process
    # otherwise share one), so that worker processes on one port (SO_REUSEPORT) each get a share.
    local = threading.local()
    channels: list[grpc.Channel] = []
    channels_lock = threading.Lock()

    def stub() -> Any:
        if not hasattr(local, "stub"):
            channel = open_channel(address, tls, options=[("grpc.use_local_subchannel_pool", 1)])
            with channels_lock:
                channels.append(channel)
            local.stub = query_service_pb2_grpc.QueryServiceStub(channel)  # type: ignore[no-untyped-call]  # generated
        return local.stub

    def call(user: str, text: str) -> Sample:
        request = query_service_pb2.QueryRequest(user_id=user, query=text, limit=limit, mode=mode_name, skip_cache=True)
        started = time.perf_counter()
        try:
            response = stub().Query(request, metadata=metadata, timeout=60)
        except grpc.RpcError as exc:
            return Sample((time.perf_counter() - started) * 1000, {}, exc.code().name)
        elapsed = (time.perf_counter() - started) * 1000
        return Sample(elapsed, {s.stage: s.duration_ms for s in response.report.stages}, "OK")

    cpu_before = time.process_time()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        list(pool.map(lambda r: call(*r), warmup))
        lock = threading.Lock()
        position = 0
        stop_at = time.perf_counter() + max_seconds
        out: list[Sample] = []

        def worker() -> None:
            nonlocal position
            while time.perf_counter() < stop_at:
                with lock:
                    if position >= len(requests):
                        return
                    user, text = requests[position]
                    position += 1
                sample = call(user, text)
                with lock:
                    out.append(sample)

        started = time.perf_counter()
        for f in [pool.submit(worker) for _ in range(concurrency)]:
            f.result()
        seconds = time.perf_counter() - started
    for channel in channels:
        channel.close()
    return DriveResult(out, seconds, time.process_time() - cpu_before)


def drive_queries(
    address: str,
    api_key: str,
    warmup: Sequence[tuple[str, str]],
    requests: Sequence[tuple[str, str]],
    *,
    concurrency: int,
    mode: str = "direct",
    limit: int = 10,
    max_seconds: float = 60.0,
    tls: ClientTls | None = None,
) -> DriveResult:
    """Run warm-up calls, then `requests` at `concurrency` from a separate client process (one
    connection per client thread, over TLS when `tls` is given)."""
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        future = pool.submit(
            _drive, address, api_key, list(warmup), list(requests), concurrency, mode, limit, max_seconds, tls
        )
        return future.result()


@dataclass(frozen=True)
class ConnectionCost:
    """What a new connection costs: its first call (connect, handshake, call) against the next."""

    first_call_p50_ms: float
    next_call_p50_ms: float

    @property
    def setup_ms(self) -> float:
        return self.first_call_p50_ms - self.next_call_p50_ms


def measure_connections(address: str, tls: ClientTls | None, samples: int = 30) -> ConnectionCost:
    """Open `samples` fresh connections, each timing a health check as its first call and again as
    its second: the difference is the connection's set-up (TCP, and the TLS handshake when on).
    A server that cannot be reached (or refuses the handshake) is a ClientError."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from memsvc.api.client import ClientError
    from memsvc.api.tls import open_channel

    first: list[float] = []
    second: list[float] = []
    request = health_pb2.HealthCheckRequest()
    for _ in range(samples):
        with open_channel(address, tls, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
            check = health_pb2_grpc.HealthStub(channel).Check
            for times in (first, second):
                started = time.perf_counter()
                try:
                    check(request, timeout=30)
                except grpc.RpcError as exc:
                    raise ClientError(exc.code().name, f"{address}: {exc.details()}") from exc
                times.append((time.perf_counter() - started) * 1000)
    return ConnectionCost(percentile(first, 50), percentile(second, 50))


@dataclass(frozen=True)
class LatencySummary:
    p50_ms: float
    p95_ms: float
    p99_ms: float
    qps: float
    stages_ms: dict[str, float]
    count: int
    errors: dict[str, int]
    server_p50_ms: float = 0.0

    @classmethod
    def of(cls, result: DriveResult) -> LatencySummary:
        ok = result.ok
        latencies = [s.latency_ms for s in ok]
        stages: dict[str, list[float]] = {}
        for s in ok:
            for stage, ms in s.stages_ms.items():
                stages.setdefault(stage, []).append(ms)
        errors: dict[str, int] = {}
        for s in result.samples:
            if s.code != "OK":
                errors[s.code] = errors.get(s.code, 0) + 1
        return cls(
            p50_ms=percentile(latencies, 50),
            p95_ms=percentile(latencies, 95),
            p99_ms=percentile(latencies, 99),
            qps=len(ok) / result.seconds if result.seconds > 0 else 0.0,
            stages_ms={k: statistics.median(v) for k, v in stages.items()},
            count=len(ok),
            errors=errors,
        )


# -- the floor: the same embedder, Milvus search and record fetch, without the service --------


@dataclass(frozen=True)
class Floor:
    p50_ms: float
    embed_p50_ms: float
    search_p50_ms: float
    fetch_p50_ms: float
    samples: int


def measure_floor(bench: BenchServer, pairs: Sequence[tuple[str, str]], *, embed: bool, k: int) -> Floor:
    """Embed (unless `embed` is False: a cache hit costs a lookup), search the user's partition, fetch rows.

    Each step is called directly on the adapters the server was built with, one query at a time,
    while the server is idle.
    """
    from memsvc.domain.models import MemoryFilter, Namespace
    from memsvc.stores.vectors.milvus import filter_expression

    components = bench.components
    index = components.index
    embedder: Any = components.embedder
    principal = bench.loop.run(components.keys.authenticate(bench.api_key))
    expression = " and ".join(f"({t})" for t in filter_expression(MemoryFilter()))
    cached = bench.loop.run(embedder.embed([pairs[0][1]]))[0]

    async def fetch(namespace: Namespace, ids: list[str]) -> float:
        started = time.perf_counter()
        await components.store.fetch_memories(namespace, ids)
        return (time.perf_counter() - started) * 1000

    totals: list[float] = []
    embeds: list[float] = []
    searches: list[float] = []
    fetches: list[float] = []
    for user, text in pairs:
        namespace = Namespace.of(principal, user)
        location = bench.loop.run(index.location(namespace))
        if location is None:
            continue
        started = time.perf_counter()
        if embed:
            # The blocking encode, when the embedder has one: no micro-batching wait in the floor.
            vector = (
                embedder.encode([text])[0] if hasattr(embedder, "encode") else bench.loop.run(embedder.embed([text]))[0]
            )
        else:
            vector = cached
        embedded = time.perf_counter()
        partitions = {"partition_names": [location.partition]} if location.partition else {}
        hits = index.client.search(
            location.collection,
            data=[vector.tolist()],
            limit=k,
            filter=" and ".join(f"({t})" for t in (location.namespace_term, expression) if t),
            output_fields=["id"],
            search_params={"metric_type": "COSINE"},
            # The cheapest search each engine offers: Strong is free in process and waits for a
            # time tick on a server, where the floor is a Bounded search.
            consistency_level="Strong" if components.settings.is_embedded_milvus else "Bounded",
            **partitions,
        )
        searched = time.perf_counter()
        fetch_ms = bench.loop.run(fetch(namespace, [str(h["id"]) for h in hits[0]]))
        embeds.append((embedded - started) * 1000)
        searches.append((searched - embedded) * 1000)
        fetches.append(fetch_ms)
        totals.append(embeds[-1] + searches[-1] + fetch_ms)
    return Floor(
        p50_ms=percentile(totals, 50),
        embed_p50_ms=percentile(embeds, 50),
        search_p50_ms=percentile(searches, 50),
        fetch_p50_ms=percentile(fetches, 50),
        samples=len(totals),
    )
