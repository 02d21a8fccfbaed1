"""Opaque page tokens, signed and bound to the caller's namespace and filter."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

from memsvc.domain.models import Namespace
from memsvc.errors import InvalidArgument
from memsvc.stores.records.base import PageCursor


class PageTokens:
    def __init__(self, key: bytes) -> None:
        self._key = key

    def _mac(self, namespace: Namespace, filter_fingerprint: str, body: bytes) -> bytes:
        binding = f"{namespace.key}\x1e{filter_fingerprint}\x1e".encode()
        return hmac.new(self._key, binding + body, hashlib.sha256).digest()[:16]

    def encode(self, namespace: Namespace, filter_fingerprint: str, cursor: PageCursor) -> str:
        body = json.dumps([cursor.created_at, cursor.memory_id], separators=(",", ":")).encode()
        token = body + self._mac(namespace, filter_fingerprint, body)
        return base64.urlsafe_b64encode(token).decode().rstrip("=")

    def decode(self, token: str, namespace: Namespace, filter_fingerprint: str) -> PageCursor:
        """The cursor of a token this caller got for this listing, or INVALID_ARGUMENT."""
        invalid = InvalidArgument.field("page_token", "is not a token of this listing")
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except ValueError:
            raise invalid from None
        body, mac = raw[:-16], raw[-16:]
        if len(raw) <= 16 or not hmac.compare_digest(mac, self._mac(namespace, filter_fingerprint, body)):
            raise invalid
        created_at, memory_id = json.loads(body)
        return PageCursor(float(created_at), str(memory_id))
