"""The one error hierarchy of memsvc: each class declares its canonical status and reason."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import ClassVar


class ErrorCode(Enum):
    """Canonical status codes, named as in google.rpc.Code; api/ maps them to grpc."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    UNAVAILABLE = "UNAVAILABLE"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    UNIMPLEMENTED = "UNIMPLEMENTED"
    INTERNAL = "INTERNAL"


@dataclass(frozen=True)
class FieldViolation:
    """One invalid field of a request, named by its path in the request message."""

    field: str
    description: str


class MemsvcError(Exception):
    """Base of every error the service reports on purpose."""

    code: ClassVar[ErrorCode] = ErrorCode.INTERNAL
    reason: ClassVar[str] = "INTERNAL"

    def __init__(
        self,
        message: str,
        *,
        metadata: Mapping[str, str] | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.metadata = dict(metadata or {})
        self.retry_after_s = retry_after_s


class InvalidArgument(MemsvcError):
    code = ErrorCode.INVALID_ARGUMENT
    reason = "INVALID_ARGUMENT"

    def __init__(self, violations: list[FieldViolation] | FieldViolation) -> None:
        self.violations = violations if isinstance(violations, list) else [violations]
        first = self.violations[0]
        more = f" (and {len(self.violations) - 1} more)" if len(self.violations) > 1 else ""
        super().__init__(f"{first.field}: {first.description}{more}")

    @classmethod
    def field(cls, field: str, description: str) -> InvalidArgument:
        return cls(FieldViolation(field, description))


class NotFound(MemsvcError):
    code = ErrorCode.NOT_FOUND
    reason = "NOT_FOUND"


class PermissionDenied(MemsvcError):
    code = ErrorCode.PERMISSION_DENIED
    reason = "PERMISSION_DENIED"


class Unauthenticated(MemsvcError):
    code = ErrorCode.UNAUTHENTICATED
    reason = "UNAUTHENTICATED"


class ResourceExhausted(MemsvcError):
    code = ErrorCode.RESOURCE_EXHAUSTED
    reason = "RESOURCE_EXHAUSTED"


class FailedPrecondition(MemsvcError):
    code = ErrorCode.FAILED_PRECONDITION
    reason = "FAILED_PRECONDITION"


class Unavailable(MemsvcError):
    """A dependency (record store, vector index, embedder, LLM) cannot be reached now."""

    code = ErrorCode.UNAVAILABLE
    reason = "DEPENDENCY_UNAVAILABLE"


class DeadlineExceeded(MemsvcError):
    code = ErrorCode.DEADLINE_EXCEEDED
    reason = "DEADLINE_EXCEEDED"


class Unimplemented(MemsvcError):
    code = ErrorCode.UNIMPLEMENTED
    reason = "UNIMPLEMENTED"
