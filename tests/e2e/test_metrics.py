"""The Prometheus scrape endpoint of a real server shows RPC, stage, cache and index-lag series."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from memsvc.errors import Unavailable
from memsvc.v1 import memory_pb2, query_service_pb2, write_service_pb2
from tests.conftest import RunningServer, ServerFactory

pytestmark = pytest.mark.e2e

DASHBOARD = Path(__file__).parents[2] / "deploy" / "grafana" / "memsvc-dashboard.json"
STAGES = ("scope", "embed", "recall", "hydrate", "rank", "bookkeep")


def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Samples by name: [(labels, value)]."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return samples


def value(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    return sum(v for have, v in samples.get(name, []) if all(have.get(k) == w for k, w in labels.items()))


def test_metrics_endpoint_serves_rpc_stage_cache_and_lag_series(server_factory: ServerFactory) -> None:
    s: RunningServer = server_factory(metrics_listen="127.0.0.1:0", index_lag_sample_interval_s=0.05)
    assert s.components.metrics is not None
    port = s.components.metrics.port
    assert port > 0
    s.writes.AddMemories(
        write_service_pb2.AddMemoriesRequest(
            user_id="alice",
            memories=[write_service_pb2.NewMemory(content="I prefer window seats on long flights", importance=0.9)],
        ),
        metadata=s.md,
    )
    ask = query_service_pb2.QueryRequest(
        user_id="alice", query="how do I like to fly?", filter=memory_pb2.MemoryFilter(min_importance=0.0)
    )
    s.queries.Query(ask, metadata=s.md)  # result miss, embedding miss
    s.queries.Query(ask, metadata=s.md)  # result hit
    again = query_service_pb2.QueryRequest(user_id="alice", query="how do I like to fly?", limit=3)
    s.queries.Query(again, metadata=s.md)  # result miss (another limit), embedding hit
    with pytest.raises(grpc.RpcError):
        s.queries.Query(query_service_pb2.QueryRequest(user_id="", query="x"), metadata=s.md)
    time.sleep(0.2)  # the lag sampler runs every 50 ms

    samples = scrape(port)
    rpc = "memsvc_rpc_duration_seconds_count"
    assert value(samples, rpc, rpc_method="Query", rpc_grpc_status_code="OK") == 3
    assert value(samples, rpc, rpc_method="Query", rpc_grpc_status_code="INVALID_ARGUMENT") == 1
    assert value(samples, rpc, rpc_method="AddMemories", rpc_grpc_status_code="OK") == 1
    assert value(samples, rpc, rpc_service="memsvc.v1.QueryService") == 4
    assert any(labels.get("le") == "0.01" for labels, _ in samples["memsvc_rpc_duration_seconds_bucket"])
    for stage in STAGES:
        assert value(samples, "memsvc_stage_duration_seconds_count", stage=stage) >= 1, stage
    assert value(samples, "memsvc_stage_duration_seconds_sum", stage="embed") > 0
    lookups = "memsvc_cache_lookups_total"
    assert value(samples, lookups, cache="result", result="hit") == 1
    assert value(samples, lookups, cache="result", result="miss") == 2
    assert value(samples, lookups, cache="embedding", result="hit") >= 1
    assert value(samples, lookups, cache="embedding", result="miss") >= 1
    assert "memsvc_index_lag" in samples
    assert value(samples, "memsvc_index_lag") == 0
    # Every series the Grafana dashboard reads is one the server exports.
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    referenced = {name for e in exprs for name in re.findall(r"\bmemsvc_[a-z_]+", e)}
    assert referenced
    assert referenced <= set(samples), referenced - set(samples)


def test_index_lag_counts_rows_awaiting_their_vector(
    server_factory: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    s: RunningServer = server_factory(metrics_listen="127.0.0.1:0", index_lag_sample_interval_s=0.05)
    assert s.components.metrics is not None

    async def index_down(*args: Any, **kwargs: Any) -> None:
        raise Unavailable("vector index down (injected)")

    monkeypatch.setattr(s.components.index, "upsert", index_down)
    memories = [write_service_pb2.NewMemory(content=f"note {i} about the garden") for i in range(2)]
    s.writes.AddMemories(write_service_pb2.AddMemoriesRequest(user_id="bob", memories=memories), metadata=s.md)
    deadline = time.monotonic() + 5
    while value(scrape(s.components.metrics.port), "memsvc_index_lag") != 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert value(scrape(s.components.metrics.port), "memsvc_index_lag") == 2
