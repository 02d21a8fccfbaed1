"""Envelope encryption: AES-256-GCM with a data key per user namespace, wrapped by the master key.

Associated data binds every ciphertext to its tenant, namespace and memory id, so a
ciphertext copied into another row (or another tenant) fails to decrypt.
"""

from __future__ import annotations

import os
import struct
from collections import OrderedDict
from threading import Lock
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from memsvc.crypto.keyring import MasterKeyRing
from memsvc.domain.models import Namespace, WrappedDataKey
from memsvc.errors import FailedPrecondition

_FORMAT_V1 = 1
_HEADER = struct.Struct(">BI")  # format byte, data-key version


class DataKeyStore(Protocol):
    """Where wrapped data keys live (the record store)."""

    async def get_data_key(self, namespace: Namespace) -> WrappedDataKey | None: ...

    async def put_data_key_if_absent(self, namespace: Namespace, key: WrappedDataKey) -> WrappedDataKey: ...


class DecryptionError(FailedPrecondition):
    reason = "DECRYPTION_FAILED"


class EnvelopeCipher:
    """Seals and opens memory payloads with per-namespace data keys (cached unwrapped)."""

    def __init__(self, ring: MasterKeyRing, store: DataKeyStore, cache_entries: int = 4096) -> None:
        self._ring = ring
        self._store = store
        self._cache: OrderedDict[tuple[str, int], AESGCM] = OrderedDict()
        self._current: dict[str, int] = {}
        self._cache_entries = cache_entries
        self._lock = Lock()

    async def seal(self, namespace: Namespace, memory_id: str, plaintext: bytes) -> bytes:
        version, aead = await self._current_key(namespace, create=True)
        nonce = os.urandom(12)
        body = aead.encrypt(nonce, plaintext, _aad(namespace, memory_id))
        return _HEADER.pack(_FORMAT_V1, version) + nonce + body

    async def open(self, namespace: Namespace, memory_id: str, ciphertext: bytes) -> bytes:
        if len(ciphertext) < _HEADER.size + 12 + 16:
            raise DecryptionError("ciphertext is truncated")
        fmt, version = _HEADER.unpack_from(ciphertext)
        if fmt != _FORMAT_V1:
            raise DecryptionError(f"unknown ciphertext format {fmt}")
        aead = await self._key(namespace, version)
        nonce = ciphertext[_HEADER.size : _HEADER.size + 12]
        try:
            return aead.decrypt(nonce, ciphertext[_HEADER.size + 12 :], _aad(namespace, memory_id))
        except InvalidTag as exc:
            raise DecryptionError("ciphertext does not belong to this memory") from exc

    def forget(self, namespace: Namespace) -> None:
        """Drop the cached data keys of a namespace (after crypto-shredding)."""
        with self._lock:
            for cache_key in [k for k in self._cache if k[0] == namespace.digest]:
                del self._cache[cache_key]
            self._current.pop(namespace.digest, None)

    async def _current_key(self, namespace: Namespace, *, create: bool) -> tuple[int, AESGCM]:
        with self._lock:
            version = self._current.get(namespace.digest)
            cached = self._cache.get((namespace.digest, version)) if version else None
        if version is not None and cached is not None:
            return version, cached
        wrapped = await self._store.get_data_key(namespace)
        if wrapped is None:
            if not create:
                raise DecryptionError("no data key for this namespace")
            data_key = os.urandom(32)
            master_version, sealed = self._ring.wrap(data_key, namespace.key)
            candidate = WrappedDataKey(namespace.digest, 1, master_version, sealed)
            # Another replica may have created the key first; everyone uses the stored one.
            wrapped = await self._store.put_data_key_if_absent(namespace, candidate)
        aead = self._remember(namespace, wrapped)
        with self._lock:
            self._current[namespace.digest] = wrapped.version
        return wrapped.version, aead

    async def _key(self, namespace: Namespace, version: int) -> AESGCM:
        with self._lock:
            cached = self._cache.get((namespace.digest, version))
            if cached is not None:
                self._cache.move_to_end((namespace.digest, version))
                return cached
        wrapped = await self._store.get_data_key(namespace)
        if wrapped is None or wrapped.version != version:
            raise DecryptionError("the data key of this memory no longer exists")
        return self._remember(namespace, wrapped)

    def _remember(self, namespace: Namespace, wrapped: WrappedDataKey) -> AESGCM:
        cache_key = (namespace.digest, wrapped.version)
        with self._lock:
            cached = self._cache.get(cache_key)
            if cached is not None:
                return cached
        try:
            data_key = self._ring.unwrap(wrapped.master_version, wrapped.wrapped, namespace.key)
        except InvalidTag as exc:
            raise DecryptionError("data key does not unwrap with the configured master key") from exc
        aead = AESGCM(data_key)
        with self._lock:
            self._cache[cache_key] = aead
            while len(self._cache) > self._cache_entries:
                self._cache.popitem(last=False)
        return aead


def _aad(namespace: Namespace, memory_id: str) -> bytes:
    return b"memsvc/v1/memory|" + namespace.key.encode() + b"|" + memory_id.encode()
