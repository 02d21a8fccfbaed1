"""Milvus vector index (Milvus Lite file or a Milvus server), one collection family per model.

Per-user isolation is a placement object (memsvc/stores/vectors/placement.py), chosen by
configuration: a partition per namespace (default), or one partition-key collection. The index
asks it where a namespace lives and otherwise does not care which it is.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias, TypeVar

import numpy as np
from grpc import RpcError, StatusCode
from pymilvus import DataType, MilvusClient
from pymilvus.exceptions import MilvusException

from memsvc.config import MILVUS_SERVER_SCHEMES
from memsvc.domain.models import MemoryFilter, Namespace, RetentionStatus
from memsvc.errors import FailedPrecondition, Unavailable
from memsvc.stores.vectors import milvus_grpc
from memsvc.stores.vectors.base import Vector, VectorHit, VectorItem
from memsvc.stores.vectors.batching import SearchBatcher
from memsvc.stores.vectors.milvus_lite import DEFAULT_EXACT_ROWS, EmbeddedMilvus
from memsvc.stores.vectors.placement import (
    Location,
    PartitionKeyPlacement,
    PartitionPlacement,
    Placement,
    PlacementRegistry,
    quote,
)
from memsvc.tls import read_key_pair, read_trusted_cas

T = TypeVar("T")
# A Milvus server through pymilvus, or a Milvus Lite directory opened in process: same calls.
Client: TypeAlias = MilvusClient | EmbeddedMilvus
log = logging.getLogger(__name__)
# pymilvus wraps most failures in MilvusException but lets a call's own timeout through as the
# raw grpc error: both mean the index did not answer. (The one grpc import outside api/.)
_FAILURES = (MilvusException, RpcError)

_MAX_TAGS = 32
_NAME_SAFE = re.compile(r"[^A-Za-z0-9_]")


def collection_prefix(embedding_version: str) -> str:
    """The name every collection of an embedding version starts with."""
    return "memsvc_" + _NAME_SAFE.sub("_", embedding_version).lower()


def version_collection(prefix: str, name: str) -> bool:
    """Whether collection `name` belongs to the version of `prefix`: its partition-key collection
    or one of its shard collections (prefixes nest: "..._1" is the start of "..._1_int8_pk")."""
    return re.fullmatch(re.escape(prefix) + r"_(pk|s\d{4})", name) is not None


# A collection property whose only purpose is to change: altering it expires the proxies' cache.
_CACHE_EPOCH = "memsvc.cache_epoch"


def filter_expression(memory_filter: MemoryFilter) -> list[str]:
    """Expression terms for caller filters; every value is quoted, never pasted. The index has no
    metadata (sealed) and no importance (the rank stage gates it): those two fields are not here."""
    terms: list[str] = []
    if memory_filter.tier is not None:
        terms.append(f"tier == {quote(memory_filter.tier.value)}")
    if memory_filter.tags_any:
        terms.append(f"ARRAY_CONTAINS_ANY(tags, [{', '.join(quote(t) for t in memory_filter.tags_any)}])")
    if memory_filter.session_id:
        terms.append(f"session_id == {quote(memory_filter.session_id)}")
    if memory_filter.session_ids:
        terms.append(f"session_id in [{', '.join(quote(s) for s in memory_filter.session_ids)}]")
    if memory_filter.roles:
        terms.append(f"role in [{', '.join(quote(r.value) for r in memory_filter.roles)}]")
    if memory_filter.kinds:
        terms.append(f"kind in [{', '.join(quote(k.value) for k in memory_filter.kinds)}]")
    if memory_filter.created_after is not None:
        terms.append(f"created_at >= {int(memory_filter.created_after)}")
    if memory_filter.created_before is not None:
        terms.append(f"created_at < {int(memory_filter.created_before) + 1}")
    if not memory_filter.include_inactive:
        terms.append(f"status == {quote(RetentionStatus.ACTIVE.value)}")
    return terms


@dataclass(frozen=True)
class GraphIndex:
    """The HNSW graph every collection's vectors are searched through (settings vector_hnsw_*):
    degree `m` and build breadth `ef_construction` for collections created from now on, search
    breadth `ef` (raised to a search's limit where that is larger: HNSW returns at most ef)."""

    m: int = 16
    ef_construction: int = 100
    ef: int = 128


class _WriteGate:
    """One write at a time into an embedded Milvus Lite, and no read while it runs.

    Milvus Lite (in this process) does not guard its own writers: an insert appends to the
    write-ahead log and then to the memtable without a lock, and a flush swaps both under a
    running insert. Two concurrent upserts interleave their WAL records (recovery drops the
    log from the first torn record on), and an upsert that straddles a flush lands in the WAL
    the flush deletes. Either way the vector is searchable until the process dies, then gone
    after a restart, while its row is already marked indexed, so the reconciler never restores
    it. Writes (upsert, delete, flush, collection and partition changes) therefore take the gate
    alone; reads share it, and never see a flush halfway (memtable swapped, segment not yet
    listed). A Milvus server guards itself: for it the gate lets everything through. There is
    one gate per process (`_LITE_GATE`): two indexes on one Lite file share its engine.
    """

    def __init__(self, serialize: bool) -> None:
        self._serialize = serialize
        self._cond = threading.Condition()
        self._readers = 0
        self._writing = False
        self._writers_waiting = 0

    @contextmanager
    def reading(self) -> Iterator[None]:
        if not self._serialize:
            yield
            return
        with self._cond:
            # Waiting writers go first: a steady stream of searches must not starve the writes.
            while self._writing or self._writers_waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        if not self._serialize:
            yield
            return
        with self._cond:
            self._writers_waiting += 1
            while self._writing or self._readers:
                self._cond.wait()
            self._writers_waiting -= 1
            self._writing = True
        try:
            yield
        finally:
            with self._cond:
                self._writing = False
                self._cond.notify_all()


_LITE_GATE = _WriteGate(serialize=True)
_SERVER_GATE = _WriteGate(serialize=False)


class _TimedCalls:
    """The index's current MilvusClient, every call bounded by the call timeout unless given one.

    Without a timeout a hung Milvus (a frozen process, a silent network) holds a worker thread
    for as long as the connection lives; with one the call fails, the index is marked broken
    and later calls fail fast until the reconnection.
    """

    # Local helpers take no timeout. Loading a collection is bounded too: unbounded, a hung server
    # held the loading call (and the index lock, and every write behind it) until it woke up. A
    # load cut short goes on in the server; the next call waits for it again, the reconciler
    # indexes what failed meanwhile.
    _UNTIMED = frozenset({"prepare_index_params", "create_schema", "close"})

    def __init__(self, index: MilvusVectorIndex) -> None:
        self._index = index

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._index.client, name)
        if name in self._UNTIMED or not callable(attr):
            return attr
        timeout_s = self._index.call_timeout_s

        def call(*args: Any, **kwargs: Any) -> Any:
            kwargs.setdefault("timeout", timeout_s)
            return attr(*args, **kwargs)

        return call


class MilvusVectorIndex:
    """VectorIndex on Milvus. Blocking client calls run on a small thread pool."""

    def __init__(
        self,
        client: Client,
        *,
        embedding_version: str,
        dimension: int,
        placement: str,
        registry: PlacementRegistry,
        partitions_per_collection: int = 1000,
        partition_key_partitions: int = 64,
        embedded: bool = True,
        flush_delay_s: float = 1.0,
        seal_delay_s: float | None = None,
        workers: int | None = None,
        reconnect: Callable[[], Client] | None = None,
        reconnect_backoff_s: float = 1.0,
        reconnect_backoff_max_s: float = 30.0,
        probe_timeout_s: float = 2.0,
        call_timeout_s: float | None = None,
        read_your_writes: bool = True,
        graph: GraphIndex | None = None,
    ) -> None:
        self._client = client
        self._graph = graph or GraphIndex()
        # On a Milvus server: searches run Bounded, and a namespace with a recorded last write
        # waits for exactly that write's timestamp (see search_many). Off only to show the race.
        self._read_your_writes = read_your_writes
        self.call_timeout_s = call_timeout_s
        self._api = _TimedCalls(self)
        self._reconnecting = False
        # Reconnection: after a call finds Milvus unreachable, calls fail fast until the backoff
        # ends; the next call then builds a new client (for Milvus Lite, a new local server).
        self._reconnect = reconnect
        self._backoff_s = reconnect_backoff_s
        self._backoff_max_s = reconnect_backoff_max_s
        self._probe_timeout_s = probe_timeout_s
        self._client_lock = threading.Lock()
        self._broken_until: float | None = None
        self._next_backoff_s = reconnect_backoff_s
        self._version = embedding_version
        self._dimension = dimension
        self._registry = registry
        self._partition_key_partitions = partition_key_partitions
        self._embedded = embedded
        self._flush_delay_s = flush_delay_s
        self._seal_delay_s = seal_delay_s
        self._prefix = collection_prefix(embedding_version)
        self._placement: Placement = (
            PartitionKeyPlacement(f"{self._prefix}_pk")
            if placement == "partition_key"
            else PartitionPlacement(registry, self._prefix, partitions_per_collection)
        )
        # Milvus Lite searches in Python under the GIL: a second thread adds no parallelism, only
        # GIL hand-offs (at concurrency 16: 63-64 -> 69-71 queries/s, p99 -25 % with one thread).
        # Calls to a server wait on the network, so there several overlap.
        self._executor = ThreadPoolExecutor(max_workers=workers or (1 if embedded else 4), thread_name_prefix="milvus")
        self._lock = threading.Lock()
        self._ready_collections: set[str] = set()
        self._ready_partitions: set[tuple[str, str]] = set()
        self._flush_pending: set[str] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False
        self._batcher = SearchBatcher(self.search_many)
        self._gate = _LITE_GATE if embedded else _SERVER_GATE

    @property
    def embedding_version(self) -> str:
        return self._version

    @property
    def client(self) -> Client:
        """The underlying client, for tools that measure Milvus without the service (benchmarks)."""
        return self._client

    async def location(self, namespace: Namespace) -> Location | None:
        """Where a namespace's vectors live, or None before its first write."""
        return await self._locate(namespace.digest, create=False)

    # -- plumbing -----------------------------------------------------------------------------

    async def _call(self, fn: Callable[[], T], *, read: bool = False, reconnect: bool = False) -> T:
        """Run `fn` on the thread pool; a write unless `read` (see _WriteGate). While the index is
        marked broken only a call that may `reconnect` (ping) tries a new client."""

        def run() -> T:
            client = self._usable_client(reconnect)
            try:
                with self._gate.reading() if read else self._gate.writing():
                    return fn()
            except _FAILURES as exc:
                if not self._reachable(client):
                    self._mark_broken(client)
                raise Unavailable("the vector index is unavailable", retry_after_s=self._backoff_s) from exc

        try:
            future = asyncio.get_running_loop().run_in_executor(self._executor, run)
        except RuntimeError as exc:  # closed: the pool no longer takes work
            raise Unavailable("the vector index is shutting down", retry_after_s=self._backoff_s) from exc
        return await future

    def _usable_client(self, reconnect: bool) -> Client:
        """The client to call, or Unavailable while the index is marked broken. Once the backoff is
        over, a ping (`reconnect`: readiness and the reconciler ping in the background) rebuilds
        it; a request never does, since probing a hung Milvus holds the caller for the probe's
        timeout (an acknowledged write waited 2 s for it under load)."""
        with self._client_lock:
            if self._broken_until is None:
                return self._client
            wait_s = self._broken_until - time.monotonic()
            if wait_s > 0 or not reconnect or self._reconnect is None or self._reconnecting:
                raise Unavailable("the vector index is unavailable", retry_after_s=max(wait_s, self._backoff_s))
            self._reconnecting = True  # one thread reconnects; the others fail fast meanwhile
        try:
            # The broken client goes first: an embedded Milvus Lite holds its directory's lock
            # until closed, and a server client has nothing left to serve.
            self._client.close()
        except Exception:  # the old client belongs to the outage; closing it is best effort
            log.debug("closing the previous Milvus client failed", exc_info=True)
        try:
            client = self._reconnect()
            client.list_collections(timeout=self._probe_timeout_s)
        except Exception as exc:  # whatever stops a reconnection (OSError too) prolongs the outage
            with self._client_lock:
                self._reconnecting = False
                self._next_backoff_s = min(self._next_backoff_s * 2, self._backoff_max_s)
                self._broken_until = time.monotonic() + self._next_backoff_s
            log.warning("vector index still unreachable; next attempt in %.1f s", self._next_backoff_s)
            raise Unavailable("the vector index is unavailable", retry_after_s=self._next_backoff_s) from exc
        with self._client_lock:
            self._reconnecting = False
            self._client = client
            # A new server (or a reopened Milvus Lite) has nothing loaded: ensure everything again.
            self._ready_collections.clear()
            self._ready_partitions.clear()
            self._broken_until = None
            self._next_backoff_s = self._backoff_s
            log.warning("vector index reconnected")
        return client

    def _reachable(self, client: Client) -> bool:
        """Tell an outage from a refused request: can the server still list its collections?"""
        try:
            client.list_collections(timeout=self._probe_timeout_s)
        except _FAILURES:
            return False
        return True

    def _mark_broken(self, client: Client) -> None:
        with self._client_lock:
            if client is self._client and self._broken_until is None:
                self._broken_until = time.monotonic() + self._next_backoff_s
                log.warning("vector index unreachable; reconnecting in %.1f s", self._next_backoff_s)

    def _schema(self, with_namespace: bool) -> Any:
        schema = MilvusClient.create_schema(
            auto_id=False,
            enable_dynamic_field=False,
            **(
                {"partition_key_field": "ns", "num_partitions": self._partition_key_partitions}
                if with_namespace
                else {}
            ),
        )
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
        if with_namespace:
            schema.add_field("ns", DataType.VARCHAR, max_length=64)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=self._dimension)
        schema.add_field("tier", DataType.VARCHAR, max_length=8)
        schema.add_field("tags", DataType.ARRAY, element_type=DataType.VARCHAR, max_capacity=_MAX_TAGS, max_length=64)
        schema.add_field("session_id", DataType.VARCHAR, max_length=128)
        schema.add_field("role", DataType.VARCHAR, max_length=16)
        schema.add_field("kind", DataType.VARCHAR, max_length=16)
        schema.add_field("status", DataType.VARCHAR, max_length=16)
        schema.add_field("created_at", DataType.INT64)
        return schema

    def _ensure_collection_sync(self, name: str, with_namespace: bool) -> None:
        if name in self._ready_collections:
            return
        with self._lock:
            if name in self._ready_collections:
                return
            if not self._api.has_collection(name):
                properties = {"partitionkey.isolation": True} if with_namespace else {}
                self._api.create_collection(
                    name, schema=self._schema(with_namespace), index_params=self._index_params(), properties=properties
                )
            elif self._embedded:
                self._adopt_graph_index(name)
            self._api.load_collection(name)
            self._ready_collections.add(name)

    def _index_params(self) -> Any:
        index = self._api.prepare_index_params()
        index.add_index(
            field_name="vector",
            index_type="HNSW",
            metric_type="COSINE",
            params={"M": self._graph.m, "efConstruction": self._graph.ef_construction},
        )
        return index

    def _adopt_graph_index(self, name: str) -> None:
        """Give a Milvus Lite collection made with an exhaustive index (FLAT, what every Lite
        collection had before) its HNSW graph: once, at the first open, every segment's graph is
        built then (about 2,000 vectors a second a core); the data stays as it is. A search of a
        segment without its graph yet (one just sealed or merged) scores it exactly meanwhile."""
        current = self._api.describe_index(name, "vector")
        if current.get("index_type") == "HNSW":
            return
        log.info("building the HNSW graph of %s (its index was %s)", name, current.get("index_type") or "none")
        started = time.monotonic()
        self._api.release_collection(name)
        if current:
            self._api.drop_index(name, "vector")
        self._api.create_index(name, self._index_params())
        self._api.load_collection(name)
        log.info("built the HNSW graph of %s in %.1f s", name, time.monotonic() - started)

    def _ensure_partition_sync(self, collection: str, partition: str) -> None:
        if (collection, partition) in self._ready_partitions:
            return
        if not self._api.has_partition(collection, partition):
            try:
                self._api.create_partition(collection, partition)
            except MilvusException:
                # Another writer may have created it in between; only a real absence is an error.
                if not self._api.has_partition(collection, partition):
                    raise
            if not self._embedded:
                self._load_new_partition(collection, partition)
        self._ready_partitions.add((collection, partition))

    def _load_new_partition(self, collection: str, partition: str) -> None:
        """Return once a just-created partition takes writes and answers searches.

        A Milvus server (2.3.5) acknowledges a new partition before its proxy knows it: the
        user's first write failed with "partition not found" (and went to the reconciler), and
        their first search could miss it. Loading the partition succeeds, and returns once the
        query node serves it, as soon as the proxy has caught up; until then it is retried.

        The proxy may also never catch up on its own: its cache of the collection, filled by a
        search that raced the creation, can miss the partition until the next DDL on the
        collection invalidates it (milvus-io/milvus#36989, #45697; one clean-clone CI run here
        saw "partition not found" for the whole 10 s). Past the first retries the index makes
        that DDL itself: a collection property changed to a new value, which expires every
        proxy's cache of the collection.

        And while other writers create partitions of the same collection, each creation drops
        the proxy's cached entry of the collection; a load-progress lookup racing that drop
        failed with "can't find collection name" (one clean-clone CI run here, four writers
        creating partitions at once). It is the same transient state, retried the same way.
        """
        deadline = time.monotonic() + (self.call_timeout_s or 10.0)
        pause_s = 0.05
        while True:
            try:
                self._api.load_partitions(collection, [partition])
                return
            except RpcError as exc:
                # A Milvus Lite server has no partition-level load: it serves a partition as soon
                # as it exists, the collection being loaded already.
                if exc.code() == StatusCode.UNIMPLEMENTED:
                    return
                raise
            except MilvusException as exc:
                transient = "not found" in str(exc) or "can't find collection" in str(exc)
                if not transient or time.monotonic() + pause_s > deadline:
                    raise
            if pause_s >= 0.2:
                self._expire_proxy_cache(collection)
            time.sleep(pause_s)
            pause_s = min(pause_s * 2, 0.5)

    def _expire_proxy_cache(self, collection: str) -> None:
        try:
            self._api.alter_collection_properties(collection, properties={_CACHE_EPOCH: str(time.time_ns())})
        except MilvusException as exc:  # best effort: the retries go on either way
            log.warning("could not refresh the Milvus proxy's view of %s: %s", collection, exc)

    async def _locate(self, digest: str, *, create: bool) -> Location | None:
        return await self._placement.locate(self, digest, create=create)

    # -- Collections (what a placement asks of the index) -------------------------------------

    async def ensure_collection(self, name: str, *, with_namespace: bool) -> None:
        if name not in self._ready_collections:
            await self._call(lambda: self._ensure_collection_sync(name, with_namespace))

    async def ensure_partition(self, collection: str, partition: str) -> None:
        # Known to exist: no round trip through the Milvus thread pool just to confirm it.
        if (collection, partition) not in self._ready_partitions:
            await self._call(lambda: self._ensure_partition_sync(collection, partition))

    def _schedule_flush(self, collection: str) -> None:
        """Seal growing segments some time after writes: both engines search sealed data faster.

        Milvus Lite, a second after the write. A Milvus server seals a segment on its own only
        once it holds 16 MB and idles for 10 minutes, or after a day, and a user's partition
        rarely grows that large, so its writes stay in growing segments, which cost each search
        of the server 15-22 % more CPU (docs/performance.md, "Design decisions"). There, after
        `seal_delay_s` (None: left to the server): a flush seals every partition of the
        collection at once, and Milvus's compaction merges the small segments it leaves."""
        delay_s = self._flush_delay_s if self._embedded else self._seal_delay_s
        if delay_s is None or collection in self._flush_pending:
            return
        self._flush_pending.add(collection)

        async def flush_later() -> None:
            await asyncio.sleep(delay_s)
            self._flush_pending.discard(collection)
            try:
                if self._embedded:
                    await self._call(lambda: self._api.flush(collection))
                else:
                    await self._call(lambda: milvus_grpc.seal(self._server_client(), collection, self.call_timeout_s))
            except Unavailable:
                log.warning("flush of %s failed; the next write schedules another", collection)

        task = asyncio.get_running_loop().create_task(flush_later())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- VectorIndex --------------------------------------------------------------------------

    async def upsert(self, namespace: Namespace, items: Sequence[VectorItem]) -> None:
        if not items:
            return
        location = await self._locate(namespace.digest, create=True)
        assert location is not None
        rows = []
        for item in items:
            row: dict[str, Any] = {
                "id": item.memory_id,
                "vector": item.vector.tolist(),
                "tier": item.tier.value,
                "tags": list(item.tags),
                "session_id": item.session_id,
                "role": item.role.value,
                "kind": item.kind.value,
                "status": item.retention_status.value,
                "created_at": int(item.created_at),
            }
            if location.namespace_term is not None:
                row["ns"] = namespace.digest
            rows.append(row)
        try:
            await self._upsert_rows(namespace.digest, location, rows)
        except Unavailable:
            if location.partition is None:
                raise
            # Another replica may have dropped this partition (ForgetUser) after this one cached
            # it as ready: ensure it again and retry once. A real outage fails the retry too.
            self._ready_partitions.discard((location.collection, location.partition))
            location = await self._locate(namespace.digest, create=True)
            assert location is not None
            await self._upsert_rows(namespace.digest, location, rows)
        self._schedule_flush(location.collection)

    async def _upsert_rows(self, digest: str, location: Location, rows: list[dict[str, Any]]) -> None:
        if self._embedded:
            await self._call(
                lambda: self._api.upsert(
                    location.collection, rows, **({"partition_name": location.partition} if location.partition else {})
                )
            )
            return
        # MilvusClient.upsert drops the write's timestamp; the connection's own calls return it.
        if location.namespace_term is None:
            result = await self._call(
                lambda: self._server_mutation(
                    "upsert_rows", location.collection, rows, partition_name=location.partition
                )
            )
        else:
            # Milvus 2.3.5 routes upserted rows past their partition key (a search or query by
            # `ns` then finds nothing); delete and insert route by the key. A failure between the
            # two leaves the memory unindexed, which the reconciler repairs like any failed write.
            replaced = "id in [" + ", ".join(quote(str(row["id"])) for row in rows) + "]"
            expression = f"({location.namespace_term}) and ({replaced})"

            def replace() -> Any:
                self._server_mutation("delete", location.collection, expression)
                return self._server_mutation("insert_rows", location.collection, rows)

            result = await self._call(replace)
        await self._note_write(digest, int(result.timestamp))

    def _server_client(self) -> MilvusClient:
        client = self._usable_client(reconnect=False)
        assert isinstance(client, MilvusClient), "a Milvus server's call on Milvus Lite"
        return client

    def _server_mutation(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """A write through the connection under the server client, whose mutations report their
        timestamp (MilvusClient's own drop it). The call context names the client's database:
        without it the connection writes to `default`, and with MEMSVC_MILVUS_DB_NAME set every
        write failed ("collection not found") and went to the reconciler, which failed the same way."""
        client = self._server_client()
        connection = client._get_connection()
        context = client._generate_call_context()
        return getattr(connection, method)(*args, timeout=self.call_timeout_s, context=context, **kwargs)

    async def _note_write(self, digest: str, timestamp: int) -> None:
        """Record the namespace's last write timestamp where every replica's searches read it."""
        if timestamp <= 0:
            # Milvus 2.3.5 answers a delete with timestamp 0: a hybrid timestamp of the wall
            # clock now (milliseconds above 18 logical bits) is at or after the delete's own.
            timestamp = int(time.time() * 1000) << 18
        await self._registry.note_vector_write(digest, self._prefix, timestamp)

    async def _search_consistency(self, digest: str) -> milvus_grpc.Consistency:
        """Strong on Milvus Lite; on a server Bounded, or up to the namespace's last write."""
        if self._embedded:
            # Milvus Lite answers from the process's own state: Strong costs it nothing.
            return milvus_grpc.Consistency("Strong")
        if self._read_your_writes:
            last_write = await self._registry.last_vector_write(digest, self._prefix)
            if last_write is not None:
                # Customized: the server serves once its data reaches this timestamp, so the
                # user's acknowledged writes (from any replica) are visible; no wait for a tick.
                return milvus_grpc.Consistency("Customized", last_write)
        return milvus_grpc.Consistency("Bounded")

    async def search(
        self, namespace: Namespace, vector: Vector, limit: int, memory_filter: MemoryFilter
    ) -> list[VectorHit]:
        # Searches started together (a mode's sub-queries) go to Milvus as one call.
        key = " and ".join(filter_expression(memory_filter))
        return await self._batcher.search(namespace, vector, limit, memory_filter, key)

    async def search_many(
        self, namespace: Namespace, vectors: Sequence[Vector], limit: int, memory_filter: MemoryFilter
    ) -> list[list[VectorHit]]:
        location = await self._locate(namespace.digest, create=False)
        if location is None or not vectors:
            return [[] for _ in vectors]
        terms = filter_expression(memory_filter)
        if location.namespace_term is not None:
            terms.insert(0, location.namespace_term)
        expression = " and ".join(f"({t})" for t in terms)
        consistency = await self._search_consistency(namespace.digest)
        try:
            if self._embedded:
                hits = await self._call(lambda: self._search_embedded(location, vectors, limit, expression), read=True)
            else:
                request = milvus_grpc.search_request(
                    location.collection,
                    vectors,
                    limit=limit,
                    expression=expression,
                    partition=location.partition,
                    consistency=consistency,
                    ef=max(self._graph.ef, limit),
                )
                hits = await self._call(
                    lambda: milvus_grpc.search(self._server_client(), request, self.call_timeout_s), read=True
                )
        except Unavailable:
            if location.partition is None or await self._partition_exists(location):
                raise
            return [[] for _ in vectors]  # another replica dropped the partition (ForgetUser)
        return hits

    def _search_embedded(
        self, location: Location, vectors: Sequence[Vector], limit: int, expression: str
    ) -> list[list[VectorHit]]:
        result = self._api.search(
            location.collection,
            data=[v.tolist() for v in vectors],
            limit=limit,
            filter=expression,
            # Only the id: Milvus Lite reads an empty list as every field, vector included,
            # and serialising 50 vectors per search cost it 2 of its 6 ms.
            output_fields=["id"],
            search_params={"metric_type": "COSINE", "params": {"ef": max(self._graph.ef, limit)}},
            partition_names=[location.partition] if location.partition else None,
        )
        return [[VectorHit(str(hit["id"]), float(hit["distance"])) for hit in hits] for hits in result]

    async def vectors(self, namespace: Namespace, memory_ids: Sequence[str]) -> dict[str, Vector]:
        location = await self._locate(namespace.digest, create=False)
        if location is None or not memory_ids:
            return {}
        ids = list(memory_ids)
        kwargs: dict[str, Any] = {"partition_names": [location.partition]} if location.partition else {}
        # The vectors of the caller's own acknowledged writes, as searches see them (a session
        # summary is composed from the vectors of turns stored a moment before).
        kwargs.update((await self._search_consistency(namespace.digest)).kwargs())
        if location.namespace_term is not None:
            # A shared collection: only rows of this namespace, whatever ids were asked for.
            expression = f"({location.namespace_term}) and id in [{', '.join(quote(i) for i in ids)}]"
            rows = await self._call(
                lambda: self._api.query(location.collection, filter=expression, output_fields=["vector"], **kwargs),
                read=True,
            )
        else:
            rows = await self._call(
                lambda: self._api.get(location.collection, ids=ids, output_fields=["vector"], **kwargs), read=True
            )
        return {str(row["id"]): np.asarray(row["vector"], dtype=np.float32) for row in rows}

    async def _partition_exists(self, location: Location) -> bool:
        collection, partition = location.collection, location.partition
        assert partition is not None
        exists = await self._call(lambda: bool(self._api.has_partition(collection, partition)), read=True)
        if not exists:
            self._ready_partitions.discard((collection, partition))
        return exists

    async def delete(self, namespace: Namespace, memory_ids: Sequence[str]) -> None:
        await self.delete_by_digest(namespace.digest, memory_ids)

    async def delete_by_digest(self, namespace_digest: str, memory_ids: Sequence[str]) -> None:
        if not memory_ids:
            return
        location = await self._locate(namespace_digest, create=False)
        if location is None:
            return
        ids = list(memory_ids)
        if self._embedded:
            await self._call(
                lambda: self._api.delete(
                    location.collection,
                    ids=ids,
                    **({"partition_name": location.partition} if location.partition else {}),
                )
            )
        else:
            expression = "id in [" + ", ".join(quote(i) for i in ids) + "]"
            if location.namespace_term is not None:
                # Milvus 2.3.5 applies a delete on a partition-key collection only with the key.
                expression = f"({location.namespace_term}) and ({expression})"
            result = await self._call(
                lambda: self._server_mutation(
                    "delete", location.collection, expression, partition_name=location.partition
                )
            )
            await self._note_write(namespace_digest, int(result.timestamp))
        self._schedule_flush(location.collection)

    async def drop_namespace(self, namespace: Namespace) -> None:
        location = await self._locate(namespace.digest, create=False)
        if location is None:
            return
        if location.partition is None:
            term = location.namespace_term
            if self._embedded:
                await self._call(lambda: self._api.delete(location.collection, filter=term))
            else:
                result = await self._call(lambda: self._server_mutation("delete", location.collection, term))
                # Erasure ends with clear_namespace_tombstone, which removes this clock row again.
                await self._note_write(namespace.digest, int(result.timestamp))
            self._schedule_flush(location.collection)
            return
        partition = location.partition

        def drop() -> None:
            # Dropping the partition removes the vectors for real, not just logically. A Milvus
            # server wants a loaded partition released first; Milvus Lite drops it directly.
            if self._api.has_partition(location.collection, partition):
                try:
                    self._api.drop_partition(location.collection, partition)
                except MilvusException:
                    self._api.release_partitions(location.collection, [partition])
                    self._api.drop_partition(location.collection, partition)
            self._ready_partitions.discard((location.collection, partition))

        await self._call(drop)

    async def drop_version(self, embedding_version: str) -> list[str]:
        if embedding_version == self._version:
            raise ValueError("refusing to drop the vectors this index serves")
        prefix = collection_prefix(embedding_version)

        def drop() -> list[str]:
            names = [n for n in self._api.list_collections() if version_collection(prefix, n)]
            for name in names:
                try:
                    self._api.drop_collection(name)
                except MilvusException:
                    if self._api.has_collection(name):
                        raise
                    # another worker or replica adopting the new version dropped it first
            return names

        return await self._call(drop)

    async def count(self, namespace: Namespace) -> int:
        location = await self._locate(namespace.digest, create=False)
        if location is None:
            return 0
        expression = location.namespace_term or 'id != ""'
        if not self._embedded:
            return await self._call(lambda: self._count_server_rows(location, expression), read=True)
        rows = await self._call(
            lambda: self._api.query(
                location.collection,
                filter=expression,
                output_fields=["count(*)"],
                consistency_level="Strong",
                **({"partition_names": [location.partition]} if location.partition else {}),
            ),
            read=True,
        )
        return int(rows[0]["count(*)"]) if rows else 0

    def _count_server_rows(self, location: Location, expression: str) -> int:
        """The namespace's rows on a Milvus server, counted by id. Its count(*) counts a row an
        upsert replaced once more until compaction rewrites the segment (milvus-io/milvus#27515,
        in 2.3.5): a benchmark user whose memories were re-indexed as they changed status
        counted 94,133 rows where 39,004 ids were stored. One Strong query for every id, without
        a limit: with one, 2.3.5 takes that many rows of a segment before it drops the replaced
        ones (a page of 10,000 held 5,204 ids of 38,455), and pymilvus's query iterator reads at
        a client-side timestamp there, which missed a write made just before. Only tools and
        tests count (38,455 ids in 0.6 s)."""
        rows = self._api.query(
            location.collection,
            filter=expression,
            output_fields=["id"],
            consistency_level="Strong",
            **({"partition_names": [location.partition]} if location.partition else {}),
        )
        return len(rows)

    async def ping(self) -> None:
        await self._call(lambda: self._api.list_collections(), read=True, reconnect=True)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Scheduled flushes still waiting end now; the final flush below covers them.
        scheduled = list(self._background)
        for task in scheduled:
            task.cancel()
        await asyncio.gather(*scheduled, return_exceptions=True)
        # Milvus Lite persists on flush. A server persists from its own log: a flush forced by
        # every replica's shutdown only seals small segments, and waits for them (over two
        # minutes for a collection whose thousand partitions had just been written).
        for collection in list(self._ready_collections) if self._embedded else []:
            try:
                await self._call(lambda c=collection: self._api.flush(c))  # type: ignore[misc]
            except Unavailable:
                log.warning("final flush of %s failed", collection)
        # Calls of RPCs cut at shutdown may still run on the pool (cancelling their coroutine
        # does not stop the thread): the client closes only once every worker is done.
        await asyncio.to_thread(self._executor.shutdown, True)
        try:
            await asyncio.to_thread(self._client.close)
        except MilvusException:
            log.warning("closing the Milvus client failed")


def _milvus_tls(server_pem_path: str, client_pem_path: str, client_key_path: str) -> dict[str, Any]:
    """pymilvus's TLS arguments, the files checked first so that a wrong one stops the start-up."""
    if bool(client_pem_path) != bool(client_key_path):
        raise FailedPrecondition("MEMSVC_MILVUS_CLIENT_PEM_PATH, MEMSVC_MILVUS_CLIENT_KEY_PATH: mutual TLS needs both")
    if server_pem_path:
        read_trusted_cas(Path(server_pem_path), "MEMSVC_MILVUS_SERVER_PEM_PATH")
    if not client_pem_path:
        return {"server_pem_path": server_pem_path, "secure": True} if server_pem_path else {}
    if not server_pem_path:
        raise FailedPrecondition(
            "MEMSVC_MILVUS_SERVER_PEM_PATH: mutual TLS needs the CA that signed the Milvus server's certificate"
        )
    read_key_pair(
        Path(client_pem_path), "MEMSVC_MILVUS_CLIENT_PEM_PATH", Path(client_key_path), "MEMSVC_MILVUS_CLIENT_KEY_PATH"
    )
    # pymilvus sends a client certificate only when no server_pem_path is given.
    return {
        "ca_pem_path": server_pem_path,
        "client_pem_path": client_pem_path,
        "client_key_path": client_key_path,
        "secure": True,
    }


def connect_milvus(
    uri: str,
    token: str = "",
    db_name: str = "",
    server_pem_path: str = "",
    server_name: str = "",
    timeout_s: float | None = None,
    client_pem_path: str = "",
    client_key_path: str = "",
    exact_rows: int = DEFAULT_EXACT_ROWS,
) -> Client:
    """Milvus Lite in process for a local path; a MilvusClient for a server URI (token auth optional).
    `exact_rows`: on Milvus Lite, a segment the filter leaves this few rows of is scored exactly.

    TLS: an https:// URI, or `server_pem_path` (the CA or certificate to trust; an https:// URI
    without it trusts the system's store); with a client certificate and key, mutual TLS, where
    pymilvus takes the trusted CA as `ca_pem_path` instead. `server_name` overrides the name the
    server's certificate is checked for.
    """
    if not uri.startswith(MILVUS_SERVER_SCHEMES):
        return EmbeddedMilvus(uri, exact_rows=exact_rows)
    kwargs: dict[str, Any] = {}
    if timeout_s is not None:
        kwargs["timeout"] = timeout_s  # how long connecting may take
    if token:
        kwargs["token"] = token
    if db_name:
        kwargs["db_name"] = db_name
    tls = _milvus_tls(server_pem_path, client_pem_path, client_key_path)
    if tls:
        # pymilvus shares one connection per address and token whatever the TLS arguments: a
        # client with its own certificates gets a connection of its own.
        kwargs.update(tls, dedicated=True)
    if server_name:
        kwargs["server_name"] = server_name
    try:
        return MilvusClient(uri=uri, **kwargs)
    except MilvusException as exc:  # the client connects as it is made
        raise Unavailable(
            f"the Milvus server at {uri} does not answer ({exc.message}); start it, or check MEMSVC_MILVUS_URI "
            "and its token and TLS settings",
            retry_after_s=1.0,
        ) from exc
