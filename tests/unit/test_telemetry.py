"""Spans are recorded only for traces that something receives and that the sample keeps."""

from __future__ import annotations

from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memsvc.config import Settings
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
