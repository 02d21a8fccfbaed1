"""Plain typed values of the memsvc.v1 contract: enums and frozen dataclasses, with proto conversions."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from google.protobuf import json_format, struct_pb2, timestamp_pb2

from memsvc_client._gen.memsvc.v1 import memory_pb2, query_service_pb2, write_service_pb2

_E = TypeVar("_E", bound=enum.IntEnum)


class Role(enum.IntEnum):
    """Who produced a memory (memsvc.v1.Role)."""

    UNSPECIFIED = 0
    USER = 1
    ASSISTANT = 2
    SYSTEM = 3


class MemoryKind(enum.IntEnum):
    """What sort of knowledge a memory holds (memsvc.v1.MemoryKind)."""

    UNSPECIFIED = 0
    FACT = 1
    PREFERENCE = 2
    EPISODE = 3
    DECISION = 4
    SUMMARY = 5
    RECOMMENDATION = 6
    COMMITMENT = 7
    INSTRUCTION = 8


class Tier(enum.IntEnum):
    """The storage temperature of a memory (memsvc.v1.Tier); UNSPECIFIED means every tier in filters."""

    UNSPECIFIED = 0
    HOT = 1
    WARM = 2
    COLD = 3


class RetentionStatus(enum.IntEnum):
    """Whether a memory is part of the current truth (memsvc.v1.RetentionStatus)."""

    UNSPECIFIED = 0
    ACTIVE = 1
    SUPERSEDED = 2
    ARCHIVED = 3


class QueryMode(enum.IntEnum):
    """The retrieval strategy of a query (memsvc.v1.QueryMode)."""

    UNSPECIFIED = 0
    DIRECT = 1
    MULTI_QUERY = 2
    FUSION = 3
    APPLICABILITY = 4
    AGENT = 5
    AUTO = 6


def _enum(kind: type[_E], value: int) -> _E:
    """The enum member of a wire value; a value this client does not know yet reads as UNSPECIFIED."""
    try:
        return kind(value)
    except ValueError:
        return kind(0)


def _time(message: Any, name: str) -> datetime | None:
    """An aware UTC datetime of a Timestamp field, or None when the field is unset."""
    if not message.HasField(name):
        return None
    stamp: timestamp_pb2.Timestamp = getattr(message, name)
    return stamp.ToDatetime(tzinfo=UTC)


# The generated classes live in a private descriptor pool (see generate.py), so their
# Timestamp and Struct fields are filled in place rather than copied from google.protobuf values.


def set_time(target: timestamp_pb2.Timestamp, value: datetime) -> None:
    """Set a Timestamp field; a naive datetime is taken as UTC."""
    target.FromDatetime(value if value.tzinfo is not None else value.replace(tzinfo=UTC))


def set_struct(target: struct_pb2.Struct, value: Mapping[str, Any]) -> None:
    target.Clear()
    target.update(dict(value))


def _mapping(struct: struct_pb2.Struct) -> dict[str, Any]:
    return json_format.MessageToDict(struct)


@dataclass(frozen=True)
class NewMemory:
    """One memory to store; only content is required (memsvc.v1.NewMemory).

    An ``idempotency_key`` (unique per user) makes repeating the item safe: the server returns
    the memory stored the first time. When every item of an ``add_memories`` call has one, the
    client retries the call on UNAVAILABLE.
    """

    content: str
    role: Role = Role.UNSPECIFIED
    kind: MemoryKind = MemoryKind.UNSPECIFIED
    tags: Sequence[str] = ()
    session_id: str = ""
    importance: float | None = None
    metadata: Mapping[str, Any] | None = field(default=None, hash=False)
    tier: Tier = Tier.UNSPECIFIED
    create_time: datetime | None = None
    idempotency_key: str = ""

    def to_proto(self) -> write_service_pb2.NewMemory:
        message = write_service_pb2.NewMemory(
            content=self.content,
            role=cast("memory_pb2.Role", int(self.role)),
            kind=cast("memory_pb2.MemoryKind", int(self.kind)),
            tags=list(self.tags),
            session_id=self.session_id,
            tier=cast("memory_pb2.Tier", int(self.tier)),
            idempotency_key=self.idempotency_key,
        )
        if self.importance is not None:
            message.importance = self.importance
        if self.metadata is not None:
            set_struct(message.metadata, self.metadata)
        if self.create_time is not None:
            set_time(message.create_time, self.create_time)
        return message


@dataclass(frozen=True)
class MemoryFilter:
    """Which memories a query or a listing considers; every set field must match (memsvc.v1.MemoryFilter).

    ``min_importance`` left as None lets queries apply the server's 0.5 gate; set 0 to see every memory.
    """

    tier: Tier = Tier.UNSPECIFIED
    tags_any: Sequence[str] = ()
    session_id: str = ""
    metadata: Mapping[str, Any] | None = field(default=None, hash=False)
    min_importance: float | None = None
    roles: Sequence[Role] = ()
    kinds: Sequence[MemoryKind] = ()
    create_time_after: datetime | None = None
    create_time_before: datetime | None = None
    include_inactive: bool = False

    def to_proto(self) -> memory_pb2.MemoryFilter:
        message = memory_pb2.MemoryFilter(
            tier=cast("memory_pb2.Tier", int(self.tier)),
            tags_any=list(self.tags_any),
            session_id=self.session_id,
            roles=[cast("memory_pb2.Role", int(r)) for r in self.roles],
            kinds=[cast("memory_pb2.MemoryKind", int(k)) for k in self.kinds],
            include_inactive=self.include_inactive,
        )
        if self.metadata is not None:
            set_struct(message.metadata, self.metadata)
        if self.min_importance is not None:
            message.min_importance = self.min_importance
        if self.create_time_after is not None:
            set_time(message.create_time_after, self.create_time_after)
        if self.create_time_before is not None:
            set_time(message.create_time_before, self.create_time_before)
        return message


@dataclass(frozen=True)
class ConversationTurn:
    """One turn of a conversation: a recent turn a query comes from, or a turn to remember
    (add_conversation), where `create_time` (when it was said) and `name` (the speaker's) count."""

    role: Role
    content: str
    create_time: datetime | None = None
    name: str = ""

    def to_proto(self) -> query_service_pb2.ConversationTurn:
        turn = query_service_pb2.ConversationTurn(
            role=cast("memory_pb2.Role", int(self.role)), content=self.content, name=self.name
        )
        if self.create_time is not None:
            set_time(turn.create_time, self.create_time)
        return turn


@dataclass(frozen=True)
class Memory:
    """One stored memory of one user, as the service returns it (memsvc.v1.Memory)."""

    id: str
    user_id: str
    content: str
    role: Role
    kind: MemoryKind
    tags: tuple[str, ...]
    session_id: str
    importance: float
    metadata: Mapping[str, Any] = field(hash=False)
    tier: Tier
    create_time: datetime | None
    update_time: datetime | None
    usage_count: int
    last_access_time: datetime | None
    quality: float
    consistency: float
    decay: float
    retention_status: RetentionStatus
    embedding_version: str
    superseded_by: str
    # The memories this one was derived from (the turns of an extracted memory or a summary).
    source_memory_ids: tuple[str, ...] = ()
    # The speaker's name of a conversation turn.
    speaker_name: str = ""
    # True for a summary one of whose sources changed since it was written.
    stale: bool = False
    # A later memory replaced what this one states (Memory.outdated): history, not the present.
    outdated: bool = False
    # A turn that only acknowledges or reacts: context of the turn it answers, never a result.
    acknowledgement: bool = False

    @classmethod
    def from_proto(cls, message: memory_pb2.Memory) -> Memory:
        return cls(
            id=message.id,
            user_id=message.user_id,
            content=message.content,
            role=_enum(Role, message.role),
            kind=_enum(MemoryKind, message.kind),
            tags=tuple(message.tags),
            session_id=message.session_id,
            importance=message.importance,
            metadata=_mapping(message.metadata),
            tier=_enum(Tier, message.tier),
            create_time=_time(message, "create_time"),
            update_time=_time(message, "update_time"),
            usage_count=message.usage_count,
            last_access_time=_time(message, "last_access_time"),
            quality=message.quality,
            consistency=message.consistency,
            decay=message.decay,
            retention_status=_enum(RetentionStatus, message.retention_status),
            embedding_version=message.embedding_version,
            superseded_by=message.superseded_by,
            source_memory_ids=tuple(message.source_memory_ids),
            speaker_name=message.speaker_name,
            stale=message.stale,
            outdated=message.outdated,
            acknowledgement=message.acknowledgement,
        )


@dataclass(frozen=True)
class AddResult:
    """What add_memories stored: the memories in request order, and whether each was new."""

    memories: tuple[Memory, ...]
    # False where the item's idempotency key had been stored before and that memory came back.
    created: tuple[bool, ...]

    @classmethod
    def from_proto(cls, message: write_service_pb2.AddMemoriesResponse) -> AddResult:
        return cls(tuple(Memory.from_proto(m) for m in message.memories), tuple(message.created))


@dataclass(frozen=True)
class MemoryPage:
    """One page of a listing; next_page_token is empty on the last page."""

    memories: tuple[Memory, ...]
    next_page_token: str

    @classmethod
    def from_proto(cls, message: write_service_pb2.ListMemoriesResponse) -> MemoryPage:
        return cls(tuple(Memory.from_proto(m) for m in message.memories), message.next_page_token)


@dataclass(frozen=True)
class ScoreBreakdown:
    """The ranking signals of one returned memory, each in [0, 1] except the ranks."""

    semantic: float
    recency: float
    importance: float
    usage: float
    quality: float
    consistency: float
    decay: float
    lexical: float
    dense_rank: int
    lexical_rank: int
    # How much the memory matches the query on its own, comparable across queries and stores.
    relevance: float = 0.0
    # The share of the query's IDF weight among the memory's words.
    term_coverage: float = 0.0
    # 1, or lower for an outdated memory when the query asks about the present.
    currency: float = 1.0

    @classmethod
    def from_proto(cls, message: memory_pb2.ScoreBreakdown) -> ScoreBreakdown:
        return cls(
            semantic=message.semantic,
            recency=message.recency,
            importance=message.importance,
            usage=message.usage,
            quality=message.quality,
            consistency=message.consistency,
            decay=message.decay,
            lexical=message.lexical,
            dense_rank=message.dense_rank,
            lexical_rank=message.lexical_rank,
            relevance=message.relevance,
            term_coverage=message.term_coverage,
            currency=message.currency,
        )


@dataclass(frozen=True)
class RankedMemory:
    """One memory returned by a query, with its score and the signals behind it."""

    memory: Memory
    score: float
    score_breakdown: ScoreBreakdown
    matched_queries: tuple[str, ...]
    # What a derived memory came from, oldest first, when the query set include_sources.
    sources: tuple[Memory, ...] = ()
    # The turns around it in its session, oldest first, when the query set context_window.
    context: tuple[Memory, ...] = ()

    @classmethod
    def from_proto(cls, message: query_service_pb2.RankedMemory) -> RankedMemory:
        return cls(
            memory=Memory.from_proto(message.memory),
            score=message.score,
            score_breakdown=ScoreBreakdown.from_proto(message.score_breakdown),
            matched_queries=tuple(message.matched_queries),
            sources=tuple(Memory.from_proto(m) for m in message.sources),
            context=tuple(Memory.from_proto(m) for m in message.context),
        )


@dataclass(frozen=True)
class StageTiming:
    """The time one retrieval stage took."""

    stage: str
    duration_ms: float


@dataclass(frozen=True)
class QueryReport:
    """What a query did to produce its answer (memsvc.v1.QueryReport)."""

    mode: QueryMode
    selected_tool: str
    queries: tuple[str, ...]
    searches: int
    llm_calls: int
    llm_time_ms: float
    input_tokens: int
    output_tokens: int
    stages: tuple[StageTiming, ...]
    cache_hit: bool
    embedding_cache_hit: bool
    candidates_recalled: int
    dropped_by_importance: int
    # True when part of the pipeline was unavailable and the answer is partial.
    degraded: bool
    notes: tuple[str, ...]
    confidence: float
    # Results the relevance floor took away.
    dropped_below_relevance: int = 0

    @classmethod
    def from_proto(cls, message: query_service_pb2.QueryReport) -> QueryReport:
        return cls(
            mode=_enum(QueryMode, message.mode),
            selected_tool=message.selected_tool,
            queries=tuple(message.queries),
            searches=message.searches,
            llm_calls=message.llm_calls,
            llm_time_ms=message.llm_time_ms,
            input_tokens=message.input_tokens,
            output_tokens=message.output_tokens,
            stages=tuple(StageTiming(s.stage, s.duration_ms) for s in message.stages),
            cache_hit=message.cache_hit,
            embedding_cache_hit=message.embedding_cache_hit,
            candidates_recalled=message.candidates_recalled,
            dropped_by_importance=message.dropped_by_importance,
            degraded=message.degraded,
            notes=tuple(message.notes),
            confidence=message.confidence,
            dropped_below_relevance=message.dropped_below_relevance,
        )


@dataclass(frozen=True)
class QueryResult:
    """The answer of a query: memories best first, an explanation and a report of the retrieval."""

    memories: tuple[RankedMemory, ...]
    explanation: str
    request_id: str
    report: QueryReport
    # The composed context block (QueryMode.APPLICABILITY, or include_context); else empty.
    context: str

    @classmethod
    def from_proto(cls, message: query_service_pb2.QueryResponse) -> QueryResult:
        return cls(
            memories=tuple(RankedMemory.from_proto(m) for m in message.memories),
            explanation=message.explanation,
            request_id=message.request_id,
            report=QueryReport.from_proto(message.report),
            context=message.context,
        )


class Extractor(enum.IntEnum):
    """What decided which memories a conversation's turns state (memsvc.v1.Extractor)."""

    UNSPECIFIED = 0
    LLM = 1
    RULES = 2
    RULES_AFTER_LLM_FAILURE = 3
    NONE = 4


class WriteOutcome(enum.IntEnum):
    """What the server did with one memory it was given to store (memsvc.v1.WriteOutcome)."""

    UNSPECIFIED = 0
    CREATED = 1
    IDEMPOTENT_REPLAY = 2
    # The item repeated a memory the user already had: that one was confirmed and returned.
    CONFIRMED_EXISTING = 3


@dataclass(frozen=True)
class WriteResult:
    """What the server did with one memory it was given, and why (memsvc.v1.AddMemoryResult)."""

    outcome: WriteOutcome
    # One line, such as the similarity that made the item a repeat of an existing memory.
    reason: str
    # The older memories the item contradicted; they are now superseded by it.
    superseded_ids: tuple[str, ...]

    @classmethod
    def from_proto(cls, message: write_service_pb2.AddMemoryResult) -> WriteResult:
        return cls(_enum(WriteOutcome, message.outcome), message.reason, tuple(message.superseded_ids))


@dataclass(frozen=True)
class ConversationResult:
    """What add_conversation stored: the turns (in request order, each stored once per session
    index), the memories extracted from the new ones, and the session's summary, if any."""

    turns: tuple[Memory, ...]
    # False where the session already held the turn at that index and that memory came back.
    turns_created: tuple[bool, ...]
    extracted: tuple[Memory, ...]
    # For each extracted memory: created, or an existing memory confirmed, and what it superseded.
    extracted_results: tuple[WriteResult, ...]
    summary: Memory | None
    extractor: Extractor
    extractor_reason: str
    llm_tokens: int

    @classmethod
    def from_proto(cls, message: write_service_pb2.AddConversationResponse) -> ConversationResult:
        created = write_service_pb2.WRITE_OUTCOME_CREATED
        return cls(
            turns=tuple(Memory.from_proto(m) for m in message.turns),
            turns_created=tuple(r.outcome == created for r in message.turn_results),
            extracted=tuple(Memory.from_proto(m) for m in message.extracted),
            extracted_results=tuple(WriteResult.from_proto(r) for r in message.extracted_results),
            summary=Memory.from_proto(message.summary) if message.HasField("summary") else None,
            extractor=_enum(Extractor, message.extractor),
            extractor_reason=message.extractor_reason,
            llm_tokens=message.llm_tokens,
        )
