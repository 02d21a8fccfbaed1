"""Typed errors of the memsvc client: one class per gRPC status, with the google.rpc details decoded."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar

import grpc
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

__all__ = [
    "AbortedError",
    "AlreadyExistsError",
    "CancelledError",
    "DataLossError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "FieldViolation",
    "InternalError",
    "InvalidArgumentError",
    "MemsvcError",
    "NotFoundError",
    "OutOfRangeError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "UnknownError",
    "error_from_rpc",
]


@dataclass(frozen=True)
class FieldViolation:
    """One invalid field of a request (google.rpc.BadRequest.FieldViolation)."""

    # Path to the field in the request message, for example `memories[0].content`.
    field: str
    description: str
    # A machine-readable reason; empty when the server gave none.
    reason: str = ""


class MemsvcError(Exception):
    """A failed call: the gRPC status code and message, and the google.rpc details the server sent.

    Each subclass declares its status code; catch the subclass (``NotFoundError``) or this base.
    Errors raised before the server answered (no connection, deadline) carry a code but no details.
    """

    code: ClassVar[grpc.StatusCode] = grpc.StatusCode.UNKNOWN

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        domain: str | None = None,
        metadata: Mapping[str, str] | None = None,
        field_violations: tuple[FieldViolation, ...] = (),
        retry_delay: timedelta | None = None,
        request_id: str | None = None,
        status: status_pb2.Status | None = None,
    ) -> None:
        # The reason adds nothing when it only repeats the code (the server's generic INVALID_ARGUMENT).
        why = f" ({reason})" if reason and reason != self.code.name else ""
        super().__init__(f"{self.code.name}{why}: {message}")
        # The server's status message, without the code in front.
        self.message = message
        # ErrorInfo.reason in UPPER_SNAKE_CASE, domain and metadata; None/empty without an ErrorInfo.
        self.reason = reason
        self.domain = domain
        self.metadata: Mapping[str, str] = dict(metadata or {})
        # The invalid fields of the request, from BadRequest; empty when there are none.
        self.field_violations = field_violations
        # How long the server asks to wait before retrying (RetryInfo), when it said.
        self.retry_delay = retry_delay
        # The server's id of the request (RequestInfo), when it sent one.
        self.request_id = request_id
        # The decoded google.rpc.Status, for details this class does not surface.
        self.status = status

    def violation(self, field: str) -> FieldViolation | None:
        """The violation of one field path, if the server reported one."""
        return next((v for v in self.field_violations if v.field == field), None)


class CancelledError(MemsvcError):
    code = grpc.StatusCode.CANCELLED


class UnknownError(MemsvcError):
    code = grpc.StatusCode.UNKNOWN


class InvalidArgumentError(MemsvcError):
    """The request is invalid; ``field_violations`` names each bad field."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceededError(MemsvcError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFoundError(MemsvcError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExistsError(MemsvcError):
    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDeniedError(MemsvcError):
    """The API key may not do this (decided before existence, so it never leaks across tenants)."""

    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhaustedError(MemsvcError):
    """A quota or rate limit was hit; ``retry_delay`` says when to come back, if the server said."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPreconditionError(MemsvcError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class AbortedError(MemsvcError):
    code = grpc.StatusCode.ABORTED


class OutOfRangeError(MemsvcError):
    code = grpc.StatusCode.OUT_OF_RANGE


class UnimplementedError(MemsvcError):
    code = grpc.StatusCode.UNIMPLEMENTED


class InternalError(MemsvcError):
    code = grpc.StatusCode.INTERNAL


class UnavailableError(MemsvcError):
    """The service cannot answer now; safe to retry idempotent calls after ``retry_delay``."""

    code = grpc.StatusCode.UNAVAILABLE


class DataLossError(MemsvcError):
    code = grpc.StatusCode.DATA_LOSS


class UnauthenticatedError(MemsvcError):
    """The API key is missing, unknown, revoked or expired."""

    code = grpc.StatusCode.UNAUTHENTICATED


_BY_CODE: dict[grpc.StatusCode, type[MemsvcError]] = {
    cls.code: cls
    for cls in (
        CancelledError,
        UnknownError,
        InvalidArgumentError,
        DeadlineExceededError,
        NotFoundError,
        AlreadyExistsError,
        PermissionDeniedError,
        ResourceExhaustedError,
        FailedPreconditionError,
        AbortedError,
        OutOfRangeError,
        UnimplementedError,
        InternalError,
        UnavailableError,
        DataLossError,
        UnauthenticatedError,
    )
}


def _rich_status(error: Any) -> status_pb2.Status | None:
    """The google.rpc.Status of the grpc-status-details-bin trailer, or None when there is none."""
    try:
        status: status_pb2.Status | None = rpc_status.from_call(error)
    except (ValueError, AttributeError, TypeError):
        # A trailer whose code disagrees with the call's, or an error that is not a call.
        return None
    return status


def error_from_rpc(error: grpc.RpcError) -> MemsvcError:
    """Turn what a sync or asyncio gRPC call raised into the MemsvcError subclass of its status."""
    code: grpc.StatusCode = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    message: str = (error.details() if hasattr(error, "details") else None) or str(code.name)
    status = _rich_status(error)
    reason = domain = request_id = None
    metadata: dict[str, str] = {}
    violations: list[FieldViolation] = []
    retry_delay = None
    for detail in status.details if status is not None else ():
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            reason, domain, metadata = info.reason, info.domain, dict(info.metadata)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            violations.extend(FieldViolation(v.field, v.description, v.reason) for v in bad.field_violations)
        elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            detail.Unpack(retry)
            retry_delay = retry.retry_delay.ToTimedelta()
        elif detail.Is(error_details_pb2.RequestInfo.DESCRIPTOR):
            request = error_details_pb2.RequestInfo()
            detail.Unpack(request)
            request_id = request.request_id or None
    cls = _BY_CODE.get(code, UnknownError)
    return cls(
        message,
        reason=reason,
        domain=domain,
        metadata=metadata,
        field_violations=tuple(violations),
        retry_delay=retry_delay,
        request_id=request_id,
        status=status,
    )
