"""A background job run every interval on the event loop, with one way to start and stop it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from memsvc.errors import MemsvcError

log = logging.getLogger(__name__)


class PeriodicTask:
    """Runs `work` every `interval_s`; a failed run is logged and the next one still comes."""

    def __init__(self, name: str, work: Callable[[], Awaitable[None]], *, run_first: bool = False) -> None:
        self._name = name
        self._work = work
        self._run_first = run_first
        self._task: asyncio.Task[None] | None = None

    async def _run_once(self) -> None:
        try:
            await self._work()
        except MemsvcError as exc:
            # A dependency is down: the next run retries; nothing to alarm about yet.
            log.warning("%s postponed: %s", self._name, exc.message)
        except Exception:
            log.exception("%s failed", self._name)

    def start(self, interval_s: float) -> None:
        async def loop() -> None:
            if self._run_first:
                await self._run_once()
            while True:
                await asyncio.sleep(interval_s)
                await self._run_once()

        self._task = asyncio.get_running_loop().create_task(loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
