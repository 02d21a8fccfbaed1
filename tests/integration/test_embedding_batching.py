"""Micro-batching of the local embedder: an idle model embeds at once, a busy one batches."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memsvc.config import Settings
from memsvc.errors import Unavailable


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
        together = await asyncio.gather(*(embedder.embed([t]) for t in texts))
        # One text already in the model when the others are asked for: they queue behind it.
        lead = asyncio.ensure_future(embedder.embed(texts[:1]))
        await asyncio.sleep(0.01)
        queued = await asyncio.gather(*(embedder.embed([t]) for t in texts[1:]))
        return [first, *together, await lead, *queued]

    results = asyncio.run(run())
    # Alone: a batch of one. Nine asked for together (a mode's searches): one batch, started on
    # the loop's next turn. Then the first of nine goes at once (no waiting for companions on an
    # idle model) and the other eight, queued while it runs, share the next forward pass.
    assert batches == [1, 9, 1, 8]
    expected = real_encode(texts)
    for got, want in zip(results[1:10], expected, strict=True):
        if embedder.version.endswith("+int8"):
            # int8 activation scales are per batch: companions move a vector slightly.
            assert float(np.dot(got[0], want)) > 0.97
        else:
            assert np.allclose(got[0], want, atol=1e-5)


def test_an_embedding_asked_for_after_close_is_refused_not_left_waiting(tmp_path: Path, onnx_dir: Path) -> None:
    from memsvc.server import build_local_embedder

    closed = build_local_embedder(Settings(data_dir=tmp_path, embedding_onnx_dir=onnx_dir))

    async def run() -> None:
        await closed.close()
        await asyncio.wait_for(closed.embed(["anything"]), timeout=5)

    with pytest.raises(Unavailable):
        asyncio.run(run())
