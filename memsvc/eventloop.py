"""The event loop the server runs on: uvloop (libuv, written in Cython).

The event loop's own work (waking for gRPC's completion queue, thread hand-offs of the record
store and the embedder, futures) is a fixed part of every query's CPU; uvloop does it in C.
Measured in docs/performance.md ("Design decisions").
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import uvloop

T = TypeVar("T")


def new_event_loop() -> asyncio.AbstractEventLoop:
    return uvloop.new_event_loop()


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run` on the server's loop."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)
