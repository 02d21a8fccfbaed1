"""Where should lexical postings live? Record-store BM25 vs Milvus Lite sparse vectors (IP).

Both hold the same keyed term ids of one user's namespace (1,000 memories by default) and
return the same BM25 top-k; the script times the search calls only (what a query pays),
plus the dense search of the same partition for scale, and prints p50/p95 in milliseconds.

    .venv/bin/python tools/bench_lexical_postings.py [--data ../shared/data/locomo] [--memories 1000]

With --data, the memories are LoCoMo dialogue turns and the queries its questions;
otherwise synthetic memories and queries from memsvc.bench.synthetic.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def texts_and_queries(data: Path | None, memories: int, queries: int) -> tuple[list[str], list[str]]:
    if data is None:
        from memsvc.bench.synthetic import memory_texts, unique_queries

        generated = unique_queries(11)
        return memory_texts(7, memories), [next(generated) for _ in range(queries)]
    from memsvc.bench.locomo import load_conversations

    turns: list[str] = []
    asked: list[str] = []
    for conversation in load_conversations(data):
        turns.extend(t.content for t in conversation.turns)
        asked.extend(q.text for q in conversation.questions)
    return turns[:memories], asked[:queries]


def timed(samples: list[float], fn: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    out = fn()
    samples.append((time.perf_counter() - started) * 1000)
    return out


def summary(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
    return f"{name:<34} p50 {statistics.median(ordered):6.2f} ms   p95 {p95:6.2f} ms   (n={len(ordered)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, help="LoCoMo directory (default: synthetic memories)")
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--k", type=int, default=50, help="hits per search (the recall depth)")
    args = parser.parse_args()

    from pymilvus import DataType, MilvusClient

    from memsvc.config import Settings
    from memsvc.domain.models import MemoryKind, Namespace, RetentionStatus, Role, StoredMemory, Tier, new_memory_id
    from memsvc.server import build_local_embedder
    from memsvc.stores.lexical.analysis import TermHasher
    from memsvc.stores.lexical.base import Bm25, LexicalDoc
    from memsvc.stores.lexical.sqlite import SqliteLexicalIndex
    from memsvc.stores.records.sqlite import SqliteRecordStore
    from memsvc.stores.vectors.base import RecallFilter

    texts, queries = texts_and_queries(args.data, args.memories, args.queries)
    key = os.urandom(32)
    hasher = TermHasher(lambda purpose: key + purpose.encode())
    ns = Namespace("bench", "default", "development", "u1")
    bags = [hasher.bag(ns.tenant, t) for t in texts]
    qbags = [hasher.bag(ns.tenant, q).counts for q in queries]
    ids = [new_memory_id() for _ in texts]
    bm25 = Bm25()
    tmp = Path(tempfile.mkdtemp(prefix="memsvc-lexbench-"))
    print(f"{len(texts)} memories, {len(queries)} queries, top {args.k}, data in {tmp}")

    # -- record-store postings (SQLite, the embedded default) ------------------------------
    async def sqlite_run() -> list[float]:
        store = SqliteRecordStore(tmp / "memsvc.db")
        await store.migrate()
        rows = [
            StoredMemory(
                id=i, namespace=ns, ciphertext=b"x", role=Role.USER, kind=MemoryKind.FACT, tags=(), session_id="",
                importance=0.5, tier=Tier.HOT, created_at=0.0, updated_at=0.0, usage_count=0, last_accessed_at=None,
                quality=0.5, consistency=1.0, decay=1.0, retention_status=RetentionStatus.ACTIVE,
                embedding_version="v", superseded_by="", idempotency_key="", indexed=True,
            )
            for i in ids
        ]  # fmt: skip
        await store.insert_memories(rows)
        index = SqliteLexicalIndex(tmp / "memsvc.db", bm25)
        await index.index(ns, [LexicalDoc(i, b.counts, b.length) for i, b in zip(ids, bags, strict=True)])
        samples: list[float] = []
        for q in qbags[:20]:
            await index.search(ns, q, args.k, RecallFilter())  # warm-up
        for q in qbags:
            started = time.perf_counter()
            await index.search(ns, q, args.k, RecallFilter())
            samples.append((time.perf_counter() - started) * 1000)
        await index.close()
        await store.close()
        return samples

    sqlite_samples = asyncio.run(sqlite_run())

    # -- Milvus Lite sparse vectors (SPARSE_FLOAT_VECTOR, IP) --------------------------------
    # BM25 as an inner product: documents carry the saturated, length-normalised tf weight,
    # queries the IDF (from document frequencies kept beside, as the record store does).
    def dim(term: int) -> int:
        return term & 0xFFFFFFFE  # Milvus sparse indices are uint32 below 2^32 - 1

    avgdl = sum(b.length for b in bags) / len(bags)
    df: dict[int, int] = {}
    for b in bags:
        for t in b.counts:
            df[dim(t)] = df.get(dim(t), 0) + 1

    def doc_vector(counts: dict[int, int], length: int) -> dict[int, float]:
        norm = bm25.k1 * (1 - bm25.b + bm25.b * length / avgdl)
        return {dim(t): tf * (bm25.k1 + 1) / (tf + norm) for t, tf in counts.items()}

    def query_vector(counts: dict[int, int]) -> dict[int, float]:
        n = len(bags)
        out = {}
        for t, c in counts.items():
            d = df.get(dim(t), 0)
            if d:
                out[dim(t)] = c * math.log(1 + (n - d + 0.5) / (d + 0.5))
        return out

    embedder = build_local_embedder(Settings(data_dir=tmp))  # MEMSVC_EMBEDDING_RUNTIME applies
    vectors = asyncio.run(embedder.embed(texts))
    qvectors = asyncio.run(embedder.embed(queries))
    client = MilvusClient(str(tmp / "milvus.db"))
    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=embedder.dimension)
    index_params = client.prepare_index_params()
    index_params.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
    index_params.add_index(field_name="vector", index_type="FLAT", metric_type="COSINE")
    client.create_collection("lex", schema=schema, index_params=index_params)
    client.create_partition("lex", "p_u1")
    rows = [
        {"id": i, "sparse": doc_vector(b.counts, b.length) or {0: 0.0}, "vector": np.asarray(v).tolist()}
        for i, b, v in zip(ids, bags, vectors, strict=True)
    ]
    for start in range(0, len(rows), 256):
        client.upsert("lex", rows[start : start + 256], partition_name="p_u1")
    client.flush("lex")
    client.load_collection("lex")
    sparse_samples: list[float] = []
    dense_samples: list[float] = []
    for q in qbags[:20]:
        qv = query_vector(q)
        if qv:
            client.search("lex", data=[qv], anns_field="sparse", limit=args.k, partition_names=["p_u1"])
    for q, qdense in zip(qbags, qvectors, strict=True):
        qv = query_vector(q)
        if qv:
            timed(
                sparse_samples,
                lambda qv=qv: client.search(
                    "lex", data=[qv], anns_field="sparse", limit=args.k, partition_names=["p_u1"],
                    search_params={"metric_type": "IP"}, output_fields=["id"],
                ),
            )  # fmt: skip
        timed(
            dense_samples,
            lambda qd=qdense: client.search(
                "lex", data=[np.asarray(qd).tolist()], anns_field="vector", limit=args.k, partition_names=["p_u1"],
                search_params={"metric_type": "COSINE"}, output_fields=["id"],
            ),
        )  # fmt: skip
    client.close()
    asyncio.run(embedder.close())

    print(summary("record-store postings (SQLite)", sqlite_samples))
    print(summary("Milvus Lite sparse (IP)", sparse_samples))
    print(summary("Milvus Lite dense (same partition)", dense_samples))


if __name__ == "__main__":
    main()
