"""OpenTelemetry set-up: one tracer provider built in the composition root and injected."""

from __future__ import annotations

import logging

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Tracer

from memsvc import __version__
from memsvc.config import Settings

log = logging.getLogger(__name__)
TRACER_NAME = "memsvc"


def build_tracer_provider(settings: Settings, extra: SpanProcessor | None = None) -> TracerProvider:
    """A provider exporting over OTLP when configured; `extra` lets tests capture spans."""
    provider = TracerProvider(
        resource=Resource.create({"service.name": settings.service_name, "service.version": __version__})
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
