"""Sealing and opening memory rows and their versions: the one place plaintext meets ciphertext.

A row's content and metadata are sealed together under the namespace's data key, bound to the
memory id; a version's under an id of its own (`version_aad_id`), so neither can be swapped
for the other. Code that already holds the plaintext builds the domain memory with
`with_plaintext` instead of decrypting what it has just sealed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memsvc.crypto.envelope import EnvelopeCipher
from memsvc.domain.models import (
    Memory,
    MemoryChange,
    MemoryVersion,
    Namespace,
    RetentionStatus,
    SealedContent,
    StoredMemory,
    StoredVersion,
    Tier,
    new_version_id,
)


def version_aad_id(version_id: str) -> str:
    """The id a version's ciphertext is bound to: never equal to a memory id, so no swapping."""
    return f"version:{version_id}"


def memory_of(stored: StoredMemory, sealed: SealedContent) -> Memory:
    """A stored row as a domain memory, with its sealed content opened."""
    # Positional, in the fields' order: every result of every query is built here, and keywords
    # cost as much again as the tuple.
    return Memory(
        stored.id,
        stored.namespace,
        sealed.content,
        stored.role,
        stored.kind,
        stored.tags,
        stored.session_id,
        stored.importance,
        sealed.metadata,
        stored.tier,
        stored.created_at,
        stored.updated_at,
        stored.usage_count,
        stored.last_accessed_at,
        stored.quality,
        stored.consistency,
        stored.decay,
        stored.retention_status,
        stored.embedding_version,
        stored.superseded_by,
        stored.idempotency_key,
        stored.expires_at,
        stored.confirmation_count,
        dict(stored.score_reasons),
        stored.vitality,
        stored.source_ids,
        sealed.speaker_name,
        sealed.index_text,
        stored.stale,
        stored.acknowledgement,
    )


def with_plaintext(
    stored: StoredMemory, content: str, metadata: Mapping[str, Any], speaker_name: str = "", index_text: str = ""
) -> Memory:
    """The domain memory of a row whose plaintext the caller holds (it just sealed it)."""
    return memory_of(stored, SealedContent(content, dict(metadata), speaker_name, index_text))


class MemoryCodec:
    """Seals and opens rows and versions under each namespace's data key."""

    def __init__(self, cipher: EnvelopeCipher) -> None:
        self._cipher = cipher

    async def seal(
        self,
        namespace: Namespace,
        memory_id: str,
        content: str,
        metadata: Mapping[str, Any],
        speaker_name: str = "",
        index_text: str = "",
    ) -> bytes:
        """The ciphertext column of a row holding `content`, `metadata`, a speaker and index text."""
        sealed = SealedContent(content, dict(metadata), speaker_name, index_text)
        return await self._cipher.seal(namespace, memory_id, sealed.to_bytes())

    async def open(self, stored: StoredMemory) -> Memory:
        """Decrypt a stored row into a domain memory."""
        plain = await self._cipher.open(stored.namespace, stored.id, stored.ciphertext)
        return memory_of(stored, SealedContent.from_bytes(plain))

    async def open_all(self, rows: Sequence[StoredMemory]) -> list[Memory]:
        return [await self.open(row) for row in rows]

    async def seal_version(
        self,
        *,
        memory_id: str,
        namespace: Namespace,
        at: float,
        actor: str,
        change: MemoryChange,
        fields: Sequence[str],
        description: str,
        tier: Tier,
        retention_status: RetentionStatus,
        importance: float,
        content: str | None,
        metadata: Mapping[str, Any] | None = None,
    ) -> StoredVersion:
        """A version row with the content after the change sealed (none for a content-free version)."""
        version_id = new_version_id()
        ciphertext = None
        if content is not None:
            sealed = SealedContent(content, dict(metadata or {})).to_bytes()
            ciphertext = await self._cipher.seal(namespace, version_aad_id(version_id), sealed)
        return StoredVersion(
            id=version_id,
            memory_id=memory_id,
            namespace=namespace,
            at=at,
            actor=actor,
            change=change,
            fields=tuple(fields),
            description=description,
            tier=tier,
            retention_status=retention_status,
            importance=importance,
            ciphertext=ciphertext,
        )

    async def version_of(
        self,
        memory: Memory,
        *,
        at: float,
        actor: str,
        change: MemoryChange,
        fields: Sequence[str],
        description: str,
        with_content: bool = True,
    ) -> StoredVersion:
        """A version recording `memory` as it is after the change."""
        return await self.seal_version(
            memory_id=memory.id,
            namespace=memory.namespace,
            at=at,
            actor=actor,
            change=change,
            fields=fields,
            description=description,
            tier=memory.tier,
            retention_status=memory.retention_status,
            importance=memory.importance,
            content=memory.content if with_content else None,
            metadata=memory.metadata,
        )

    async def open_version(self, stored: StoredVersion) -> MemoryVersion:
        content, metadata = "", {}
        if stored.ciphertext is not None:
            plain = await self._cipher.open(stored.namespace, version_aad_id(stored.id), stored.ciphertext)
            sealed = SealedContent.from_bytes(plain)
            content, metadata = sealed.content, dict(sealed.metadata)
        return MemoryVersion(
            id=stored.id,
            memory_id=stored.memory_id,
            version=stored.version,
            at=stored.at,
            actor=stored.actor,
            change=stored.change,
            fields=stored.fields,
            description=stored.description,
            tier=stored.tier,
            retention_status=stored.retention_status,
            importance=stored.importance,
            content=content,
            metadata=metadata,
        )

    def forget(self, namespace: Namespace) -> None:
        """Drop the namespace's cached data key (its wrapped key is destroyed by the store)."""
        self._cipher.forget(namespace)
