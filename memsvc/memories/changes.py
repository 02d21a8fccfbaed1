"""The one place a namespace's memories are announced changed, so cached query results go."""

from __future__ import annotations

from memsvc.domain.models import Namespace
from memsvc.stores.caches.base import ResultCache


class NamespaceChanges:
    """Every write, import, feedback and maintenance change of a namespace reports here.

    Today one consequence follows: the namespace's cached query results are dropped (in this
    process, or in Redis for every replica). A new cache of derived data subscribes here.
    """

    def __init__(self, result_cache: ResultCache) -> None:
        self._result_cache = result_cache

    async def changed(self, namespace: Namespace) -> None:
        await self._result_cache.invalidate(namespace)
