"""Turning domain errors into gRPC statuses with google.rpc details."""

from __future__ import annotations

import logging

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from memsvc.errors import ErrorCode, InvalidArgument, MemsvcError

log = logging.getLogger(__name__)
ERROR_DOMAIN = "memsvc.v1"

GRPC_CODES: dict[ErrorCode, grpc.StatusCode] = {
    ErrorCode.INVALID_ARGUMENT: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorCode.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    ErrorCode.ALREADY_EXISTS: grpc.StatusCode.ALREADY_EXISTS,
    ErrorCode.PERMISSION_DENIED: grpc.StatusCode.PERMISSION_DENIED,
    ErrorCode.UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
    ErrorCode.RESOURCE_EXHAUSTED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    ErrorCode.FAILED_PRECONDITION: grpc.StatusCode.FAILED_PRECONDITION,
    ErrorCode.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    ErrorCode.DEADLINE_EXCEEDED: grpc.StatusCode.DEADLINE_EXCEEDED,
    ErrorCode.UNIMPLEMENTED: grpc.StatusCode.UNIMPLEMENTED,
    ErrorCode.INTERNAL: grpc.StatusCode.INTERNAL,
}


def _pack(message: object) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)  # type: ignore[arg-type]
    return packed


def status_of(error: MemsvcError) -> grpc.Status:
    """The rich status of a domain error: ErrorInfo always, BadRequest and RetryInfo when known."""
    code = GRPC_CODES[error.code]
    details = [_pack(error_details_pb2.ErrorInfo(reason=error.reason, domain=ERROR_DOMAIN, metadata=error.metadata))]
    if isinstance(error, InvalidArgument):
        details.append(
            _pack(
                error_details_pb2.BadRequest(
                    field_violations=[
                        error_details_pb2.BadRequest.FieldViolation(field=v.field, description=v.description)
                        for v in error.violations
                    ]
                )
            )
        )
    if error.retry_after_s is not None:
        delay = duration_pb2.Duration()
        delay.FromMilliseconds(int(error.retry_after_s * 1000))
        details.append(_pack(error_details_pb2.RetryInfo(retry_delay=delay)))
    status = status_pb2.Status(code=getattr(code_pb2, code.name), message=error.message, details=details)
    return rpc_status.to_status(status)


def internal_status(trace_id: str) -> grpc.Status:
    """An unexpected failure: a generic message and the trace id to find it in the logs."""
    status = status_pb2.Status(
        code=code_pb2.INTERNAL,
        message=f"internal error; trace id {trace_id}",
        details=[_pack(error_details_pb2.ErrorInfo(reason="INTERNAL", domain=ERROR_DOMAIN))],
    )
    return rpc_status.to_status(status)
