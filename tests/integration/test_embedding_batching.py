"""Micro-batching of the local embedder: an idle model embeds at once, a busy one batches."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest


def test_concurrent_queries_share_forward_passes(embedder: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    batches: list[int] = []
    real_encode = embedder.encode

    def slow_encode(texts: Sequence[str]) -> list[Any]:
        batches.append(len(texts))
        time.sleep(0.05)  # long enough for every other query to arrive while this batch runs
        return list(real_encode(texts))

    monkeypatch.setattr(embedder, "encode", slow_encode)
    texts = [f"question {i} about the weekend trip" for i in range(9)]

    async def run() -> list[list[Any]]:
        first = await embedder.embed(texts[:1])
        rest = await asyncio.gather(*(embedder.embed([t]) for t in texts))
        return [first, *rest]

    results = asyncio.run(run())
    # Alone: a batch of one. Then the first of nine goes at once (no waiting for companions on an
    # idle model) and the other eight, queued while it runs, share the next forward pass.
    assert batches == [1, 1, 8]
    expected = real_encode(texts)
    for got, want in zip(results[1:], expected, strict=True):
        if embedder.version.endswith("+int8"):
            # int8 activation scales are per batch: companions move a vector slightly.
            assert float(np.dot(got[0], want)) > 0.97
        else:
            assert np.allclose(got[0], want, atol=1e-5)
