"""Searches (and seals) on a Milvus server as single gRPC calls of pymilvus's own messages.

`MilvusClient.search` checks each argument, turns every vector into a list of Python floats and
packs it back float by float, goes through its retry wrapper and builds a dict per hit. For the
service's search (one vector, 50 ids) that cost the calling thread 1.7-1.8 ms of CPU on a slow
machine, where the bare call on the same channel cost 0.6-0.8 ms and pymilvus's request builder
alone 0.1 ms (docs/performance.md, "Design decisions").

So the index builds the same `SearchRequest` here (the vectors as their float32 bytes, which is
how pymilvus packs them too), sends it on the client's own stub, whose channel carries the
authorization, TLS and database the client was opened with, and reads the ids and scores
straight from the response. Embedded Milvus Lite needs none of this: it is called in process
(`milvus_lite.py`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from pymilvus import MilvusClient
from pymilvus.client.constants import BOUNDED_TS
from pymilvus.client.utils import check_status
from pymilvus.grpc_gen import common_pb2, milvus_pb2

from memsvc.stores.vectors.base import Vector, VectorHit

# The search's parameters after its field, limit and index parameters, as pymilvus sends them.
_SEARCH_PARAMS = (
    ("round_decimal", "-1"),
    ("ignore_growing", "False"),
)


class Consistency(NamedTuple):
    """How fresh a read must be: Strong, Bounded, or Customized up to `guarantee_timestamp`."""

    level: str
    guarantee_timestamp: int = 0

    def kwargs(self) -> dict[str, Any]:
        """As MilvusClient's calls take it."""
        if self.level == "Customized":
            return {"consistency_level": self.level, "guarantee_timestamp": self.guarantee_timestamp}
        return {"consistency_level": self.level}

    def timestamp(self) -> int:
        """As the request carries it (what pymilvus sends for each level)."""
        if self.level == "Customized":
            return self.guarantee_timestamp
        # pymilvus's stand-in: the server reads it as "Bounded by its own staleness window".
        return BOUNDED_TS if self.level == "Bounded" else 0


def search_request(
    collection: str,
    vectors: Sequence[Vector],
    *,
    limit: int,
    expression: str,
    partition: str | None,
    consistency: Consistency,
    ef: int,
) -> milvus_pb2.SearchRequest:
    """The request pymilvus would send for `MilvusClient.search(collection, vectors, limit,
    filter=expression, output_fields=["id"], partition_names=[partition], ...)`, cosine, with the
    HNSW search breadth `ef` (at least `limit`: the server refuses a smaller one)."""
    placeholders = common_pb2.PlaceholderGroup(
        placeholders=[
            common_pb2.PlaceholderValue(
                tag="$0",
                type=common_pb2.PlaceholderType.FloatVector,
                values=[v.astype("<f4", copy=False).tobytes() for v in vectors],
            )
        ]
    )
    return milvus_pb2.SearchRequest(
        collection_name=collection,
        partition_names=[partition] if partition else [],
        dsl=expression,
        dsl_type=common_pb2.BoolExprV1,
        placeholder_group=placeholders.SerializeToString(),
        output_fields=["id"],
        search_params=[
            common_pb2.KeyValuePair(key=k, value=v)
            for k, v in (
                ("anns_field", "vector"),
                ("topk", str(limit)),
                ("metric_type", "COSINE"),
                ("params", json.dumps({"metric_type": "COSINE", "ef": max(ef, limit)})),
                *_SEARCH_PARAMS,
            )
        ],
        nq=len(vectors),
        consistency_level=common_pb2.ConsistencyLevel.Value(consistency.level),
        guarantee_timestamp=consistency.timestamp(),
        use_default_consistency=False,
    )


def _call(client: MilvusClient, method: str, request: Any, timeout_s: float | None) -> Any:
    """`request` on `client`'s channel and database. A refused request raises MilvusException
    (as pymilvus does), a transport failure the raw `grpc.RpcError`; both are what the index
    already treats as the server not answering."""
    connection = client._get_connection()
    context = client._generate_call_context()
    response = getattr(connection._stub, method)(request, timeout=timeout_s, metadata=context.to_grpc_metadata())
    check_status(response.status)
    return response


def search(client: MilvusClient, request: milvus_pb2.SearchRequest, timeout_s: float | None) -> list[list[VectorHit]]:
    """Per query vector of `request`, its hits best first."""
    results = _call(client, "Search", request, timeout_s).results
    ids: Sequence[Any] = results.ids.str_id.data or results.ids.int_id.data
    scores = results.scores
    hits: list[list[VectorHit]] = []
    start = 0
    # `topks`: how many hits each query vector got, in order (fewer than the limit when the
    # filter leaves fewer rows); none at all when nothing matched.
    for count in results.topks:
        hits.append([VectorHit(str(ids[i]), float(scores[i])) for i in range(start, start + count)])
        start += count
    return hits + [[] for _ in range(request.nq - len(hits))]


def seal(client: MilvusClient, collection: str, timeout_s: float | None) -> None:
    """Seal the collection's growing segments. Unlike `MilvusClient.flush`, this does not wait
    for the server to persist them: on a collection of a thousand fresh partitions that wait
    took 141 s, a pool thread held all along."""
    _call(client, "Flush", milvus_pb2.FlushRequest(collection_names=[collection]), timeout_s)
