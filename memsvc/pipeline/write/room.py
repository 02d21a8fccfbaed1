"""The per-user memory limit (MEMSVC_MAX_MEMORIES_PER_USER): a call that would take a user past
it is refused whole, before anything is stored; nothing already stored is dropped to make room."""

from __future__ import annotations

from memsvc.deadline import Deadline
from memsvc.domain.models import Namespace
from memsvc.errors import ResourceExhausted
from memsvc.stores.records.base import MemoryRecords


async def ensure_room(
    store: MemoryRecords, limit: int, namespace: Namespace, user_id: str, adding: int, deadline: Deadline
) -> None:
    """Raise RESOURCE_EXHAUSTED naming the limit when `adding` new memories would take the user
    past `limit` (0: no limit). Checked per call, so concurrent calls may pass it by a few."""
    if limit <= 0 or adding <= 0:
        return
    held = await deadline.run(store.count_memories(namespace), "the record store")
    if held + adding > limit:
        raise ResourceExhausted(
            f"user {user_id!r} holds {held} memories and this call would add {adding}, past the "
            f"limit of {limit} a user (MEMSVC_MAX_MEMORIES_PER_USER): delete memories or raise the limit",
            metadata={"limit": "max_memories_per_user", "max": str(limit), "held": str(held), "adding": str(adding)},
        )
