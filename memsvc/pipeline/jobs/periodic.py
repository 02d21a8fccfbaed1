"""A background job run every interval on the event loop, with one way to start and stop it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from memsvc.errors import MemsvcError

log = logging.getLogger(__name__)


class PeriodicTask:
    """Runs `work` every `interval_s`; a failed run is logged and the next one still comes.

    Stopping never cancels a run under way: its store calls run in worker threads and
    transactions that a cancelled coroutine would abandon halfway (and whose connections
    shutdown then closes). Long jobs read `stopping` between batches to end early instead.
    """

    def __init__(self, name: str, work: Callable[[], Awaitable[None]], *, run_first: bool = False) -> None:
        self._name = name
        self._work = work
        self._run_first = run_first
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    @property
    def stopping(self) -> bool:
        """True once `stop()` was called: a run under way should finish its batch and return."""
        return self._stop.is_set()

    async def _run_once(self) -> None:
        try:
            await self._work()
        except MemsvcError as exc:
            # A dependency is down: the next run retries; nothing to alarm about yet.
            log.warning("%s postponed: %s", self._name, exc.message)
        except Exception:
            log.exception("%s failed", self._name)

    def start(self, interval_s: float) -> None:
        self._stop.clear()

        async def loop() -> None:
            if self._run_first:
                await self._run_once()
            while not self._stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), interval_s)
                    return  # stopped while waiting for the next run
                await self._run_once()

        self._task = asyncio.get_running_loop().create_task(loop())

    async def stop(self) -> None:
        """Let the run under way finish, then end the loop."""
        self._stop.set()
        if self._task is not None:
            await self._task
            self._task = None
