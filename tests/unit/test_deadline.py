"""Deadline.run: work within the time left, none started after it."""

from __future__ import annotations

import asyncio

import pytest

from memsvc.deadline import Deadline
from memsvc.errors import DeadlineExceeded


def test_work_within_the_deadline_returns_and_its_own_errors_pass_through() -> None:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    async def broken() -> int:
        raise ValueError("the store said no")

    assert asyncio.run(Deadline.after(5).run(answer(), "the store")) == 42
    assert asyncio.run(Deadline(None).run(answer(), "the store")) == 42
    with pytest.raises(ValueError, match="said no"):
        asyncio.run(Deadline.after(5).run(broken(), "the store"))


def test_slow_work_is_cut_at_the_deadline_and_cancelled() -> None:
    cancelled = asyncio.Event()

    async def slow() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def main() -> None:
        with pytest.raises(DeadlineExceeded, match="while waiting for the embedder"):
            await Deadline.after(0.02).run(slow(), "the embedder")
        assert cancelled.is_set()

    asyncio.run(main())


def test_work_asked_for_after_the_deadline_never_starts() -> None:
    started = False

    async def write() -> None:
        nonlocal started
        started = True

    with pytest.raises(DeadlineExceeded, match="before the record store was asked"):
        asyncio.run(Deadline.after(-1).run(write(), "the record store"))
    assert not started
