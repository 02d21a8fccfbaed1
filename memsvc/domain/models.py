"""Plain typed data of the memory domain, shared by the pipeline, the stores and the API layer."""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from functools import cached_property
from types import MappingProxyType
from typing import Any, NamedTuple

import orjson

from memsvc.llm.text import without_questions_asked_back


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"


class MemoryKind(StrEnum):
    FACT = "fact"
    PREFERENCE = "preference"
    EPISODE = "episode"
    DECISION = "decision"
    SUMMARY = "summary"
    RECOMMENDATION = "recommendation"
    COMMITMENT = "commitment"
    # How the user wants the assistant to behave: the user's interaction contract.
    INSTRUCTION = "instruction"


class Tier(StrEnum):
    HOT = "hot"
    WARM = "warm"
    COLD = "cold"


class RetentionStatus(StrEnum):
    ACTIVE = "active"
    SUPERSEDED = "superseded"
    ARCHIVED = "archived"


class Permission(StrEnum):
    """What an API key may do; admin implies write, write implies read."""

    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


@dataclass(frozen=True)
class Principal:
    """Who is calling, as established by the API key: the environment is never chosen by a body."""

    key_id: str
    tenant: str
    project: str
    environment: str
    permissions: frozenset[Permission]

    def allows(self, needed: Permission) -> bool:
        if Permission.ADMIN in self.permissions:
            return True
        if needed is Permission.READ:
            return bool(self.permissions & {Permission.READ, Permission.WRITE})
        return needed in self.permissions


@dataclass(frozen=True)
class Namespace:
    """One user's memory space: tenant / project / environment / user."""

    tenant: str
    project: str
    environment: str
    user_id: str

    # Cached: every stage names the namespace by its digest (partitions, rows, cache keys).
    @cached_property
    def key(self) -> str:
        # The unit separator cannot appear in validated identifiers, so the join is unambiguous.
        return "\x1f".join((self.tenant, self.project, self.environment, self.user_id))

    @cached_property
    def digest(self) -> str:
        """A stable, opaque name for the namespace, safe for index names and cache keys."""
        return hashlib.sha256(self.key.encode()).hexdigest()[:32]

    @classmethod
    def of(cls, principal: Principal, user_id: str) -> Namespace:
        return cls(principal.tenant, principal.project, principal.environment, user_id)


def new_memory_id(now_s: float | None = None) -> str:
    """A 32-hex-digit id that sorts by creation time (microseconds) with 72 random bits."""
    micros = int((time.time() if now_s is None else now_s) * 1_000_000)
    return f"{micros:014x}{secrets.token_hex(9)}"


def utc_from_s(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


class Memory(NamedTuple):
    """A decrypted memory as the domain sees it. Times are UNIX seconds (UTC).

    A NamedTuple, as `StoredMemory`: every result of every query is one. `_replace` changes a
    copy."""

    id: str
    namespace: Namespace
    content: str
    role: Role = Role.USER
    kind: MemoryKind = MemoryKind.FACT
    tags: tuple[str, ...] = ()
    session_id: str = ""
    importance: float = 0.5
    metadata: Mapping[str, Any] = MappingProxyType({})
    tier: Tier = Tier.HOT
    created_at: float = 0.0
    updated_at: float = 0.0
    usage_count: int = 0
    last_accessed_at: float | None = None
    quality: float = 0.5
    consistency: float = 1.0
    decay: float = 1.0
    retention_status: RetentionStatus = RetentionStatus.ACTIVE
    embedding_version: str = ""
    superseded_by: str = ""
    idempotency_key: str = ""
    expires_at: float | None = None
    confirmation_count: int = 1
    # Why each server-owned score has its value, by signal name (importance, quality, ...).
    score_reasons: Mapping[str, str] = MappingProxyType({})
    vitality: float = 1.0
    # The memories this one was derived from (a conversation's turns), oldest first.
    source_ids: tuple[str, ...] = ()
    # The speaker of a conversation turn, when the caller named one (sealed with the content).
    speaker_name: str = ""
    # What the lexical index holds for this memory when it is not the bare content: a turn with
    # the turn it answers and its date (sealed with the content; never returned to callers).
    index_text: str = ""
    # A session summary that may state what is no longer true (see StoredMemory.stale).
    stale: bool = False
    # A conversation turn that only acknowledges or reacts (see StoredMemory.acknowledgement).
    acknowledgement: bool = False

    @property
    def outdated(self) -> bool:
        """What the memory states was replaced: it was superseded, or it is a turn whose
        extracted memory was (`superseded_by` names the newer memory either way)."""
        return bool(self.superseded_by)

    @property
    def lexical_text(self) -> str:
        return self.index_text or self.content

    @property
    def embedding_text(self) -> str:
        return embedding_text(self.content, self.speaker_name)


class StoredMemory(NamedTuple):
    """A memory as the record store keeps it: content and metadata only as ciphertext.

    A NamedTuple, as a row is: a query decodes one per candidate (about 30), and a tuple of its
    29 fields is built in a fifth of a frozen dataclass's time. `_replace` changes a copy."""

    id: str
    namespace: Namespace
    ciphertext: bytes
    role: Role
    kind: MemoryKind
    tags: tuple[str, ...]
    session_id: str
    importance: float
    tier: Tier
    created_at: float
    updated_at: float
    usage_count: int
    last_accessed_at: float | None
    quality: float
    consistency: float
    decay: float
    retention_status: RetentionStatus
    embedding_version: str
    superseded_by: str
    idempotency_key: str
    indexed: bool
    revision: int = 0
    expires_at: float | None = None
    confirmation_count: int = 1
    score_reasons: Mapping[str, str] = MappingProxyType({})
    vitality: float = 1.0
    source_ids: tuple[str, ...] = ()
    # A conversation turn whose extracted memories and session summary are not written yet; the
    # reconciler finishes them after a crash.
    extraction_pending: bool = False
    # A session summary quoting turns whose extracted memories were since superseded or deleted.
    stale: bool = False
    # A conversation turn that only acknowledges or reacts ("Good to know!") and states nothing:
    # never a result of its own, only context of the turn it answers.
    acknowledgement: bool = False

    @property
    def outdated(self) -> bool:
        return bool(self.superseded_by)


@dataclass(frozen=True)
class SealedContent:
    """What the cipher seals together: the memory's text, metadata, speaker and index text."""

    content: str
    metadata: Mapping[str, Any]
    speaker_name: str = ""
    index_text: str = ""

    def to_bytes(self) -> bytes:
        obj: dict[str, Any] = {"c": self.content, "m": self.metadata}
        if self.speaker_name:
            obj["n"] = self.speaker_name
        if self.index_text:
            obj["x"] = self.index_text
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> SealedContent:
        try:
            obj = orjson.loads(data)  # opened for every result: a fifth of the json module's time
        except orjson.JSONDecodeError:
            obj = json.loads(data)  # what orjson refuses and json.dumps writes: NaN and Infinity in metadata
        return cls(
            content=obj["c"], metadata=obj.get("m") or {}, speaker_name=obj.get("n", ""), index_text=obj.get("x", "")
        )


def metadata_matches(metadata: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Every key of `wanted` is in `metadata` with an equal value; nested maps match recursively."""
    for key, value in wanted.items():
        if key not in metadata:
            return False
        have = metadata[key]
        if isinstance(value, Mapping):
            if not isinstance(have, Mapping) or not metadata_matches(have, value):
                return False
        elif have != value:
            return False
    return True


@dataclass(frozen=True)
class MemoryFilter:
    """Which memories a query or listing considers. Every set field must match."""

    tier: Tier | None = None
    tags_any: tuple[str, ...] = ()
    session_id: str = ""
    # Any of these sessions (set by recall, not by callers: a named person's conversations).
    session_ids: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    min_importance: float | None = None
    roles: tuple[Role, ...] = ()
    kinds: tuple[MemoryKind, ...] = ()
    created_after: float | None = None
    created_before: float | None = None
    include_inactive: bool = False

    def admits(self, memory: Memory) -> bool:
        """Whether `memory` is one the filter considers. `min_importance` is not checked: it is the
        rank stage's relevance gate, not membership (context neighbours are not ranked)."""
        return (
            (self.tier is None or memory.tier is self.tier)
            and (not self.tags_any or bool(set(self.tags_any) & set(memory.tags)))
            and (not self.session_id or memory.session_id == self.session_id)
            and (not self.session_ids or memory.session_id in self.session_ids)
            and (not self.roles or memory.role in self.roles)
            and (not self.kinds or memory.kind in self.kinds)
            and (self.created_after is None or memory.created_at >= self.created_after)
            and (self.created_before is None or memory.created_at < self.created_before)
            and (self.include_inactive or memory.retention_status is RetentionStatus.ACTIVE)
            and metadata_matches(memory.metadata, self.metadata)
        )

    def fingerprint(self) -> str:
        """A stable hash of the filter, for cache keys and page-token binding."""
        payload = {
            "tier": self.tier.value if self.tier else None,
            "tags": sorted(self.tags_any),
            "session": self.session_id,
            "sessions": sorted(self.session_ids),
            "meta": self.metadata,
            "imp": self.min_importance,
            "roles": sorted(r.value for r in self.roles),
            "kinds": sorted(k.value for k in self.kinds),
            "after": self.created_after,
            "before": self.created_before,
            "inactive": self.include_inactive,
        }
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class NewMemory:
    """A validated memory to write (before ids, timestamps and scores are assigned)."""

    content: str
    role: Role = Role.USER
    # None: the write path classifies the content (`memsvc.pipeline.write.kinds`).
    kind: MemoryKind | None = None
    tags: tuple[str, ...] = ()
    session_id: str = ""
    importance: float | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    tier: Tier = Tier.HOT
    created_at: float | None = None
    idempotency_key: str = ""
    expires_at: float | None = None
    # Set by the server's conversation path, never by a caller's NewMemory.
    source_ids: tuple[str, ...] = ()
    speaker_name: str = ""
    index_text: str = ""
    extraction_pending: bool = False
    acknowledgement: bool = False

    @property
    def embedding_text(self) -> str:
        return embedding_text(self.content, self.speaker_name)


def spoken_text(content: str, speaker_name: str) -> str:
    """A memory as read: a named speaker's turn says who said it ("Melanie: Luna and Oliver!")."""
    return f"{speaker_name}: {content}" if speaker_name else content


def embedding_text(content: str, speaker_name: str) -> str:
    """What a memory's vector is made from: a named speaker's turn keeps who said it, and leaves
    out the questions it ends on once it has stated something.

    Named speakers are people talking with each other (AddConversation's `name`; a user talking
    to an assistant is told apart by role). Between them a turn that ends on a question hands the
    word back ("Wow, love that painting! What inspired you?"): the question is about the other
    person, and in the vector it pulls a reaction towards every search for its subject, above
    the turns that state something about it. The lexical text keeps the whole turn, and a turn
    that is all questions keeps them. LoCoMo dev R@7 (overall / multi-hop): DIRECT 0.716 / 0.399
    -> 0.734 / 0.431, APPLICABILITY 0.764 / 0.516 -> 0.764 / 0.522 (docs/retrieval.md).
    """
    return spoken_text(without_questions_asked_back(content), speaker_name) if speaker_name else content


@dataclass(frozen=True)
class SpokenTurn:
    """One turn of a conversation handed to AddConversation."""

    role: Role
    content: str
    created_at: float | None = None
    speaker_name: str = ""


@dataclass(frozen=True)
class MemoryChanges:
    """A validated partial update; None means unchanged."""

    content: str | None = None
    tags: tuple[str, ...] | None = None
    tier: Tier | None = None
    importance: float | None = None
    metadata: Mapping[str, Any] | None = None
    # A new expiry time; 0 removes the expiry.
    expires_at: float | None = None
    # Set by the conversation path when it revises a session summary, never by a caller.
    source_ids: tuple[str, ...] | None = None


class ScoreBreakdown(NamedTuple):
    """Each signal of a memory's score; a NamedTuple (built in a third of a frozen dataclass's
    time): a query ranks every hydrated candidate."""

    semantic: float = 0.0
    recency: float = 0.0
    importance: float = 0.0
    usage: float = 0.0
    quality: float = 0.0
    consistency: float = 0.0
    decay: float = 0.0
    lexical: float = 0.0
    dense_rank: int = 0
    lexical_rank: int = 0
    # The weight the weighted sum used in place of `semantic`: the candidate's fused dense +
    # lexical score relative to the query's best (see RankStage); None without a fused score.
    fused: float | None = None
    # How much of the query the memory matches on its own, in [0, 1], comparable across queries
    # and stores (see `absolute_relevance`): what the relevance floor compares.
    relevance: float = 0.0
    # The share of the query's IDF weight among the memory's terms (LexicalHit.coverage).
    term_coverage: float = 0.0
    # 1, or less for an outdated memory when the query asks about the present: the score's factor.
    currency: float = 1.0
    # `relevance` by the query's words other than the names of people it names: what the
    # relevance floor compares where one memory clearly matches those (rank.above_the_floor).
    topic_relevance: float = 0.0


@dataclass(frozen=True, slots=True)
class RankedMemory:
    memory: Memory
    score: float
    breakdown: ScoreBreakdown
    matched_queries: tuple[str, ...] = ()
    # What the memory was derived from, when the query asked for sources.
    sources: tuple[Memory, ...] = ()
    # The turns around it in its session, oldest first, when the query asked for context.
    context: tuple[Memory, ...] = ()


class RecallEvent(NamedTuple):
    """One memory returned by one query, for bookkeeping and re-evaluation (a NamedTuple: one
    per result of every query)."""

    memory_id: str
    namespace: Namespace
    request_id: str
    score: float
    rank: int
    at: float


@dataclass(frozen=True)
class ApiKeyRecord:
    key_id: str
    secret_hash: bytes
    tenant: str
    project: str
    environment: str
    permissions: frozenset[Permission]
    created_at: float
    expires_at: float | None = None
    revoked_at: float | None = None
    description: str = ""


@dataclass(frozen=True)
class WrappedDataKey:
    """A per-namespace data key, encrypted under the master key of `master_version`."""

    namespace_digest: str
    version: int
    master_version: int
    wrapped: bytes


@dataclass(frozen=True)
class WrappedSecret:
    """A service-wide secret (the key derivation root), encrypted under the master key of
    `master_version`."""

    master_version: int
    wrapped: bytes


class MemoryChange(StrEnum):
    """What a version of a memory records."""

    CREATE = "create"
    UPDATE = "update"
    SUPERSEDE = "supersede"
    CONFIRM = "confirm"
    TIER_MOVE = "tier_move"
    DELETE = "delete"
    IMPORT = "import"


# Actors of changes the service makes on its own (callers are named by their API key id).
ACTOR_MAINTENANCE = "system:maintenance"
ACTOR_WRITE_PATH = "system:write-path"


@dataclass(frozen=True)
class StoredVersion:
    """One version of a memory as the record store keeps it; content only as ciphertext.

    The version number is assigned by the store when the row is inserted (max + 1 per memory).
    """

    id: str
    memory_id: str
    namespace: Namespace
    at: float
    actor: str
    change: MemoryChange
    fields: tuple[str, ...]
    description: str
    tier: Tier
    retention_status: RetentionStatus
    importance: float
    ciphertext: bytes | None
    version: int = 0


@dataclass(frozen=True)
class MemoryVersion:
    """A decrypted version of a memory."""

    id: str
    memory_id: str
    version: int
    at: float
    actor: str
    change: MemoryChange
    fields: tuple[str, ...]
    description: str
    tier: Tier
    retention_status: RetentionStatus
    importance: float
    content: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)


def new_version_id() -> str:
    return secrets.token_hex(16)
