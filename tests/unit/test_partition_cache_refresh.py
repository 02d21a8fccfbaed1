"""A Milvus proxy whose cache missed a new partition is made to refresh it.

The race behind it (a search filling the proxy's cache while the partition is created) cannot
be produced on demand against the real server, so this drives the index's retry policy with a
client that answers as that proxy did: "partition not found" until the collection is altered.
"""

from __future__ import annotations

from typing import Any

import pytest
from pymilvus.exceptions import MilvusException

from memsvc.stores.vectors.milvus import MilvusVectorIndex


class StaleProxy:
    def __init__(self) -> None:
        self.altered: list[dict[str, str]] = []
        self.loads = 0

    def load_partitions(self, collection: str, partitions: list[str], timeout: float | None = None) -> None:
        self.loads += 1
        if not self.altered:
            raise MilvusException(200, f"partition not found[partition={partitions[0]}]")

    def alter_collection_properties(
        self, collection: str, properties: dict[str, str], timeout: float | None = None
    ) -> None:
        self.altered.append(properties)


def index_on(client: Any) -> MilvusVectorIndex:
    return MilvusVectorIndex(
        client,
        embedding_version="raw@1",
        dimension=4,
        placement="partition",
        registry=None,
        embedded=False,  # type: ignore[arg-type]
    )


def test_a_partition_the_proxy_never_learns_of_is_loaded_after_a_cache_refresh() -> None:
    proxy = StaleProxy()
    index_on(proxy)._load_new_partition("memsvc_raw_1_0", "p_new")
    # Two quick retries for the usual lag, then the collection is altered, then the load passes.
    assert len(proxy.altered) == 1 and proxy.loads == 4
    assert list(proxy.altered[0]) == ["memsvc.cache_epoch"]


def test_a_proxy_that_catches_up_by_itself_is_not_altered() -> None:
    class LaggingProxy(StaleProxy):
        def load_partitions(self, collection: str, partitions: list[str], timeout: float | None = None) -> None:
            self.loads += 1
            if self.loads < 2:
                raise MilvusException(200, "partition not found")

    proxy = LaggingProxy()
    index_on(proxy)._load_new_partition("memsvc_raw_1_0", "p_new")
    assert proxy.altered == [] and proxy.loads == 2


def test_a_load_racing_another_writers_partition_creation_is_retried() -> None:
    # Each partition creation drops the proxy's cached collection entry; a load-progress lookup
    # racing it answered "can't find collection name" (Milvus 2.3.5).
    class RacingProxy(StaleProxy):
        def load_partitions(self, collection: str, partitions: list[str], timeout: float | None = None) -> None:
            self.loads += 1
            if self.loads < 2:
                raise MilvusException(65535, f"can't find collection name default:{collection}")

    proxy = RacingProxy()
    index_on(proxy)._load_new_partition("memsvc_raw_1_s0000", "p_new")
    assert proxy.altered == [] and proxy.loads == 2


def test_other_load_failures_are_not_retried() -> None:
    class BrokenProxy(StaleProxy):
        def load_partitions(self, collection: str, partitions: list[str], timeout: float | None = None) -> None:
            self.loads += 1
            raise MilvusException(65535, "out of memory")

    proxy = BrokenProxy()
    with pytest.raises(MilvusException, match="out of memory"):
        index_on(proxy)._load_new_partition("memsvc_raw_1_s0000", "p_new")
    assert proxy.loads == 1
