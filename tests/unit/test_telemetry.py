"""Spans are recorded, or made at all, only for traces that something receives and that the sample keeps."""

from __future__ import annotations

from opentelemetry.context import Context
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

from memsvc.config import Settings
from memsvc.pipeline.context import QueryReport, stage_span
from memsvc.telemetry import build_tracer_provider, tracer_of


def test_with_nothing_to_send_spans_to_no_span_is_recorded() -> None:
    tracer = tracer_of(build_tracer_provider(Settings(trace_sample_ratio=1.0)))
    with tracer.start_as_current_span("memsvc.stage.embed") as span:
        assert not span.is_recording()
        assert span.get_span_context().is_valid  # a trace id for logs and errors all the same


def test_the_sample_ratio_decides_what_is_recorded() -> None:
    for ratio, recorded in ((0.0, False), (1.0, True)):
        exported = InMemorySpanExporter()
        provider = build_tracer_provider(Settings(trace_sample_ratio=ratio), SimpleSpanProcessor(exported))
        with tracer_of(provider).start_as_current_span("memsvc.stage.embed") as span:
            assert span.is_recording() is recorded
        assert [s.name for s in exported.get_finished_spans()] == (["memsvc.stage.embed"] if recorded else [])


def test_no_stage_span_is_made_under_a_span_that_is_not_recorded() -> None:
    exported = InMemorySpanExporter()
    tracer = tracer_of(build_tracer_provider(Settings(trace_sample_ratio=1.0), SimpleSpanProcessor(exported)))
    report = QueryReport()
    with (
        tracer.start_as_current_span("rpc", context=_unsampled_caller()) as rpc,
        stage_span(tracer, report, "embed") as stage,
    ):
        assert stage is rpc and not stage.is_recording()
    with tracer.start_as_current_span("rpc"), stage_span(tracer, report, "embed") as stage:
        assert stage.is_recording()
    assert [s.name for s in exported.get_finished_spans()] == ["memsvc.stage.embed", "rpc"]
    assert report.stages_ms["embed"] > 0  # the stage is timed either way


def _unsampled_caller() -> Context:
    parent = SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=True, trace_flags=TraceFlags(0))
    return set_span_in_context(NonRecordingSpan(parent))
