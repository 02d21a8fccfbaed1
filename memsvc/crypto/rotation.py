"""Master-key rotation: re-wrap every data key under the primary master key, while servers serve.

Data keys themselves do not change, so no ciphertext is rewritten and every replica's cache of
unwrapped keys stays valid. Procedure: configure every replica with the new key first in
MEMSVC_MASTER_KEYS and the old one after it, run `memsvc keys rotate-master`, then drop the old key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from cryptography.exceptions import InvalidTag

from memsvc.crypto.derivation import ROOT_BINDING, DerivationRootStore, stored_root
from memsvc.crypto.keyring import MasterKeyRing
from memsvc.domain.models import WrappedDataKey, WrappedSecret
from memsvc.errors import FailedPrecondition
from memsvc.stores.records.datakeys import StaleDataKey


class DataKeyRotationStore(DerivationRootStore, Protocol):
    async def stale_data_keys(self, master_version: int, after: tuple[str, int], limit: int) -> list[StaleDataKey]: ...

    async def rewrap_data_key(self, key: WrappedDataKey, master_version: int, wrapped: bytes) -> bool: ...

    async def rewrap_derivation_root(self, current: WrappedSecret, replacement: WrappedSecret) -> bool: ...


@dataclass
class RotationReport:
    """What one rotation pass did; `unreadable` keys need a master key that is not configured."""

    rewrapped: int = 0
    orphaned: int = 0
    unreadable: int = 0
    changed_concurrently: int = 0
    # The key derivation root (memsvc/crypto/derivation.py) moved under the primary key.
    root_rewrapped: bool = False


async def rotate_master_key(store: DataKeyRotationStore, ring: MasterKeyRing, batch_size: int = 500) -> RotationReport:
    """Re-wrap the key derivation root and every data key not yet under `ring`'s primary key;
    safe to repeat and to interrupt."""
    report = RotationReport()
    # Created here if no server has started since the upgrade that introduced it (from the
    # oldest key of this ring, before that key can be removed); an unreadable root fails here,
    # loudly: every term hash depends on it.
    root, derivation = await stored_root(store, ring)
    if root.master_version != ring.primary_version:
        master_version, wrapped = ring.wrap(derivation.root, ROOT_BINDING)
        report.root_rewrapped = await store.rewrap_derivation_root(root, WrappedSecret(master_version, wrapped))
    after = ("", -1)
    while True:
        batch = await store.stale_data_keys(ring.primary_version, after, batch_size)
        if not batch:
            return report
        for item in batch:
            key = item.key
            after = (key.namespace_digest, key.version)
            if item.namespace is None:
                report.orphaned += 1
                continue
            binding = item.namespace.key
            try:
                data_key = ring.unwrap(key.master_version, key.wrapped, binding)
            except (FailedPrecondition, InvalidTag):
                report.unreadable += 1
                continue
            master_version, wrapped = ring.wrap(data_key, binding)
            if await store.rewrap_data_key(key, master_version, wrapped):
                report.rewrapped += 1
            else:  # forgotten or re-wrapped by another run meanwhile; either way nothing is lost
                report.changed_concurrently += 1
