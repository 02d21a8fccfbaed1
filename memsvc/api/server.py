"""The gRPC server: services, health, reflection and readiness; no knowledge of what backs them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from grpc import aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from opentelemetry.trace import Tracer

from memsvc.api.interceptor import ServiceInterceptor
from memsvc.api.ratelimit import RateLimiter
from memsvc.api.servicers import QueryServicer, WriteServicer
from memsvc.api.tls import server_credentials
from memsvc.config import Settings
from memsvc.errors import FailedPrecondition, MemsvcError
from memsvc.keys import ApiKeys
from memsvc.metrics import ServiceMetrics
from memsvc.tls import CertificateSource
from memsvc.v1 import (
    query_service_pb2,
    query_service_pb2_grpc,
    write_service_pb2,
    write_service_pb2_grpc,
)

log = logging.getLogger(__name__)

SERVICE_NAMES = (
    write_service_pb2.DESCRIPTOR.services_by_name["WriteService"].full_name,
    query_service_pb2.DESCRIPTOR.services_by_name["QueryService"].full_name,
)
HEALTH_NAMES = ("", *SERVICE_NAMES)


class Pingable(Protocol):
    """A dependency readiness asks after: `ping` raises a MemsvcError while it cannot answer."""

    async def ping(self) -> None: ...


class MemoryServer:
    """The gRPC server with health, reflection and readiness.

    It serves what the composition root hands it; starting background jobs and closing the
    adapters belong to the root (memsvc.server.Service), which calls `start` and `stop` here.
    With a certificate source the port speaks TLS only; the optional probe port is a second
    server carrying the health service alone, in plaintext, for probes that cannot speak TLS.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        keys: ApiKeys,
        tracer: Tracer,
        metrics: ServiceMetrics,
        limiter: RateLimiter | None,
        writes: WriteServicer,
        queries: QueryServicer,
        record_store: Pingable,
        vector_index: Pingable,
        certificates: CertificateSource | None = None,
    ) -> None:
        self._settings = settings
        self._certificates = certificates
        self._record_store = record_store
        self._vector_index = vector_index
        self.health = health.aio.HealthServicer()
        options = [
            ("grpc.max_receive_message_length", settings.max_message_bytes),
            ("grpc.max_send_message_length", settings.max_message_bytes),
            ("grpc.keepalive_time_ms", int(settings.keepalive_time_s * 1000)),
            ("grpc.keepalive_timeout_ms", int(settings.keepalive_timeout_s * 1000)),
            ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
            ("grpc.keepalive_permit_without_calls", 1),
            # Worker processes share the port; a lone server must fail on a taken port instead
            # of silently sharing it with whatever holds it (gRPC's default is to share).
            ("grpc.so_reuseport", 1 if settings.workers > 1 else 0),
        ]
        self.server = aio.server(
            interceptors=[ServiceInterceptor(keys, tracer, metrics, settings.default_deadline_s, limiter)],
            options=options,
            maximum_concurrent_rpcs=settings.max_concurrent_rpcs,
        )
        write_service_pb2_grpc.add_WriteServiceServicer_to_server(writes, self.server)
        query_service_pb2_grpc.add_QueryServiceServicer_to_server(queries, self.server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        reflection.enable_server_reflection((*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), self.server)
        self.probe_server: aio.Server | None = None
        if settings.probe_listen:
            self.probe_server = aio.server(options=[("grpc.so_reuseport", 1 if settings.workers > 1 else 0)])
            health_pb2_grpc.add_HealthServicer_to_server(self.health, self.probe_server)
        self.port = 0
        self.probe_port = 0
        self._readiness: asyncio.Task[None] | None = None

    async def start(self, listen: str | None = None) -> int:
        address = listen or self._settings.listen
        if self._certificates is None:
            self.port = _bind(lambda: self.server.add_insecure_port(address), address, "MEMSVC_LISTEN")
        else:
            credentials = server_credentials(self._certificates)
            self.port = _bind(lambda: self.server.add_secure_port(address, credentials), address, "MEMSVC_LISTEN")
        if self.probe_server is not None:
            probe_server, probe = self.probe_server, self._settings.probe_listen
            self.probe_port = _bind(lambda: probe_server.add_insecure_port(probe), probe, "MEMSVC_PROBE_LISTEN")
            await probe_server.start()
        await self.server.start()
        await self._set_health(health_pb2.HealthCheckResponse.SERVING)
        self._readiness = asyncio.get_running_loop().create_task(
            self._watch_dependencies(self._settings.readiness_interval_s)
        )
        return self.port

    async def _set_health(self, status: int, names: tuple[str, ...] = HEALTH_NAMES) -> None:
        for name in names:
            await self.health.set(name, status)

    async def _watch_dependencies(self, interval_s: float = 5.0) -> None:
        """Readiness follows the record store: NOT_SERVING while the source of truth cannot answer.

        The vector index is probed too (which also drives its reconnection) but does not decide
        readiness: without it writes are still acknowledged and queries answer lexically, flagged
        degraded, so a shared Milvus outage must not take every replica out of its Service.
        """
        serving = True
        index_up = True
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self._record_store.ping()
                ok = True
            except MemsvcError:
                ok = False
            try:
                await self._vector_index.ping()
                up = True
            except MemsvcError:
                up = False
            if up != index_up:
                index_up = up
                log.warning("vector index %s", "recovered" if up else "unavailable: queries degrade to lexical")
            if ok != serving:
                serving = ok
                log.warning("dependencies %s", "recovered" if ok else "unavailable: not serving")
                # Only the per-service names follow the dependencies: the overall name ("") stays
                # SERVING while the process works, so a liveness probe on it does not restart every
                # replica during a database outage. Readiness probes name a service.
                await self._set_health(
                    health_pb2.HealthCheckResponse.SERVING if ok else health_pb2.HealthCheckResponse.NOT_SERVING,
                    SERVICE_NAMES,
                )

    async def stop(self, grace_s: float) -> None:
        """Stop taking calls and let in-flight ones finish within the grace period."""
        if self._readiness is not None:
            self._readiness.cancel()
            await asyncio.gather(self._readiness, return_exceptions=True)
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace_s)
        if self.probe_server is not None:
            await self.probe_server.stop(0)

    async def wait(self) -> None:
        await self.server.wait_for_termination()


def _bind(add_port: Callable[[], int], address: str, setting: str) -> int:
    """The port `add_port` bound; FailedPrecondition naming the setting when it could not bind."""
    try:
        port = add_port()
    except RuntimeError:  # grpcio returned 0 for an address it could not bind; it now raises
        port = 0
    if port == 0:
        raise FailedPrecondition(
            f"cannot listen on {address}: the address is in use (another `memsvc serve`?) or not on this "
            f"machine; choose another with {setting}"
        )
    return port
