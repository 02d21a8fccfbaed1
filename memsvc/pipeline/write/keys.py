"""The idempotency keys the server gives what it derives from conversations.

They start with a prefix callers may not use, so a caller's key can never collide with them; a
session id too long to fit is replaced by its digest.
"""

from __future__ import annotations

import hashlib

SERVER_KEY_PREFIX = "memsvc:"
_MAX_KEY_CHARS = 128


def _keyed(kind: str, session_id: str) -> str:
    key = f"{SERVER_KEY_PREFIX}{kind}:{session_id}"
    if len(key) <= _MAX_KEY_CHARS:
        return key
    return f"{SERVER_KEY_PREFIX}{kind}:#{hashlib.sha256(session_id.encode()).hexdigest()}"


def turn_key(session_id: str, index: int) -> str:
    """A session's turn, by its index in the session."""
    return _keyed(f"turn:{index}", session_id)


def summary_key(session_id: str) -> str:
    """A session's one summary."""
    return _keyed("summary", session_id)


def extracted_key(source_id: str, position: int) -> str:
    """The `position`-th memory extracted from the turn `source_id` (stable across re-runs)."""
    return f"{SERVER_KEY_PREFIX}x:{source_id}:{position}"


def is_turn_key(key: str) -> bool:
    return key.startswith(f"{SERVER_KEY_PREFIX}turn:")
