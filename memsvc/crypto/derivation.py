"""The key derivation root: the secret the term-hash, page-token and result-cache keys derive from.

Those keys must not change when a master key is retired: the lexical postings hold terms hashed
under one of them, so a new hash key would orphan every posting. The root is created once, wrapped
by the master key ring like a data key, and re-wrapped by master-key rotation; retiring a master
key after rotating leaves it, and everything derived from it, as it was.

At its creation the root is the oldest configured master key's material, which is what keys were
derived from before the root was stored: a store written by an earlier version keeps its postings.
Replacing the root (after a suspected leak of that key, say) means re-hashing every posting.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field
from typing import Protocol

from cryptography.exceptions import InvalidTag

from memsvc.crypto.keyring import MasterKeyRing
from memsvc.domain.models import WrappedSecret
from memsvc.errors import FailedPrecondition

# What the root's wrapping is bound to (AES-GCM associated data), so no data key can pose as it.
ROOT_BINDING = "memsvc/v1/derivation-root"


class DerivationRootStore(Protocol):
    async def get_derivation_root(self) -> WrappedSecret | None: ...

    async def put_derivation_root_if_absent(self, root: WrappedSecret) -> WrappedSecret: ...


@dataclass(frozen=True)
class KeyDerivation:
    """32-byte subkeys of the derivation root, one per named purpose."""

    root: bytes = field(repr=False)

    def derive(self, purpose: str) -> bytes:
        return hmac.new(self.root, b"memsvc/v1/derive|" + purpose.encode(), hashlib.sha256).digest()


async def load_key_derivation(store: DerivationRootStore, ring: MasterKeyRing) -> KeyDerivation:
    """The stored root, unwrapped; created on first use (concurrent replicas agree on one)."""
    return (await stored_root(store, ring))[1]


async def stored_root(store: DerivationRootStore, ring: MasterKeyRing) -> tuple[WrappedSecret, KeyDerivation]:
    """The root as stored (its wrapping) and unwrapped, created if absent."""
    stored = await store.get_derivation_root()
    if stored is None:
        master_version, wrapped = ring.wrap(ring.keys[min(ring.keys)], ROOT_BINDING)
        stored = await store.put_derivation_root_if_absent(WrappedSecret(master_version, wrapped))
    try:
        return stored, KeyDerivation(ring.unwrap(stored.master_version, stored.wrapped, ROOT_BINDING))
    except (FailedPrecondition, InvalidTag) as exc:
        raise FailedPrecondition(
            f"the key derivation root is wrapped by master key version {stored.master_version}, which is not "
            "configured (or not that key): configure it again and run `memsvc keys rotate-master` before "
            "removing it"
        ) from exc
