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
# A status travels in HTTP/2 trailers, which clients cap at 8 KiB (soft) to 16 KiB (hard); a larger
# one reaches the caller as RESOURCE_EXHAUSTED instead of its real code. Messages may echo caller
# input, so every text is clipped (in UTF-8 bytes: grpc-message percent-encodes non-ASCII).
_MAX_MESSAGE_BYTES = 400
_MAX_FIELD_BYTES = 120
_MAX_DESCRIPTION_BYTES = 200
_MAX_METADATA_BYTES = 200
_MAX_VIOLATIONS = 10


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` UTF-8 bytes (on a character boundary), marked with an ellipsis."""
    raw = text.encode()
    if len(raw) <= limit:
        return text
    return raw[: limit - 3].decode(errors="ignore") + "…"


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
    metadata = {clip(k, _MAX_METADATA_BYTES): clip(v, _MAX_METADATA_BYTES) for k, v in error.metadata.items()}
    details = [_pack(error_details_pb2.ErrorInfo(reason=error.reason, domain=ERROR_DOMAIN, metadata=metadata))]
    if isinstance(error, InvalidArgument):
        details.append(
            _pack(
                error_details_pb2.BadRequest(
                    field_violations=[
                        error_details_pb2.BadRequest.FieldViolation(
                            field=clip(v.field, _MAX_FIELD_BYTES),
                            description=clip(v.description, _MAX_DESCRIPTION_BYTES),
                        )
                        for v in error.violations[:_MAX_VIOLATIONS]
                    ]
                )
            )
        )
    if error.retry_after_s is not None:
        delay = duration_pb2.Duration()
        delay.FromMilliseconds(int(error.retry_after_s * 1000))
        details.append(_pack(error_details_pb2.RetryInfo(retry_delay=delay)))
    message = clip(error.message, _MAX_MESSAGE_BYTES)
    status = status_pb2.Status(code=getattr(code_pb2, code.name), message=message, details=details)
    return rpc_status.to_status(status)


def internal_status(trace_id: str) -> grpc.Status:
    """An unexpected failure: a generic message and the trace id to find it in the logs."""
    status = status_pb2.Status(
        code=code_pb2.INTERNAL,
        message=f"internal error; trace id {trace_id}",
        details=[_pack(error_details_pb2.ErrorInfo(reason="INTERNAL", domain=ERROR_DOMAIN))],
    )
    return rpc_status.to_status(status)
