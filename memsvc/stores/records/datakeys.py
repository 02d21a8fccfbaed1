"""Data-key rows as master-key rotation sees them: the wrapped key and, when known, its namespace."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memsvc.domain.models import Namespace, WrappedDataKey


@dataclass(frozen=True)
class StaleDataKey:
    """A data key wrapped by an older master key, with its namespace when a memory still names it.

    The namespace is the wrapping's associated data. A key whose namespace holds no memory any
    more protects no content and cannot be re-wrapped: its namespace is known only by digest.
    """

    key: WrappedDataKey
    namespace: Namespace | None


def stale_data_key(row: Sequence[Any]) -> StaleDataKey:
    """(digest, version, master_version, wrapped, namespace key or NULL) -> StaleDataKey."""
    digest, version, master_version, wrapped, joined = row
    namespace = None
    if joined is not None:
        parts = str(joined).split("\x1f")
        candidate = Namespace(*parts) if len(parts) == 4 else None
        namespace = candidate if candidate is not None and candidate.digest == digest else None
    return StaleDataKey(WrappedDataKey(digest, int(version), int(master_version), bytes(wrapped)), namespace)
