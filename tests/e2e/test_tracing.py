"""Traces: a caller's W3C `traceparent` is continued and its sampling decision honoured; the
latency metrics count every call whether or not its trace is exported."""

from __future__ import annotations

import secrets

import pytest

from memsvc.v1 import memory_pb2, query_service_pb2, write_service_pb2
from tests.conftest import RunningServer, ServerFactory
from tests.e2e.test_metrics import scrape, value

pytestmark = pytest.mark.e2e

QUERY = "memsvc.v1.QueryService/Query"


def traceparent(sampled: bool) -> tuple[str, int, int]:
    trace_id, span_id = secrets.randbits(128) | 1, secrets.randbits(64) | 1
    return f"00-{trace_id:032x}-{span_id:016x}-{'01' if sampled else '00'}", trace_id, span_id


def ask(s: RunningServer, extra: tuple[tuple[str, str], ...] = ()) -> None:
    request = query_service_pb2.QueryRequest(
        user_id="tara", query="what does tara grow?", filter=memory_pb2.MemoryFilter(min_importance=0.0)
    )
    s.queries.Query(request, metadata=s.md + extra)


def queries_counted(s: RunningServer) -> float:
    assert s.components.metrics is not None
    return value(scrape(s.components.metrics.port), "memsvc_rpc_duration_seconds_count", rpc_method="Query")


@pytest.fixture
def traced(server_factory: ServerFactory) -> RunningServer:
    s = server_factory(metrics_listen="127.0.0.1:0", trace_sample_ratio=0.0)
    write = write_service_pb2.AddMemoriesRequest(
        user_id="tara", memories=[write_service_pb2.NewMemory(content="Tara grows tomatoes on her balcony")]
    )
    s.writes.AddMemories(write, metadata=s.md)
    return s


def test_a_sampled_caller_trace_is_continued_through_every_stage(traced: RunningServer) -> None:
    header, trace_id, parent_id = traceparent(sampled=True)
    traced.spans.clear()
    ask(traced, (("traceparent", header),))
    spans = traced.spans.get_finished_spans()
    rpc = [s for s in spans if s.name == QUERY]
    assert len(rpc) == 1, [s.name for s in spans]
    assert rpc[0].context.trace_id == trace_id
    assert rpc[0].parent is not None and rpc[0].parent.span_id == parent_id and rpc[0].parent.is_remote
    stages = {s.name for s in spans if s.context.trace_id == trace_id and s.name.startswith("memsvc.stage.")}
    assert stages >= {f"memsvc.stage.{n}" for n in ("scope", "embed", "recall", "hydrate", "rank", "bookkeep")}


def test_unsampled_traces_are_not_exported_but_every_call_is_measured(traced: RunningServer) -> None:
    before = queries_counted(traced)
    traced.spans.clear()
    header, _, _ = traceparent(sampled=False)
    ask(traced, (("traceparent", header),))  # the caller decided: not sampled
    ask(traced)  # a trace that starts here, at MEMSVC_TRACE_SAMPLE_RATIO=0
    assert traced.spans.get_finished_spans() == ()
    assert queries_counted(traced) == before + 2


def test_the_ratio_samples_traces_that_start_here(server_factory: ServerFactory) -> None:
    s = server_factory(trace_sample_ratio=1.0)
    s.spans.clear()
    ask(s)
    assert [span.name for span in s.spans.get_finished_spans() if span.name == QUERY] == [QUERY]
