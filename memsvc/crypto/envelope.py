"""Envelope encryption: AES-256-GCM with a data key per user namespace, wrapped by the master key.

Associated data binds every ciphertext to its tenant, namespace and memory id, so a
ciphertext copied into another row (or another tenant) fails to decrypt.
"""

from __future__ import annotations

import asyncio
import os
import struct
import time
import weakref
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
    """Seals and opens memory payloads with per-namespace data keys (cached unwrapped).

    Another replica may forget a namespace (destroying its data key) at any time, so sealing
    re-reads the namespace's current key once per calling task (one RPC: one cheap query per
    AddMemories call) and whenever the last check is older than `verify_after_s`. A key that
    no longer exists, or was replaced, is dropped from the cache and never seals again.
    """

    def __init__(
        self, ring: MasterKeyRing, store: DataKeyStore, cache_entries: int = 4096, verify_after_s: float = 1.0
    ) -> None:
        self._ring = ring
        self._store = store
        self._cache: OrderedDict[tuple[str, int], AESGCM] = OrderedDict()
        self._wrapped: dict[tuple[str, int], bytes] = {}
        self._current: dict[str, int] = {}
        self._cache_entries = cache_entries
        self._verify_after_s = verify_after_s
        self._checked_at: dict[str, float] = {}
        self._checked_by: weakref.WeakKeyDictionary[asyncio.Task[object], set[str]] = weakref.WeakKeyDictionary()
        self._lock = Lock()

    async def seal(self, namespace: Namespace, memory_id: str, plaintext: bytes) -> bytes:
        if self._needs_check(namespace.digest):
            await self._check_current(namespace)
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
        body = ciphertext[_HEADER.size + 12 :]
        try:
            return aead.decrypt(nonce, body, _aad(namespace, memory_id))
        except InvalidTag:
            pass
        # Another replica may have forgotten the namespace and created a new key of the same
        # version since this one was cached: read the stored key once and try it.
        fresh = await self._reload(namespace, version)
        if fresh is not None and fresh is not aead:
            try:
                return fresh.decrypt(nonce, body, _aad(namespace, memory_id))
            except InvalidTag:
                pass
        raise DecryptionError("ciphertext does not belong to this memory")

    def forget(self, namespace: Namespace) -> None:
        """Drop the cached data keys of a namespace (after crypto-shredding)."""
        with self._lock:
            for cache_key in [k for k in self._cache if k[0] == namespace.digest]:
                del self._cache[cache_key]
            for cache_key in [k for k in self._wrapped if k[0] == namespace.digest]:
                del self._wrapped[cache_key]
            self._current.pop(namespace.digest, None)

    def _needs_check(self, digest: str) -> bool:
        task = asyncio.current_task()
        with self._lock:
            checked_at = self._checked_at.get(digest)
            if checked_at is None or time.monotonic() - checked_at > self._verify_after_s:
                return True
            return task is not None and digest not in self._checked_by.get(task, ())

    async def _check_current(self, namespace: Namespace) -> None:
        """Re-read the namespace's current key; drop cached keys that were destroyed or replaced."""
        digest = namespace.digest
        wrapped = await self._store.get_data_key(namespace)
        with self._lock:
            cached = self._wrapped.get((digest, wrapped.version)) if wrapped is not None else None
            stale = wrapped is None or (cached is not None and cached != wrapped.wrapped)
        if stale:
            self.forget(namespace)
        if wrapped is not None:
            self._remember(namespace, wrapped)
            with self._lock:
                self._current[digest] = wrapped.version
        task = asyncio.current_task()
        with self._lock:
            self._checked_at[digest] = time.monotonic()
            if task is not None:
                self._checked_by.setdefault(task, set()).add(digest)

    async def _reload(self, namespace: Namespace, version: int) -> AESGCM | None:
        wrapped = await self._store.get_data_key(namespace)
        if wrapped is None or wrapped.version != version:
            return None
        with self._lock:
            cached = self._wrapped.get((namespace.digest, version))
        if cached == wrapped.wrapped:
            return self._cache.get((namespace.digest, version))
        self.forget(namespace)
        return self._remember(namespace, wrapped)

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
            self._wrapped[cache_key] = wrapped.wrapped
            while len(self._cache) > self._cache_entries:
                evicted, _ = self._cache.popitem(last=False)
                self._wrapped.pop(evicted, None)
        return aead


def _aad(namespace: Namespace, memory_id: str) -> bytes:
    return b"memsvc/v1/memory|" + namespace.key.encode() + b"|" + memory_id.encode()
