"""Milvus Lite called in process: the `MilvusClient` calls the index makes, without gRPC.

pymilvus opens a `.db` path by starting Milvus Lite's gRPC server in this very process and
talking to it over loopback: every search encodes its vector and filter into protobuf, crosses
a socket into a server thread, and decodes 50 hits back, all under the one GIL the service
needs too. Measured on a 1,000-vector partition (2 cores): 7.0 ms p50 and 7.3 ms CPU per search
that way, 4.2 ms and 4.8 ms CPU calling the engine (`milvus_lite.MilvusLite`, its public
Python API) directly, with identical hits. The engine and its files are the same either way;
only the hop is gone.

A search for ids alone (every search memsvc makes) runs on the engine's snapshot and indexes
but not through its search function, whose per-row Python cost most of the time (`_search_ids`).

`EmbeddedMilvus` accepts the subset of `MilvusClient` calls `MilvusVectorIndex` makes, with
the same arguments and result shapes, so the index code serves both a Milvus server and this.
Failures surface as `MilvusException`, as they would through pymilvus. Calls take no timeout:
there is no network to hang on, and the engine runs on the caller's thread.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import faiss
import numpy as np
import numpy.typing as npt
import pyarrow as pa
from milvus_lite import CollectionSchema, DataType, FieldSchema, MilvusLite
from milvus_lite.engine.collection import Collection
from milvus_lite.exceptions import DataDirLockedError
from milvus_lite.index.brute_force import BruteForceIndex
from milvus_lite.index.faiss_hnsw import FaissHnswIndex
from milvus_lite.search.filter import evaluate_mask
from milvus_lite.search.indexed_filter import evaluate_segment_filter
from milvus_lite.storage.memtable import MemTable
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


# Per query, the distances (the engine's 1 - cosine) and rows of a segment's nearest rows, in
# no order: the caller orders all segments' hits at once and builds only those it returns.
Nearest = tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]


def _nearest_by_cosine(
    vectors: npt.NDArray[np.float32], queries: npt.NDArray[np.float32], valid: npt.NDArray[np.bool_], limit: int
) -> list[Nearest]:
    """Per query, the `limit` valid rows nearest by cosine distance (1 - cosine, the engine's
    smaller-is-closer scale).

    What the engine's brute force returns, up to float rounding, at 40 % of its cost or less: it
    copied the valid rows and their normalised form on every search and built its result in a
    Python loop (242-392 us a segment of 155-1,000 rows, against 63-156 us here). A filter that
    leaves few rows (one session of a large partition) scores those rows alone.
    """
    rows = np.flatnonzero(valid) if valid.sum() * 2 < len(valid) else None
    if rows is not None:
        vectors = vectors[rows]
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))
    query_norms = np.linalg.norm(queries, axis=1, keepdims=True)
    cosines = (queries / np.where(query_norms == 0, 1.0, query_norms)) @ vectors.T / np.where(norms == 0, 1.0, norms)
    distances = np.maximum(1.0 - cosines, 0.0)
    if rows is None:
        distances[:, ~valid] = np.inf
    k = min(limit, int(valid.sum()))
    out: list[Nearest] = []
    for row_distances in distances:
        nearest = np.argpartition(row_distances, k - 1)[:k] if k < len(row_distances) else np.arange(k)
        found = nearest if rows is None else rows[nearest]
        out.append((row_distances[nearest].astype(np.float64), found.astype(np.int64)))
    return out


# A segment with a graph index (HNSW) and at most this many rows the filter keeps is scored
# exactly, the graph left aside: a user's newest memories sit in small segments (compaction
# merges them into large ones later), and a narrow filter (one session) leaves few rows, where a
# graph walk that must skip most nodes loses recall. Exact scoring costs about 0.3 us a row.
DEFAULT_EXACT_ROWS = 5_000
# HNSW's search breadth when the search names none (it returns at most this many rows).
_DEFAULT_EF = 64
# Pairs of sealed segments whose superseded rows an EmbeddedMilvus keeps (a few per partition).
_STALE_PAIRS_KEPT = 4_096
# Filter masks of sealed segments an EmbeddedMilvus keeps, a bit a row (12.5 KB for 100,000 rows).
_FILTER_MASKS_KEPT = 1_024
# A sealed segment's filter mask, by its file, its row count and the filter: its packed bits. The
# row count guards against a file rewritten under the same name without some rows (a purge).
FilterMasks = dict[tuple[str, int, str], npt.NDArray[np.uint8]]


def _nearest_in_graph(
    index: FaissHnswIndex, queries: npt.NDArray[np.float32], valid: npt.NDArray[np.bool_], limit: int, ef: int
) -> list[Nearest]:
    """`FaissHnswIndex.search` of a COSINE graph, the rows kept given to faiss as a bitmap: the
    engine hands it a hash set of every kept row (IDSelectorBatch), built on every search, 1.6 of
    a search's 5.6 ms on a 74,000-row segment. Distances on the engine's scale (1 - cosine)."""
    norms = np.linalg.norm(queries, axis=1, keepdims=True)
    unit = np.ascontiguousarray(queries / np.where(norms == 0, 1.0, norms), dtype=np.float32)
    bits = np.packbits(valid, bitorder="little")
    selector = None if valid.all() else faiss.IDSelectorBitmap(len(valid), faiss.swig_ptr(bits))
    search = faiss.SearchParametersHNSW(sel=selector, efSearch=ef)  # type: ignore[attr-defined]  # SWIG, unstubbed
    similarities, rows = index._index.search(unit, limit, params=search)
    return [
        _found(np.maximum(1.0 - sims.astype(np.float64), 0.0), ids)
        for sims, ids in zip(similarities, rows, strict=True)
    ]


def _found(distances: npt.NDArray[Any], rows: npt.NDArray[Any]) -> Nearest:
    """An index's answer for one query without its padding (row -1 where it found fewer)."""
    kept = rows >= 0
    return distances[kept].astype(np.float64), rows[kept].astype(np.int64)


def _best(found: list[tuple[Nearest, int]], limit: int) -> list[tuple[float, int, int]]:
    """The `limit` nearest of every segment's hits (each with its source) as (distance, source,
    row), ties broken as the engine breaks them: by source, then row."""
    if not found:
        return []
    distances = np.concatenate([hits[0] for hits, _ in found])
    sources = np.concatenate([np.full(len(hits[1]), source, dtype=np.int64) for hits, source in found])
    rows = np.concatenate([hits[1] for hits, _ in found])
    order = np.lexsort((rows, sources, distances))[:limit]
    return [(float(distances[i]), int(sources[i]), int(rows[i])) for i in order]


def _sealed_matches(
    segment: Any, compiled: Any, plan: Any, expression: str, kept: FilterMasks | None
) -> npt.NDArray[np.bool_]:
    """Which rows of a sealed segment the filter keeps. A sealed segment never changes, so its
    mask is evaluated once per filter and kept: evaluated on every search, the usual status
    filter took a quarter of a search (1.1 of 4.2 ms over the seven segments of a 13,000-row
    partition)."""
    rows = int(segment.num_rows)
    key = (segment.file_path, rows, expression)
    known = kept.get(key) if kept is not None else None
    if known is not None:
        return np.unpackbits(known, count=rows).astype(bool)
    matches = np.asarray(evaluate_segment_filter(segment, compiled, plan), dtype=bool)
    if kept is not None and len(matches) == rows:
        if len(kept) >= _FILTER_MASKS_KEPT:
            kept.clear()
        kept[key] = np.packbits(matches)
    return matches


def _memtable_snapshot(
    memtable: MemTable, field: str, partitions: list[str] | None, include_table: bool
) -> tuple[list[Any], npt.NDArray[Any], npt.NDArray[np.float32], pa.Table | None] | None:
    """`MemTable.to_search_snapshot` (version 3.2) of a dense float field: the latest rows' ids,
    seqs, vectors and, with `include_table`, their columns for a filter; the same rows in the
    same order. None for a vector column it does not read (the engine's own search answers).

    The engine reads each row's partition and vector as Python objects, one Arrow scalar at a
    time: 3.4 ms for a memtable of 320 rows under write load, on every search. This reads each
    batch's partitions once and its vectors as one array.
    """
    with memtable._lock:
        batches = tuple(memtable._insert_batches)
        entries = list(memtable._pk_index.items())
    columns = [batch.column(field) for batch in batches]
    if any(
        not pa.types.is_fixed_size_list(column.type) or not pa.types.is_float32(column.type.value_type)
        for column in columns
    ):
        return None
    wanted = set(partitions) if partitions is not None else None
    partition_of = [batch.column("_partition").to_pylist() for batch in batches] if wanted is not None else []
    pks: list[Any] = []
    seqs: list[int] = []
    refs: list[tuple[int, int]] = []
    for pk, (batch_index, row, seq) in entries:
        if wanted is not None and partition_of[batch_index][row] not in wanted:
            continue
        pks.append(pk)
        seqs.append(seq)
        refs.append((batch_index, row))
    matrices: dict[int, npt.NDArray[np.float32]] = {}
    for batch_index in {b for b, _ in refs}:
        column = columns[batch_index]
        width = column.type.list_size
        flat = column.values.to_numpy(zero_copy_only=False)[
            column.offset * width : (column.offset + len(column)) * width
        ]
        matrix = np.array(flat, dtype=np.float32).reshape(len(column), width)
        if column.null_count:
            matrix[column.is_null().to_numpy(zero_copy_only=False)] = 0.0  # as the engine does
        matrices[batch_index] = matrix
    vectors = np.stack([matrices[b][r] for b, r in refs]) if refs else np.zeros((0, 0), dtype=np.float32)
    table: pa.Table | None = None
    if include_table:
        if not refs:
            table = memtable._data_schema.empty_table()
        else:
            offsets = list(itertools.accumulate((b.num_rows for b in batches), initial=0))
            indices = pa.array([offsets[b] + r for b, r in refs], type=pa.int64())
            table = pa.Table.from_batches(batches).take(indices)
            if "_partition" in table.column_names:
                table = table.drop(["_partition"])
    return pks, np.asarray(seqs, dtype=np.uint64), vectors, table


def _stale_rows(
    rows_a: dict[Any, int], rows_b: dict[Any, int], seqs_a: npt.NDArray[Any], seqs_b: npt.NDArray[Any]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The rows of source a, and of source b, that the other holds a later version of."""
    older_a: list[int] = []
    older_b: list[int] = []
    for pk in rows_a.keys() & rows_b.keys():
        row_a, row_b = rows_a[pk], rows_b[pk]
        if seqs_a[row_a] < seqs_b[row_b]:
            older_a.append(row_a)
        elif seqs_b[row_b] < seqs_a[row_a]:
            older_b.append(row_b)
    return np.asarray(older_a, dtype=np.int64), np.asarray(older_b, dtype=np.int64)


def _search_ids(
    collection: Collection,
    vectors: Sequence[Sequence[float]],
    limit: int,
    expression: str,
    partitions: list[str] | None,
    params: dict[str, Any] | None,
    exact_rows: int = DEFAULT_EXACT_ROWS,
    stale_pairs: dict[tuple[str, str], tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] | None = None,
    filter_masks: FilterMasks | None = None,
) -> list[list[dict[str, Any]]] | None:
    """`Collection.search` of a dense COSINE field for ids and distances only, or None where the
    engine's own search must answer (a source holding an id twice, a vector column not of float32).

    The engine's search (version 3.2) costs memsvc most of its time in Python, per row of the
    partition and per hit: it walks every row twice to find each id's latest version and its
    tombstones, and builds the whole row of every hit (the vector included) whatever
    `output_fields` asks for. On a 1,000-memory partition that was 4 of its 5.5 ms; on 10,000,
    20 ms. This takes the same snapshot and filter masks, finds the rows that are not the latest
    version of their id, or are deleted, by intersecting the sources' id sets (each a dict the
    engine keeps) instead of walking every row, and ranks a FLAT segment's rows itself
    (`_nearest_by_cosine`). A segment with a graph index (HNSW) is searched through it when the
    filter keeps more than `exact_rows` of its rows (breadth: `params`' "ef", at least `limit`),
    exactly otherwise; any other kind of index is searched as the engine would. `stale_pairs`
    keeps, across searches, which rows of two sealed segments the other supersedes, and
    `filter_masks` which rows of a sealed segment a filter keeps.
    tests/integration/test_embedded_milvus.py and test_vector_graph_index.py check it.
    """
    collection._require_loaded()
    field = collection._resolve_anns_field(None)
    metric = collection.resolve_search_metric(field, "COSINE")
    compiled = collection._compile_filter(expression) if expression else None
    plan = collection._indexed_filter_plan(compiled)
    segments, tombstones = collection._read_snapshot()
    memtable = collection._memtable
    wanted = set(partitions) if partitions else None
    sealed = [s for s in segments if s.num_rows > 0 and (wanted is None or s.partition in wanted)]
    snapshot = _memtable_snapshot(memtable, field, partitions, include_table=compiled is not None)
    if snapshot is None:
        return None
    mt_pks, mt_seqs, mt_vectors, mt_table = snapshot
    rows_of: list[dict[Any, int]] = [s.pk_to_row for s in sealed] + [{pk: i for i, pk in enumerate(mt_pks)}]
    seqs: list[npt.NDArray[Any]] = [s.seqs for s in sealed] + [mt_seqs]
    pks: list[Sequence[Any]] = [s.pks for s in sealed] + [mt_pks]
    if any(len(rows) != len(ids) for rows, ids in zip(rows_of, pks, strict=True)):
        return None
    valid = [np.ones(len(ids), dtype=bool) for ids in pks]
    # A row counts only as its id's latest version (upserts leave older ones in other sources).
    # Two sealed segments never change: which of their rows the other supersedes is kept.
    for a, b in itertools.combinations(range(len(pks)), 2):
        sealed_pair = b < len(sealed) and stale_pairs is not None
        key = (sealed[a].file_path, sealed[b].file_path) if sealed_pair else ("", "")
        stale = stale_pairs.get(key) if stale_pairs is not None and sealed_pair else None
        if stale is None:
            stale = _stale_rows(rows_of[a], rows_of[b], seqs[a], seqs[b])
            if stale_pairs is not None and sealed_pair:
                if len(stale_pairs) >= _STALE_PAIRS_KEPT:
                    stale_pairs.clear()
                stale_pairs[key] = stale
        valid[a][stale[0]] = False
        valid[b][stale[1]] = False
    # ... and only if no delete came after it: flushed tombstones, then the memtable's own.
    deleted = tombstones._map
    pending = {pk: entry[0] for pk, entry in memtable.delete_index_snapshot().items()}
    for source, rows in enumerate(rows_of):
        for deletes in (deleted, pending):
            for pk in deletes.keys() & rows.keys():
                if deletes[pk] > seqs[source][rows[pk]]:
                    valid[source][rows[pk]] = False
    queries = np.asarray(vectors, dtype=np.float32)
    graph_params = {**(params or {}), "ef": max(int((params or {}).get("ef", _DEFAULT_EF)), limit)}
    found: list[list[tuple[Nearest, int]]] = [[] for _ in range(len(queries))]
    for source, mask in enumerate(valid):
        if source < len(sealed):
            segment = sealed[source]
            source_vectors, present = segment.vector_data(field)
            matches = (
                _sealed_matches(segment, compiled, plan, expression, filter_masks) if compiled is not None else None
            )
            index = segment.indexes.get(field)
        else:
            source_vectors, present, index = mt_vectors, None, None
            matches = evaluate_mask(compiled, mt_table) if compiled is not None and len(mt_pks) else None
        for extra in (present, matches):
            if extra is not None:
                mask &= extra.astype(bool)
        if not mask.any():
            continue
        exact = index is None or (isinstance(index, BruteForceIndex) and index.metric == metric)
        if isinstance(index, FaissHnswIndex) and index.metric == metric:
            exact = int(mask.sum()) <= exact_rows
        if exact:
            for q, nearest in enumerate(_nearest_by_cosine(source_vectors, queries, mask, limit)):
                found[q].append((nearest, source))
            continue
        if isinstance(index, FaissHnswIndex):
            for q, nearest in enumerate(_nearest_in_graph(index, queries, mask, limit, int(graph_params["ef"]))):
                found[q].append((nearest, source))
            continue
        local_ids, distances = index.search(
            queries,
            limit,
            valid_mask=None if mask.all() else mask,
            params=params,
        )
        for q, (ids, dists) in enumerate(zip(local_ids, distances, strict=True)):
            found[q].append((_found(np.asarray(dists), np.asarray(ids)), source))
    # Ties fall as the engine breaks them: by source, then row. COSINE is reported as similarity.
    return [
        [{"id": pks[source][row], "distance": 1.0 - distance} for distance, source, row in _best(hits, limit)]
        for hits in found
    ]


def _create_indexes(collection: Collection, index_params: IndexParams | None) -> None:
    for index in index_params or ():
        configs = dict(index.get_index_configs())
        metric = configs.pop("metric_type", None)
        collection.create_index(
            index.field_name, {"index_type": index.index_type, "metric_type": metric, "params": configs}
        )


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

    def __init__(self, data_dir: str, exact_rows: int = DEFAULT_EXACT_ROWS) -> None:
        """`exact_rows`: see DEFAULT_EXACT_ROWS."""
        self._path = os.path.abspath(data_dir)
        self._exact_rows = exact_rows
        # Superseded rows between two sealed segments, by their files (see _search_ids).
        self._stale_pairs: dict[tuple[str, str], tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}
        # Which rows of a sealed segment a filter keeps (see _search_ids).
        self._filter_masks: FilterMasks = {}
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
            _create_indexes(collection, index_params)
            collection.load()

        self._run(create)

    def drop_collection(self, collection_name: str, **_: Any) -> None:
        """Closes the collection and deletes its files."""
        self._run(lambda db: db.drop_collection(collection_name))

    def load_collection(self, collection_name: str, **_: Any) -> None:
        self._on_collection(collection_name, lambda c: c.load())

    def release_collection(self, collection_name: str, **_: Any) -> None:
        self._on_collection(collection_name, lambda c: c.release())

    def describe_index(self, collection_name: str, index_name: str, **_: Any) -> dict[str, Any]:
        """The index on field `index_name` (Milvus Lite names an index by its field): its type,
        metric and build parameters, flat as MilvusClient returns them; {} without one."""

        def describe(c: Collection) -> dict[str, Any]:
            info = c.get_index_info(index_name) if c.has_index(index_name) else None
            if not info:
                return {}
            return {
                **dict(info.get("build_params") or {}),
                "field_name": index_name,
                "index_type": info.get("index_type"),
                "metric_type": info.get("metric_type"),
            }

        return self._on_collection(collection_name, describe)

    def drop_index(self, collection_name: str, index_name: str, **_: Any) -> None:
        self._on_collection(collection_name, lambda c: c.drop_index(index_name))

    def create_index(self, collection_name: str, index_params: IndexParams, **_: Any) -> None:
        """Records the index; a loaded collection builds it for every segment there and then."""

        self._on_collection(collection_name, lambda c: _create_indexes(c, index_params))

    def has_partition(self, collection_name: str, partition_name: str, **_: Any) -> bool:
        return self._on_collection(collection_name, lambda c: bool(c.has_partition(partition_name)))

    def create_partition(self, collection_name: str, partition_name: str, **_: Any) -> None:
        self._on_collection(collection_name, lambda c: c.create_partition(partition_name))

    def drop_partition(self, collection_name: str, partition_name: str, **_: Any) -> None:
        self._on_collection(collection_name, lambda c: c.drop_partition(partition_name))

    def wait_for_maintenance(self, collection_name: str) -> None:
        """Return once the engine's background work on the collection is done: merging sealed
        segments and building their graphs (a benchmark measures the steady state after it)."""
        self._on_collection(collection_name, lambda c: c._wait_for_bg())

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
                found = _search_ids(
                    c,
                    data,
                    limit,
                    filter,
                    partition_names,
                    params.get("params"),
                    self._exact_rows,
                    self._stale_pairs,
                    self._filter_masks,
                )
                if found is not None:
                    return found
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
