"""Request validation: every check names the offending field, as the API reports it."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memsvc.config import Settings
from memsvc.domain.models import MemoryChanges, MemoryFilter, NewMemory, SpokenTurn
from memsvc.errors import FieldViolation, InvalidArgument
from memsvc.pipeline.write.keys import SERVER_KEY_PREFIX

TAG_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]{0,63}")
SESSION_PATTERN = re.compile(r"[A-Za-z0-9_.:/-]{1,128}")
MEMORY_ID_PATTERN = re.compile(r"[0-9a-f]{32}")
IDEMPOTENCY_PATTERN = re.compile(r"[\x21-\x7e]{1,128}")
MAX_SOURCE_IDS = 64
MAX_NAME_CHARS = 128
MAX_TURN_INDEX = 1_000_000
_CLOCK_SKEW_S = 300.0


@dataclass(frozen=True)
class Limits:
    max_content_chars: int
    max_batch_items: int
    max_query_chars: int
    max_results: int
    max_tags: int
    max_metadata_bytes: int
    max_page_size: int
    max_memories_per_user: int = 0

    @classmethod
    def from_settings(cls, s: Settings) -> Limits:
        return cls(
            max_content_chars=s.max_content_chars,
            max_batch_items=s.max_batch_items,
            max_query_chars=s.max_query_chars,
            max_results=s.max_results,
            max_tags=s.max_tags,
            max_metadata_bytes=s.max_metadata_bytes,
            max_page_size=s.max_page_size,
            max_memories_per_user=s.max_memories_per_user,
        )


class Violations:
    """Collects field violations and raises them together."""

    def __init__(self) -> None:
        self.items: list[FieldViolation] = []

    def add(self, field: str, description: str) -> None:
        self.items.append(FieldViolation(field, description))

    def raise_if_any(self) -> None:
        if self.items:
            raise InvalidArgument(self.items)


def check_user_id(v: Violations, user_id: str, field: str = "user_id") -> None:
    if not user_id:
        v.add(field, "must not be empty")
    elif len(user_id) > 128:
        v.add(field, "must be at most 128 characters")
    elif not user_id.isprintable() or user_id != user_id.strip():
        v.add(field, "must be printable with no leading or trailing whitespace")


def check_memory_id(v: Violations, memory_id: str, field: str = "id") -> None:
    if not MEMORY_ID_PATTERN.fullmatch(memory_id):
        v.add(field, "must be a memory id (32 lowercase hex digits)")


def check_content(v: Violations, content: str, field: str, limits: Limits) -> None:
    if not content.strip():
        v.add(field, "must not be empty")
    elif len(content) > limits.max_content_chars:
        v.add(field, f"must be at most {limits.max_content_chars} characters")
    elif "\x00" in content:
        v.add(field, "must not contain NUL characters")


def check_tags(v: Violations, tags: tuple[str, ...], field: str, limits: Limits) -> None:
    if len(tags) > limits.max_tags:
        v.add(field, f"at most {limits.max_tags} tags")
    for i, tag in enumerate(tags):
        if not TAG_PATTERN.fullmatch(tag):
            v.add(f"{field}[{i}]", "must match [A-Za-z0-9][A-Za-z0-9_.:/-]{0,63}")


def check_session(v: Violations, session_id: str, field: str) -> None:
    if session_id and not SESSION_PATTERN.fullmatch(session_id):
        v.add(field, "must be at most 128 characters of [A-Za-z0-9_.:/-]")


def check_unit(v: Violations, value: float | None, field: str) -> None:
    if value is not None and (math.isnan(value) or not 0.0 <= value <= 1.0):
        v.add(field, "must be within [0, 1]")


def check_metadata(v: Violations, metadata: Mapping[str, Any], field: str, limits: Limits) -> None:
    if metadata and len(json.dumps(metadata, separators=(",", ":"))) > limits.max_metadata_bytes:
        v.add(field, f"must serialise to at most {limits.max_metadata_bytes} bytes")


def validate_new_memories(
    user_id: str, items: list[NewMemory], limits: Limits, now: float | None = None, server_keys: bool = False
) -> None:
    """`server_keys` admits the idempotency keys the server gives the memories it derives."""
    v = Violations()
    check_user_id(v, user_id)
    if not items:
        v.add("memories", "must contain at least one memory")
    elif len(items) > limits.max_batch_items:
        v.add("memories", f"at most {limits.max_batch_items} memories per call")
    current = time.time() if now is None else now
    seen_keys: dict[str, int] = {}
    for i, item in enumerate(items[: limits.max_batch_items]):
        prefix = f"memories[{i}]"
        check_content(v, item.content, f"{prefix}.content", limits)
        check_tags(v, item.tags, f"{prefix}.tags", limits)
        check_session(v, item.session_id, f"{prefix}.session_id")
        check_unit(v, item.importance, f"{prefix}.importance")
        check_metadata(v, item.metadata, f"{prefix}.metadata", limits)
        if item.created_at is not None and item.created_at > current + _CLOCK_SKEW_S:
            v.add(f"{prefix}.create_time", "must not lie in the future")
        if item.expires_at is not None and item.expires_at <= current:
            v.add(f"{prefix}.expire_time", "must lie in the future")
        if item.idempotency_key:
            if not IDEMPOTENCY_PATTERN.fullmatch(item.idempotency_key):
                v.add(f"{prefix}.idempotency_key", "must be 1 to 128 printable ASCII characters")
            elif item.idempotency_key.startswith(SERVER_KEY_PREFIX) and not server_keys:
                v.add(f"{prefix}.idempotency_key", f"must not start with {SERVER_KEY_PREFIX!r} (kept for the server)")
            elif item.idempotency_key in seen_keys:
                v.add(f"{prefix}.idempotency_key", f"repeats memories[{seen_keys[item.idempotency_key]}]")
            seen_keys.setdefault(item.idempotency_key, i)
    v.raise_if_any()


def validate_conversation(
    user_id: str, session_id: str, turns: list[SpokenTurn], first_turn_index: int, limits: Limits, now: float
) -> None:
    v = Violations()
    check_user_id(v, user_id)
    if not session_id:
        v.add("session_id", "must not be empty")
    else:
        check_session(v, session_id, "session_id")
    if not 0 <= first_turn_index <= MAX_TURN_INDEX:
        v.add("first_turn_index", f"must be within 0..{MAX_TURN_INDEX}")
    if not turns:
        v.add("turns", "must contain at least one turn")
    elif len(turns) > limits.max_batch_items:
        v.add("turns", f"at most {limits.max_batch_items} turns per call")
    previous: float | None = None
    for i, turn in enumerate(turns[: limits.max_batch_items]):
        prefix = f"turns[{i}]"
        check_content(v, turn.content, f"{prefix}.content", limits)
        if len(turn.speaker_name) > MAX_NAME_CHARS:
            v.add(f"{prefix}.name", f"must be at most {MAX_NAME_CHARS} characters")
        elif turn.speaker_name != turn.speaker_name.strip() or not turn.speaker_name.isprintable():
            v.add(f"{prefix}.name", "must be printable with no leading or trailing whitespace")
        at = now if turn.created_at is None else turn.created_at
        if at > now + _CLOCK_SKEW_S:
            v.add(f"{prefix}.create_time", "must not lie in the future")
        elif previous is not None and at < previous:
            v.add(
                f"{prefix}.create_time", f"must not be earlier than turns[{i - 1}].create_time (turns go oldest first)"
            )
        previous = at
    v.raise_if_any()


def validate_changes(user_id: str, memory_id: str, changes: MemoryChanges, limits: Limits) -> None:
    v = Violations()
    check_user_id(v, user_id)
    check_memory_id(v, memory_id)
    if changes.content is not None:
        check_content(v, changes.content, "memory.content", limits)
    if changes.tags is not None:
        check_tags(v, changes.tags, "memory.tags", limits)
    check_unit(v, changes.importance, "memory.importance")
    if changes.metadata is not None:
        check_metadata(v, changes.metadata, "memory.metadata", limits)
    if all(getattr(changes, f) is None for f in ("content", "tags", "tier", "importance", "metadata")):
        v.add("update_mask", "must name at least one field")
    v.raise_if_any()


def validate_filter(v: Violations, memory_filter: MemoryFilter, field: str, limits: Limits) -> None:
    check_tags(v, memory_filter.tags_any, f"{field}.tags_any", limits)
    check_session(v, memory_filter.session_id, f"{field}.session_id")
    check_unit(v, memory_filter.min_importance, f"{field}.min_importance")
    if (
        memory_filter.created_after is not None
        and memory_filter.created_before is not None
        and memory_filter.created_after >= memory_filter.created_before
    ):
        v.add(f"{field}.create_time_before", "must be later than create_time_after")


def validate_query(
    user_id: str,
    query: str,
    limit: int,
    memory_filter: MemoryFilter,
    limits: Limits,
    min_relevance: float | None = None,
) -> None:
    v = Violations()
    check_user_id(v, user_id)
    if not query.strip():
        v.add("query", "must not be empty")
    elif len(query) > limits.max_query_chars:
        v.add("query", f"must be at most {limits.max_query_chars} characters")
    if not 1 <= limit <= limits.max_results:
        v.add("limit", f"must be within 1..{limits.max_results}")
    validate_filter(v, memory_filter, "filter", limits)
    check_unit(v, min_relevance, "min_relevance")
    v.raise_if_any()


def validate_listing(user_id: str, page_size: int, memory_filter: MemoryFilter, limits: Limits) -> None:
    v = Violations()
    check_user_id(v, user_id)
    if not 1 <= page_size <= limits.max_page_size:
        v.add("page_size", f"must be within 1..{limits.max_page_size}")
    validate_filter(v, memory_filter, "filter", limits)
    v.raise_if_any()
