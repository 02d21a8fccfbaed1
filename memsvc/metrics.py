"""Production metrics: OpenTelemetry instruments, exported on a Prometheus scrape endpoint.

RPC latencies are recorded by the interceptor every call passes through, stage latencies from
the times each query's report already keeps (one sample per stage per completed query), so no
stage carries metrics code of its own and no span has to be recorded for a metric: traces cost
only for the calls that are sampled. Caches are wrapped to count hits; index lag is sampled from
the record store in the background.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler

import numpy as np
import numpy.typing as npt
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.sdk.resources import Resource

from memsvc import __version__
from memsvc.domain.models import Namespace
from memsvc.errors import FailedPrecondition
from memsvc.pipeline.jobs.periodic import PeriodicTask
from memsvc.stores.caches.base import CachedResult, EmbeddingCache, ResultCache

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

log = logging.getLogger(__name__)

METER_NAME = "memsvc"
# Seconds; dense where the service lives (a few ms to tens of ms), sparse out to the deadline.
LATENCY_BUCKETS_S = (
    0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.0125, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075,
    0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip


class ServiceMetrics:
    """Every instrument of the service, on one meter provider built in the composition root."""

    def __init__(self, provider: MeterProvider) -> None:
        self.provider = provider
        meter = provider.get_meter(METER_NAME, __version__)
        self.rpc_duration = meter.create_histogram(
            "memsvc.rpc.duration",
            unit="s",
            description="Server-side duration of each RPC, by service, method and gRPC status code",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS_S,
        )
        self.stage_duration = meter.create_histogram(
            "memsvc.stage.duration",
            unit="s",
            description="Duration of each query pipeline stage",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS_S,
        )
        self.cache_lookups = meter.create_counter(
            "memsvc.cache.lookups",
            unit="{lookup}",
            description="Cache lookups by cache (result, embedding) and result (hit, miss)",
        )
        self._index_lag = 0
        meter.create_observable_gauge(
            "memsvc.index.lag",
            callbacks=[self._observe_index_lag],
            unit="{row}",
            description="Memory rows committed to the record store whose vector is not yet in the index",
        )

    def set_index_lag(self, rows: int) -> None:
        self._index_lag = rows

    def _observe_index_lag(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(self._index_lag)]

    def record_rpc(self, service: str, method: str, status: str, seconds: float) -> None:
        self.rpc_duration.record(
            seconds, {"rpc.service": service, "rpc.method": method, "rpc.grpc.status_code": status}
        )

    def record_stages(self, stages_ms: Mapping[str, float]) -> None:
        for stage, ms in stages_ms.items():
            self.stage_duration.record(ms / 1000, {"stage": stage})

    def cache_lookup(self, cache: str, hit: bool) -> None:
        self.cache_lookups.add(1, {"cache": cache, "result": "hit" if hit else "miss"})


class MeteredEmbeddingCache:
    """An EmbeddingCache that counts hits and misses."""

    def __init__(self, inner: EmbeddingCache, metrics: ServiceMetrics) -> None:
        self._inner = inner
        self._metrics = metrics

    async def get(self, key: str) -> npt.NDArray[np.float32] | None:
        value = await self._inner.get(key)
        self._metrics.cache_lookup("embedding", value is not None)
        return value

    async def put(self, key: str, vector: npt.NDArray[np.float32]) -> None:
        await self._inner.put(key, vector)


class MeteredResultCache:
    """A ResultCache that counts hits and misses of its lookups."""

    def __init__(self, inner: ResultCache, metrics: ServiceMetrics) -> None:
        self._inner = inner
        self._metrics = metrics

    async def lookup(self, namespace: Namespace, request_key: str) -> tuple[CachedResult | None, str]:
        result, slot = await self._inner.lookup(namespace, request_key)
        self._metrics.cache_lookup("result", result is not None)
        return result, slot

    async def store(self, slot: str, result: CachedResult) -> None:
        await self._inner.store(slot, result)

    async def invalidate(self, namespace: Namespace) -> None:
        await self._inner.invalidate(namespace)

    async def invalidate_many(self, namespaces: Sequence[Namespace]) -> None:
        await self._inner.invalidate_many(namespaces)


class _QuietHandler(WSGIRequestHandler):
    # A scraper that connects and never finishes its handshake or request gives up its thread.
    timeout = 30

    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged."""


def serve_https(host: str, port: int, registry: Any, context: ssl.SSLContext) -> WSGIServer:
    """The scrape endpoint over TLS with a context of the caller's (one that follows certificate
    rotation), in a daemon thread. Unlike prometheus_client's own TLS mode, each handshake runs in
    its request's thread, so a client that stalls in it holds up only itself, not the accept loop."""
    from wsgiref.simple_server import make_server

    from prometheus_client import make_wsgi_app
    from prometheus_client.exposition import ThreadingWSGIServer

    class MetricsHttpsServer(ThreadingWSGIServer):
        address_family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]

        def handle_error(self, request: Any, client_address: Any) -> None:
            # A refused handshake (no client certificate, plaintext, another CA) is the client's
            # problem, not a traceback on the server's stderr.
            log.debug("metrics request from %s failed", client_address, exc_info=True)

    httpd = make_server(host, port, make_wsgi_app(registry), MetricsHttpsServer, handler_class=_QuietHandler)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True, do_handshake_on_connect=False)
    threading.Thread(target=httpd.serve_forever, daemon=True, name="metrics-https").start()
    return httpd


def split_listen(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)  # noqa: S104 - the scrape endpoint binds as configured


class MetricsEndpoint:
    """The Prometheus scrape endpoint (`/metrics`) and the background sampler of index lag."""

    def __init__(
        self,
        metrics: ServiceMetrics,
        reader: MetricReader | None,
        registry: Any,
        listen: str,
        index_lag: Callable[[], Awaitable[int]],
        sample_interval_s: float,
        https: ssl.SSLContext | None = None,
    ) -> None:
        self.metrics = metrics
        self._https = https
        self._reader = reader
        self._registry = registry
        self._listen = listen
        self._index_lag = index_lag
        self._interval_s = sample_interval_s
        self._http: WSGIServer | None = None
        self._sampler = PeriodicTask("index lag sampling", self._sample, run_first=True)
        self.port = 0

    async def start(self) -> None:
        if self._registry is not None and self._listen:
            from prometheus_client import start_http_server

            host, port = split_listen(self._listen)
            try:
                if self._https is None:
                    self._http, _ = start_http_server(port, host, registry=self._registry)
                else:
                    self._http = serve_https(host, port, self._registry, self._https)
            except OSError as exc:
                raise FailedPrecondition(
                    f"cannot serve metrics on {self._listen}: {exc.strerror or exc}; choose another address with "
                    "MEMSVC_METRICS_LISTEN (empty turns the endpoint off)"
                ) from exc
            self.port = int(self._http.server_port)
            log.info("metrics on %s://%s:%d/metrics", "https" if self._https else "http", host, self.port)
        self._sampler.start(self._interval_s)

    async def _sample(self) -> None:
        self.metrics.set_index_lag(await self._index_lag())

    async def close(self) -> None:
        await self._sampler.stop()
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        self.metrics.provider.shutdown()


def build_metrics(
    service_name: str,
    listen: str,
    index_lag: Callable[[], Awaitable[int]],
    sample_interval_s: float = 5.0,
    https: ssl.SSLContext | None = None,
) -> MetricsEndpoint:
    """Instruments on a meter provider; with `listen` set, a Prometheus reader on its own registry,
    scraped over HTTPS when given a TLS context."""
    reader: MetricReader | None = None
    registry: Any = None
    if listen:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import CollectorRegistry

        # A registry per server, not the process-global one: tests run several servers at once.
        registry = CollectorRegistry(auto_describe=True)
        reader = PrometheusMetricReader(registry=registry)
    provider = MeterProvider(
        metric_readers=[reader] if reader is not None else [],
        resource=Resource.create({"service.name": service_name, "service.version": __version__}),
        shutdown_on_exit=False,
    )
    return MetricsEndpoint(ServiceMetrics(provider), reader, registry, listen, index_lag, sample_interval_s, https)
