"""Where a namespace's vectors live in Milvus: a partition of its own, or a partition key's share.

A placement answers one question, `locate(digest)`, with a `Location`; the index runs every
read and write through it and never asks which placement it has. The namespace term of an
expression is written here alone, from the digest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from memsvc.stores.records.base import VectorPlacement


def quote(value: str) -> str:
    """A Milvus string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class Location:
    """Where to read or write one namespace: a collection, optional partition, optional term."""

    collection: str
    partition: str | None
    namespace_term: str | None


class PlacementRegistry(Protocol):
    """The record store's table of namespace -> (collection, partition), and its write clocks."""

    async def get_placement(self, namespace_digest: str, prefix: str) -> VectorPlacement | None: ...

    async def assign_placement(
        self, namespace_digest: str, prefix: str, partitions_per_collection: int
    ) -> VectorPlacement: ...

    async def note_vector_write(self, namespace_digest: str, prefix: str, timestamp: int) -> None: ...

    async def last_vector_write(self, namespace_digest: str, prefix: str) -> int | None: ...


class Collections(Protocol):
    """What a placement needs of the index: collections and partitions that exist and serve."""

    async def ensure_collection(self, name: str, *, with_namespace: bool) -> None: ...

    async def ensure_partition(self, collection: str, partition: str) -> None: ...


class Placement(Protocol):
    async def locate(self, collections: Collections, digest: str, *, create: bool) -> Location | None:
        """The namespace's location; None if it has none and `create` is false."""
        ...


@dataclass(frozen=True)
class PartitionKeyPlacement:
    """One collection whose partition-key field holds the namespace digest, with
    `partitionkey.isolation` on: for clusters with millions of users."""

    collection: str

    async def locate(self, collections: Collections, digest: str, *, create: bool) -> Location:
        await collections.ensure_collection(self.collection, with_namespace=True)
        return Location(self.collection, None, f"ns == {quote(digest)}")


class PartitionPlacement:
    """A named partition per namespace, searched with `partition_names`, so only the user's own
    vectors are touched. Namespaces spill into shard collections because Milvus caps partitions
    per collection; the record store's registry says which, for every replica alike."""

    def __init__(self, registry: PlacementRegistry, prefix: str, partitions_per_collection: int) -> None:
        self._registry = registry
        self._prefix = prefix
        self._partitions_per_collection = partitions_per_collection
        # A namespace keeps its placement for life, so a replica may remember it.
        self._known: dict[str, VectorPlacement] = {}

    async def locate(self, collections: Collections, digest: str, *, create: bool) -> Location | None:
        placement = self._known.get(digest)
        if placement is None:
            placement = await self._registry.get_placement(digest, self._prefix)
            if placement is None:
                if not create:
                    return None
                placement = await self._registry.assign_placement(digest, self._prefix, self._partitions_per_collection)
            self._known[digest] = placement
        await collections.ensure_collection(placement.collection, with_namespace=False)
        await collections.ensure_partition(placement.collection, placement.partition)
        return Location(placement.collection, placement.partition, None)
