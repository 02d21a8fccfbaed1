"""OpenTelemetry set-up: one tracer provider built in the composition root and injected."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, Sampler, SamplingResult, TraceIdRatioBased
from opentelemetry.trace import Link, SpanKind, Tracer
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

from memsvc import __version__
from memsvc.config import Settings

log = logging.getLogger(__name__)
TRACER_NAME = "memsvc"


class ExportSampler(Sampler):
    """Decides which traces are exported, never whether spans are recorded.

    The RPC and stage latency metrics are derived from every span (memsvc/metrics.py), so a span
    left out of the sample is still recorded (RECORD_ONLY); the exporter sends sampled spans
    only. A caller's decision (the sampled flag of its W3C `traceparent`) is honoured; a trace
    that starts here is sampled with probability `ratio`.
    """

    def __init__(self, ratio: float) -> None:
        self._ratio = ratio
        self._decide = ParentBased(TraceIdRatioBased(ratio))

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        result = self._decide.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)
        if result.decision is Decision.DROP:
            # A dropped result carries no attributes; the recorded span keeps the ones asked for.
            return SamplingResult(Decision.RECORD_ONLY, attributes, result.trace_state)
        return result

    def get_description(self) -> str:
        return f"ExportSampler(parent-based, {self._ratio} of new traces)"


def build_tracer_provider(settings: Settings, extra: SpanProcessor | None = None) -> TracerProvider:
    """A provider exporting over OTLP when configured; `extra` lets tests capture spans."""
    provider = TracerProvider(
        resource=Resource.create({"service.name": settings.service_name, "service.version": __version__}),
        sampler=ExportSampler(settings.trace_sample_ratio),
    )
    if settings.otlp_endpoint:
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        except ImportError:
            log.warning("MEMSVC_OTLP_ENDPOINT is set but opentelemetry-exporter-otlp is not installed")
        else:
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=settings.otlp_endpoint)))
    if extra is not None:
        provider.add_span_processor(extra)
    return provider


def tracer_of(provider: TracerProvider) -> Tracer:
    return provider.get_tracer(TRACER_NAME, __version__)
