"""The master key ring: versioned AES-256 keys that wrap the per-user data keys."""

from __future__ import annotations

import base64
from dataclasses import dataclass

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from memsvc.errors import FailedPrecondition

_WRAP_AAD = b"memsvc/v1/data-key|"


@dataclass(frozen=True)
class MasterKeyRing:
    """Master keys by version; the primary one wraps new data keys, any listed one unwraps."""

    keys: dict[int, bytes]
    primary_version: int

    @classmethod
    def parse(cls, spec: str) -> MasterKeyRing:
        """Parse `"2:<base64>,1:<base64>"`; the first entry is the primary key."""
        keys: dict[int, bytes] = {}
        primary: int | None = None
        for part in (p.strip() for p in spec.split(",") if p.strip()):
            version_text, _, encoded = part.partition(":")
            if not encoded or not version_text.isdigit():
                raise FailedPrecondition("master key entries must look like '<version>:<base64>'")
            key = base64.b64decode(encoded, validate=True)
            if len(key) != 32:
                raise FailedPrecondition("a master key must be 32 bytes (AES-256)")
            version = int(version_text)
            keys[version] = key
            primary = version if primary is None else primary
        if primary is None:
            raise FailedPrecondition("no master key configured")
        return cls(keys=keys, primary_version=primary)

    def wrap(self, data_key: bytes, binding: str) -> tuple[int, bytes]:
        """Encrypt a data key under the primary master key, bound to its namespace."""
        nonce = _nonce()
        sealed = AESGCM(self.keys[self.primary_version]).encrypt(nonce, data_key, _WRAP_AAD + binding.encode())
        return self.primary_version, nonce + sealed

    def unwrap(self, master_version: int, wrapped: bytes, binding: str) -> bytes:
        key = self.keys.get(master_version)
        if key is None:
            raise FailedPrecondition(f"master key version {master_version} is not configured")
        return AESGCM(key).decrypt(wrapped[:12], wrapped[12:], _WRAP_AAD + binding.encode())


def _nonce() -> bytes:
    import os

    return os.urandom(12)


def new_key_b64() -> str:
    import os

    return base64.b64encode(os.urandom(32)).decode()
