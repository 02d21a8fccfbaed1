"""The time a call has left: every store, index, embedder and LLM call runs within it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from memsvc.errors import DeadlineExceeded

T = TypeVar("T")


@dataclass(frozen=True)
class Deadline:
    """When the caller stops waiting (monotonic seconds); None means no deadline."""

    expires_at: float | None

    @classmethod
    def after(cls, seconds: float | None) -> Deadline:
        return cls(None if seconds is None else time.monotonic() + seconds)

    def remaining(self) -> float | None:
        return None if self.expires_at is None else max(0.0, self.expires_at - time.monotonic())

    async def run(self, work: Coroutine[Any, Any, T], what: str) -> T:
        """Await `work` within the time left; a dependency never holds the caller past it, and
        work asked for once none is left never starts."""
        remaining = self.remaining()
        if remaining is None:
            return await work
        if remaining <= 0:
            work.close()
            raise DeadlineExceeded(f"the deadline passed before {what} was asked")
        try:
            # In the calling task, under a timer: `wait_for` would wrap each call in a task of
            # its own, and a query makes five of these calls.
            async with asyncio.timeout(remaining):
                return await work
        except TimeoutError as exc:
            raise DeadlineExceeded(f"the deadline passed while waiting for {what}") from exc
