"""One server interceptor: RPC span, authentication, deadline and error mapping."""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from grpc import aio
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer, format_trace_id
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from memsvc.api.errors import GRPC_CODES, internal_status, status_of
from memsvc.api.ratelimit import RateLimiter
from memsvc.deadline import Deadline
from memsvc.domain.models import Principal
from memsvc.errors import InvalidArgument, MemsvcError, ResourceExhausted, Unauthenticated
from memsvc.keys import ApiKeys
from memsvc.metrics import ServiceMetrics

log = logging.getLogger(__name__)

PROTECTED_PREFIX = "/memsvc.v1."


class CallState:
    """What the interceptor established for the servicer: principal and deadline."""

    principal: contextvars.ContextVar[Principal] = contextvars.ContextVar("memsvc_principal")
    deadline: contextvars.ContextVar[Deadline] = contextvars.ContextVar("memsvc_deadline")


def current_principal() -> Principal:
    return CallState.principal.get()


def current_deadline() -> Deadline:
    return CallState.deadline.get()


_TRACE_CONTEXT = TraceContextTextMapPropagator()


def caller_trace(context: Any) -> Context:
    """The caller's trace from its W3C `traceparent` metadata (an empty context without one),
    so memsvc's spans join the caller's trace and honour its sampling decision."""
    carrier = {key: value for key, value in context.invocation_metadata() or () if isinstance(value, str)}
    return _TRACE_CONTEXT.extract(carrier)


def bearer_token(context: Any) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization":
            text = value.decode() if isinstance(value, bytes) else value
            scheme, _, token = text.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            raise Unauthenticated("authorization metadata must be `Bearer <api key>`")
    raise Unauthenticated("missing `authorization: Bearer <api key>` metadata")


# grpc answers UNKNOWN (with the parser's exception text) to a body that does not parse; the
# handlers get this marker instead and answer INVALID_ARGUMENT after authentication.
UNDECODABLE = object()


def tolerant(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserializer is None:
        return None

    def parse(data: bytes) -> Any:
        try:
            return deserializer(data)
        except DecodeError:
            return UNDECODABLE

    return parse


def check_decoded(request: Any) -> None:
    if request is UNDECODABLE:
        raise InvalidArgument.field("request", "is not a valid protobuf encoding of this method's request message")


class ServiceInterceptor(aio.ServerInterceptor):  # type: ignore[misc]  # grpc ships no type hints
    def __init__(
        self,
        keys: ApiKeys,
        tracer: Tracer,
        metrics: ServiceMetrics,
        default_deadline_s: float,
        limiter: RateLimiter | None = None,
    ) -> None:
        self._keys = keys
        self._tracer = tracer
        self._metrics = metrics
        self._default_deadline_s = default_deadline_s
        self._limiter = limiter
        self._wrapped: dict[str, grpc.RpcMethodHandler] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        method: str = handler_call_details.method
        wrapped = self._wrapped.get(method)
        if wrapped is not None:
            return wrapped
        handler = await continuation(handler_call_details)
        if handler is None or not method.startswith(PROTECTED_PREFIX):
            return handler
        if handler.unary_unary is not None:
            wrapped = grpc.unary_unary_rpc_method_handler(
                self._wrap_unary(method, handler.unary_unary),
                request_deserializer=tolerant(handler.request_deserializer),
                response_serializer=handler.response_serializer,
            )
        elif handler.unary_stream is not None:
            wrapped = grpc.unary_stream_rpc_method_handler(
                self._wrap_stream(method, handler.unary_stream),
                request_deserializer=tolerant(handler.request_deserializer),
                response_serializer=handler.response_serializer,
            )
        else:
            return handler
        # A method's handler never changes once the server runs: wrap it once, not per call.
        self._wrapped[method] = wrapped
        return wrapped

    async def _enter(self, context: Any) -> None:
        principal = await self._keys.authenticate(bearer_token(context))
        if self._limiter is not None:
            wait_s = await self._limiter.acquire(principal.tenant)
            if wait_s > 0:
                raise ResourceExhausted(
                    "this tenant is over its request rate; retry after the delay in RetryInfo",
                    metadata={"limit": "requests_per_tenant_per_second"},
                    retry_after_s=max(wait_s, 0.001),
                )
        remaining = context.time_remaining()
        budget = self._default_deadline_s if remaining is None else min(remaining, self._default_deadline_s)
        CallState.principal.set(principal)
        CallState.deadline.set(Deadline.after(budget))

    @asynccontextmanager
    async def _call(self, method: str, request: Any, context: Any) -> AsyncIterator[None]:
        """What every protected call, unary or streaming, runs inside: its server span and
        latency metric, authentication and deadline, and its error mapped to a google.rpc.Status."""
        service, _, name = method.lstrip("/").partition("/")
        with self._tracer.start_as_current_span(
            f"{service}/{name}",
            context=caller_trace(context),
            kind=SpanKind.SERVER,
            attributes={"rpc.system": "grpc", "rpc.service": service, "rpc.method": name},
        ) as span:
            started = time.perf_counter()
            code = grpc.StatusCode.OK
            try:
                await self._enter(context)
                check_decoded(request)
                yield
            except MemsvcError as error:
                code = GRPC_CODES[error.code]
                span.set_attribute("memsvc.error.reason", error.reason)
                if code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNAVAILABLE):
                    span.set_status(Status(StatusCode.ERROR, error.reason))
                await context.abort_with_status(status_of(error))
            except aio.AbortError:
                code = grpc.StatusCode.UNKNOWN  # the behaviour aborted the call itself
                raise
            except Exception:
                code = grpc.StatusCode.INTERNAL
                trace_id = format_trace_id(span.get_span_context().trace_id)
                log.exception("unexpected failure in %s (trace id %s)", method, trace_id)
                span.set_status(Status(StatusCode.ERROR, "internal"))
                await context.abort_with_status(internal_status(trace_id))
            finally:
                seconds = time.perf_counter() - started
                self._metrics.record_rpc(service, name, code.name, seconds)
                if span.is_recording():
                    span.set_attribute("rpc.grpc.status_code", code.value[0])
                    span.set_attribute("memsvc.duration_ms", seconds * 1000)

    def _wrap_unary(self, method: str, behavior: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def wrapped(request: Any, context: Any) -> Any:
            async with self._call(method, request, context):
                return await behavior(request, context)

        return wrapped

    def _wrap_stream(self, method: str, behavior: Callable[..., AsyncIterator[Any]]) -> Callable[..., Any]:
        async def wrapped(request: Any, context: Any) -> AsyncIterator[Any]:
            async with self._call(method, request, context):
                async for item in behavior(request, context):
                    yield item

        return wrapped
