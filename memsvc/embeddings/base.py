"""The embedder contract."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]


class Embedder(Protocol):
    """Turns texts into unit-length vectors of one model version."""

    @property
    def version(self) -> str:
        """Model and version, e.g. `all-MiniLM-L6-v2@1`; part of cache keys and collection names."""
        ...

    @property
    def dimension(self) -> int: ...

    async def embed(self, texts: Sequence[str]) -> list[Vector]: ...

    async def close(self) -> None: ...
