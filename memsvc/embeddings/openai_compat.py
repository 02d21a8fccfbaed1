"""Embeddings from any OpenAI-compatible endpoint through the `openai` client."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from openai import APIError, AsyncOpenAI

from memsvc.embeddings.base import Vector
from memsvc.errors import Unavailable


class OpenAIEmbedder:
    def __init__(self, *, base_url: str, api_key: str, model: str, dimension: int, timeout_s: float) -> None:
        self._client = AsyncOpenAI(base_url=base_url, api_key=api_key or "unused", timeout=timeout_s, max_retries=1)
        self._model = model
        self._dimension = dimension

    @property
    def version(self) -> str:
        return f"{self._model}@openai"

    @property
    def dimension(self) -> int:
        return self._dimension

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        if not texts:
            return []
        try:
            reply = await self._client.embeddings.create(model=self._model, input=list(texts))
            items = sorted(reply.data, key=lambda d: d.index)
        except APIError as exc:
            raise Unavailable("the embedding endpoint failed", retry_after_s=1.0) from exc
        except (ValueError, TypeError, AttributeError) as exc:
            # A reply that is not an embeddings list is the endpoint's failure, not ours.
            raise Unavailable("the embedding endpoint sent a malformed reply", retry_after_s=1.0) from exc
        if len(items) != len(texts):
            raise Unavailable(f"the embedding endpoint returned {len(items)} vectors for {len(texts)} texts")
        vectors = []
        for item in items:
            v = np.asarray(item.embedding, dtype=np.float32)
            if v.shape != (self._dimension,):
                raise Unavailable(f"the embedding endpoint returned {v.shape[0]} dimensions, not {self._dimension}")
            norm = float(np.linalg.norm(v)) or 1.0
            vectors.append(v / norm)
        return vectors

    async def close(self) -> None:
        await self._client.close()
