"""Milvus Lite called in process: the `MilvusClient` calls the index makes, without gRPC.

pymilvus opens a `.db` path by starting Milvus Lite's gRPC server in this very process and
talking to it over loopback: every search encodes its vector and filter into protobuf, crosses
a socket into a server thread, and decodes 50 hits back, all under the one GIL the service
needs too. Measured on a 1,000-vector partition (2 cores): 7.0 ms p50 and 7.3 ms CPU per search
that way, 4.2 ms and 4.8 ms CPU calling the engine (`milvus_lite.MilvusLite`, its public
Python API) directly, with identical hits. The engine and its files are the same either way;
only the hop is gone.

`EmbeddedMilvus` accepts the subset of `MilvusClient` calls `MilvusVectorIndex` makes, with
the same arguments and result shapes, so the index code serves both a Milvus server and this.
Failures surface as `MilvusException`, as they would through pymilvus. Calls take no timeout:
there is no network to hang on, and the engine runs on the caller's thread.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from milvus_lite import CollectionSchema, DataType, FieldSchema, MilvusLite
from milvus_lite.engine.collection import Collection
from milvus_lite.exceptions import DataDirLockedError
from milvus_lite.search.executor_indexed import execute_search_with_index
from milvus_lite.storage.segment import Segment
from pymilvus import CollectionSchema as ClientSchema
from pymilvus.exceptions import MilvusException
from pymilvus.milvus_client import IndexParams

from memsvc.errors import FailedPrecondition

T = TypeVar("T")
_DEFAULT_PARTITION = "_default"
_COUNT = "count(*)"


def _lite_schema(schema: ClientSchema) -> CollectionSchema:
    """The engine's schema for a pymilvus one (types match by name)."""
    fields = []
    for spec in schema.to_dict()["fields"]:
        params = spec.get("params", {})
        element = spec.get("element_type")
        fields.append(
            FieldSchema(
                name=spec["name"],
                dtype=DataType[spec["type"].name],
                is_primary=bool(spec.get("is_primary", False)),
                auto_id=bool(spec.get("auto_id", False)),
                dim=params.get("dim"),
                max_length=params.get("max_length"),
                element_type=DataType[element.name] if element is not None else None,
                max_capacity=params.get("max_capacity"),
                is_partition_key=bool(spec.get("is_partition_key", False)),
            )
        )
    return CollectionSchema(fields=fields, enable_dynamic_field=schema.enable_dynamic_field)


def _guarded(call: Callable[[], T]) -> T:
    # The engine raises its own errors and, for malformed input, plain ones; pymilvus would have
    # turned either into a MilvusException carrying the message. So do we.
    try:
        return call()
    except MilvusException:
        raise
    except Exception as exc:
        raise MilvusException(message=f"{type(exc).__name__}: {exc}") from exc


class _IdsOnlySegment:
    """A sealed segment whose search hits are built from its primary keys alone.

    Milvus Lite 3.2 builds every field of every hit, one pyarrow call per cell (about 32 us a
    hit, 12 of them the vector), whatever `output_fields` asks for, and drops them afterwards:
    50 hits cost 2 of the 5.5 ms a search took on a 1,000-memory partition. Everything else the
    engine does with the segment (masks, tombstones, the index) goes to the segment itself.
    """

    __slots__ = ("_pk", "_segment")

    def __init__(self, segment: Segment, pk: str) -> None:
        self._segment = segment
        self._pk = pk

    def __getattr__(self, name: str) -> Any:
        return getattr(self._segment, name)

    def row_to_dict(self, row: int) -> dict[str, Any]:
        return {self._pk: self._segment.pks[row]}


def _search_ids(
    collection: Collection,
    vectors: Sequence[Sequence[float]],
    limit: int,
    expression: str,
    partitions: list[str] | None,
    params: dict[str, Any] | None,
) -> list[list[dict[str, Any]]]:
    """`Collection.search` of a dense COSINE field for ids and distances only.

    The same steps in the same order as the engine's own dense search (version 3.2), with the
    segments wrapped so that no hit is materialised; tests/integration/test_embedded_milvus.py
    checks both give the same hits.
    """
    collection._require_loaded()
    field = collection._resolve_anns_field(None)
    metric = collection.resolve_search_metric(field, "COSINE")
    compiled = collection._compile_filter(expression) if expression else None
    segments, tombstones = collection._read_snapshot()
    pk = collection.pk_field
    # The engine walks every segment of the collection on each search; a user's partition holds
    # a few of them, so the others are left out here, before any is wrapped.
    wanted = set(partitions) if partitions else None
    results = execute_search_with_index(
        query_vectors=np.asarray(vectors, dtype=np.float32),
        segments=[_IdsOnlySegment(s, pk) for s in segments if wanted is None or s.partition in wanted],
        memtable=collection._memtable,
        delta_index=tombstones,
        top_k=limit,
        metric_type=metric,
        pk_field=pk,
        vector_field=field,
        partition_names=partitions,
        compiled_filter=compiled,
        output_fields=[pk],
        indexed_filter_plan=collection._indexed_filter_plan(compiled),
        search_params=params,
    )
    # The engine's distances are smaller-is-better; Milvus reports COSINE as similarity.
    return [[{"id": hit["id"], "distance": 1.0 - hit["distance"]} for hit in hits] for hits in results]


@dataclass(frozen=True)
class _Engine:
    db: MilvusLite
    opening: threading.Lock  # two threads opening one collection would each build its memtable


class _SharedEngines:
    """One engine per data directory per process, shared by every `EmbeddedMilvus` opened on it.

    The engine holds an exclusive lock on its directory, so a second engine on the same
    directory in this process would be refused; two indexes on one file (replicas in a test,
    a benchmark beside its server) share one, as they shared pymilvus's local server.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, tuple[_Engine, int]] = {}

    def acquire(self, data_dir: str) -> _Engine:
        with self._lock:
            engine, users = self._open.get(data_dir, (None, 0))
            if engine is None or engine.db.closed:
                engine, users = _Engine(MilvusLite(data_dir), threading.Lock()), 0
            self._open[data_dir] = (engine, users + 1)
            return engine

    def release(self, data_dir: str) -> None:
        with self._lock:
            engine, users = self._open.pop(data_dir, (None, 0))
            if engine is None:
                return
            if users > 1:
                self._open[data_dir] = (engine, users - 1)
            else:
                engine.db.close()


# Per process, like the engine's directory lock it mirrors.
_ENGINES = _SharedEngines()


class EmbeddedMilvus:
    """A Milvus Lite data directory opened in this process, behind `MilvusClient`'s call shapes."""

    def __init__(self, data_dir: str) -> None:
        self._path = os.path.abspath(data_dir)
        try:
            self._engine = _guarded(lambda: _ENGINES.acquire(self._path))
        except MilvusException as exc:
            if not isinstance(exc.__cause__, DataDirLockedError):
                raise
            # The engine locks its directory for one process: most likely a running server, while
            # an admin command (`memsvc maintain`) or a second server tries to open the same data.
            raise FailedPrecondition(
                f"the embedded vector index in {self._path} is in use by another process (a running "
                "`memsvc serve` on this data directory?); Milvus Lite serves one process at a time: "
                "stop that process first, or share a Milvus server between processes (MEMSVC_MILVUS_URI)"
            ) from exc
        self._closed = False

    def _run(self, call: Callable[[MilvusLite], T]) -> T:
        def checked() -> T:
            if self._closed or self._engine.db.closed:
                raise RuntimeError("Milvus Lite is closed")
            return call(self._engine.db)

        return _guarded(checked)

    def _on_collection(self, name: str, call: Callable[[Collection], T]) -> T:
        def on_collection(db: MilvusLite) -> T:
            with self._engine.opening:
                collection = db.get_collection(name)
            return call(collection)

        return self._run(on_collection)

    # -- collections and partitions -----------------------------------------------------------

    @staticmethod
    def prepare_index_params() -> IndexParams:
        return IndexParams()

    def list_collections(self, **_: Any) -> list[str]:
        """Also the index's liveness probe: fails once this client or its engine is closed."""
        return self._run(lambda db: list(db.list_collections()))

    def has_collection(self, collection_name: str, **_: Any) -> bool:
        return self._run(lambda db: bool(db.has_collection(collection_name)))

    def create_collection(
        self,
        collection_name: str,
        *,
        schema: ClientSchema,
        index_params: IndexParams | None = None,
        properties: dict[str, Any] | None = None,
        **_: Any,
    ) -> None:
        def create(db: MilvusLite) -> None:
            collection = db.create_collection(collection_name, _lite_schema(schema), properties=properties or None)
            for index in index_params or ():
                configs = dict(index.get_index_configs())
                metric = configs.pop("metric_type", None)
                collection.create_index(
                    index.field_name, {"index_type": index.index_type, "metric_type": metric, "params": configs}
                )
            collection.load()

        self._run(create)

    def drop_collection(self, collection_name: str, **_: Any) -> None:
        """Closes the collection and deletes its files."""
        self._run(lambda db: db.drop_collection(collection_name))

    def load_collection(self, collection_name: str, **_: Any) -> None:
        self._on_collection(collection_name, lambda c: c.load())

    def has_partition(self, collection_name: str, partition_name: str, **_: Any) -> bool:
        return self._on_collection(collection_name, lambda c: bool(c.has_partition(partition_name)))

    def create_partition(self, collection_name: str, partition_name: str, **_: Any) -> None:
        self._on_collection(collection_name, lambda c: c.create_partition(partition_name))

    def drop_partition(self, collection_name: str, partition_name: str, **_: Any) -> None:
        self._on_collection(collection_name, lambda c: c.drop_partition(partition_name))

    def release_partitions(self, collection_name: str, partition_names: Sequence[str], **_: Any) -> None:
        """Milvus Lite drops a loaded partition directly; nothing to release."""

    def flush(self, collection_name: str, **_: Any) -> None:
        self._on_collection(collection_name, lambda c: c.flush())

    # -- data ---------------------------------------------------------------------------------

    def upsert(
        self, collection_name: str, data: list[dict[str, Any]], partition_name: str = "", **_: Any
    ) -> dict[str, int]:
        pks = self._on_collection(
            collection_name, lambda c: c.upsert(data, partition_name=partition_name or _DEFAULT_PARTITION)
        )
        return {"upsert_count": len(pks)}

    def delete(
        self,
        collection_name: str,
        ids: Sequence[str] | None = None,
        filter: str = "",  # MilvusClient's name
        partition_name: str = "",
        **_: Any,
    ) -> dict[str, int]:
        def delete(collection: Collection) -> int:
            pk = collection.pk_field
            pks = list(ids) if ids is not None else [row[pk] for row in collection.query(filter, [pk])]
            return int(collection.delete(pks, partition_name=partition_name or None)) if pks else 0

        return {"delete_count": self._on_collection(collection_name, delete)}

    def search(
        self,
        collection_name: str,
        data: Sequence[Sequence[float]],
        limit: int = 10,
        filter: str = "",  # MilvusClient's name
        output_fields: list[str] | None = None,
        search_params: dict[str, Any] | None = None,
        partition_names: list[str] | None = None,
        **_: Any,  # consistency_level, timeout: in process, every acknowledged write is visible
    ) -> list[list[dict[str, Any]]]:
        params = search_params or {}

        def search(c: Collection) -> list[list[dict[str, Any]]]:
            if output_fields == [c.pk_field] and params.get("metric_type") == "COSINE" and c._vector_name:
                return _search_ids(c, data, limit, filter, partition_names, params.get("params"))
            hits: list[list[dict[str, Any]]] = c.search(
                query_vectors=list(data),
                top_k=limit,
                metric_type=params.get("metric_type"),
                partition_names=partition_names,
                expr=filter or None,
                output_fields=output_fields,
                search_params=params.get("params"),
            )
            return hits

        return self._on_collection(collection_name, search)

    def get(
        self,
        collection_name: str,
        ids: Sequence[str],
        output_fields: list[str] | None = None,
        partition_names: list[str] | None = None,
        **_: Any,
    ) -> list[dict[str, Any]]:
        return self._on_collection(
            collection_name, lambda c: c.get(list(ids), partition_names=partition_names, output_fields=output_fields)
        )

    def query(
        self,
        collection_name: str,
        filter: str = "",  # MilvusClient's name
        output_fields: list[str] | None = None,
        partition_names: list[str] | None = None,
        **_: Any,
    ) -> list[dict[str, Any]]:
        if output_fields and _COUNT in output_fields:
            rows = self._on_collection(
                collection_name,
                lambda c: c.query(filter or None, output_fields=[c.pk_field], partition_names=partition_names),
            )
            return [{_COUNT: len(rows)}]
        return self._on_collection(
            collection_name,
            lambda c: list(c.query(filter or None, output_fields=output_fields, partition_names=partition_names)),
        )

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            _guarded(lambda: _ENGINES.release(self._path))
