"""Translation between generated protobuf messages and domain types (and nothing else)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from google.protobuf import json_format, struct_pb2, timestamp_pb2

from memsvc.domain.models import (
    Memory,
    MemoryChange,
    MemoryChanges,
    MemoryFilter,
    MemoryKind,
    MemoryVersion,
    Namespace,
    NewMemory,
    RankedMemory,
    RetentionStatus,
    Role,
    ScoreBreakdown,
    SpokenTurn,
    Tier,
)
from memsvc.errors import InvalidArgument
from memsvc.pipeline.context import QueryInput, QueryMode, QueryReport, Turn
from memsvc.v1 import memory_pb2, query_service_pb2, write_service_pb2

E = TypeVar("E")

ROLES: dict[int, Role] = {
    memory_pb2.ROLE_USER: Role.USER,
    memory_pb2.ROLE_ASSISTANT: Role.ASSISTANT,
    memory_pb2.ROLE_SYSTEM: Role.SYSTEM,
}
KINDS: dict[int, MemoryKind] = {
    memory_pb2.MEMORY_KIND_FACT: MemoryKind.FACT,
    memory_pb2.MEMORY_KIND_PREFERENCE: MemoryKind.PREFERENCE,
    memory_pb2.MEMORY_KIND_EPISODE: MemoryKind.EPISODE,
    memory_pb2.MEMORY_KIND_DECISION: MemoryKind.DECISION,
    memory_pb2.MEMORY_KIND_SUMMARY: MemoryKind.SUMMARY,
    memory_pb2.MEMORY_KIND_RECOMMENDATION: MemoryKind.RECOMMENDATION,
    memory_pb2.MEMORY_KIND_COMMITMENT: MemoryKind.COMMITMENT,
}
TIERS: dict[int, Tier] = {
    memory_pb2.TIER_HOT: Tier.HOT,
    memory_pb2.TIER_WARM: Tier.WARM,
    memory_pb2.TIER_COLD: Tier.COLD,
}
STATUSES: dict[int, RetentionStatus] = {
    memory_pb2.RETENTION_STATUS_ACTIVE: RetentionStatus.ACTIVE,
    memory_pb2.RETENTION_STATUS_SUPERSEDED: RetentionStatus.SUPERSEDED,
    memory_pb2.RETENTION_STATUS_ARCHIVED: RetentionStatus.ARCHIVED,
}
MODES: dict[int, QueryMode] = {
    query_service_pb2.QUERY_MODE_UNSPECIFIED: QueryMode.DIRECT,
    query_service_pb2.QUERY_MODE_DIRECT: QueryMode.DIRECT,
    query_service_pb2.QUERY_MODE_MULTI_QUERY: QueryMode.MULTI_QUERY,
    query_service_pb2.QUERY_MODE_FUSION: QueryMode.FUSION,
    query_service_pb2.QUERY_MODE_APPLICABILITY: QueryMode.APPLICABILITY,
    query_service_pb2.QUERY_MODE_AGENT: QueryMode.AGENT,
    query_service_pb2.QUERY_MODE_AUTO: QueryMode.AUTO,
}
MODE_ENUMS: dict[QueryMode, Any] = {
    name: number for number, name in MODES.items() if number != query_service_pb2.QUERY_MODE_UNSPECIFIED
}


def _invert(mapping: Mapping[int, E]) -> dict[E, Any]:
    return {v: k for k, v in mapping.items()}


ROLE_ENUMS, KIND_ENUMS, TIER_ENUMS, STATUS_ENUMS = _invert(ROLES), _invert(KINDS), _invert(TIERS), _invert(STATUSES)


def enum_value(mapping: Mapping[int, E], value: int, field: str, default: E | None) -> E | None:
    """Map an enum number; UNSPECIFIED (0) gives `default`, an unknown number is INVALID_ARGUMENT."""
    if value == 0:
        return default
    if value not in mapping:
        raise InvalidArgument.field(field, f"unknown value {value}")
    return mapping[value]


def _required(value: E | None) -> E:
    assert value is not None
    return value


def struct_to_dict(struct: struct_pb2.Struct) -> dict[str, Any]:
    data: dict[str, Any] = json_format.MessageToDict(struct)
    return data


def dict_to_struct(data: Mapping[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(dict(data))
    return struct


def ts_to_s(ts: timestamp_pb2.Timestamp) -> float:
    return float(ts.seconds) + ts.nanos / 1e9


def s_to_ts(seconds: float) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


def new_memory(msg: write_service_pb2.NewMemory, field: str) -> NewMemory:
    return NewMemory(
        content=msg.content,
        role=_required(enum_value(ROLES, msg.role, f"{field}.role", Role.USER)),
        kind=_required(enum_value(KINDS, msg.kind, f"{field}.kind", MemoryKind.FACT)),
        tags=tuple(msg.tags),
        session_id=msg.session_id,
        importance=msg.importance if msg.HasField("importance") else None,
        metadata=struct_to_dict(msg.metadata),
        tier=_required(enum_value(TIERS, msg.tier, f"{field}.tier", Tier.HOT)),
        created_at=ts_to_s(msg.create_time) if msg.HasField("create_time") else None,
        idempotency_key=msg.idempotency_key,
        expires_at=ts_to_s(msg.expire_time) if msg.HasField("expire_time") else None,
    )


def spoken_turn(msg: query_service_pb2.ConversationTurn, field: str) -> SpokenTurn:
    return SpokenTurn(
        role=_required(enum_value(ROLES, msg.role, f"{field}.role", Role.USER)),
        content=msg.content,
        created_at=ts_to_s(msg.create_time) if msg.HasField("create_time") else None,
        speaker_name=msg.name,
    )


UPDATE_FIELDS = ("content", "tags", "tier", "importance", "metadata", "expire_time")


def memory_changes(request: write_service_pb2.UpdateMemoryRequest) -> MemoryChanges:
    paths = list(request.update_mask.paths)
    unknown = [p for p in paths if p not in UPDATE_FIELDS]
    if unknown:
        raise InvalidArgument.field("update_mask", f"unknown or immutable fields {unknown}; allowed: {UPDATE_FIELDS}")
    m = request.memory
    return MemoryChanges(
        content=m.content if "content" in paths else None,
        tags=tuple(m.tags) if "tags" in paths else None,
        tier=enum_value(TIERS, m.tier, "memory.tier", None) if "tier" in paths else None,
        importance=m.importance if "importance" in paths else None,
        metadata=struct_to_dict(m.metadata) if "metadata" in paths else None,
        expires_at=(ts_to_s(m.expire_time) if m.HasField("expire_time") else 0.0) if "expire_time" in paths else None,
    )


def memory_filter(msg: memory_pb2.MemoryFilter, field: str = "filter") -> MemoryFilter:
    return MemoryFilter(
        tier=enum_value(TIERS, msg.tier, f"{field}.tier", None),
        tags_any=tuple(msg.tags_any),
        session_id=msg.session_id,
        metadata=struct_to_dict(msg.metadata),
        min_importance=msg.min_importance if msg.HasField("min_importance") else None,
        roles=tuple(_required(enum_value(ROLES, r, f"{field}.roles", Role.USER)) for r in msg.roles),
        kinds=tuple(_required(enum_value(KINDS, k, f"{field}.kinds", MemoryKind.FACT)) for k in msg.kinds),
        created_after=ts_to_s(msg.create_time_after) if msg.HasField("create_time_after") else None,
        created_before=ts_to_s(msg.create_time_before) if msg.HasField("create_time_before") else None,
        include_inactive=msg.include_inactive,
    )


def query_input(request: query_service_pb2.QueryRequest) -> QueryInput:
    mode = enum_value(MODES, request.mode, "mode", QueryMode.DIRECT)
    return QueryInput(
        user_id=request.user_id,
        query=request.query,
        limit=request.limit,
        memory_filter=memory_filter(request.filter),
        mode=_required(mode),
        additional_queries=tuple(request.additional_queries),
        recent_turns=tuple(
            Turn(_required(enum_value(ROLES, t.role, f"recent_turns[{i}].role", Role.USER)), t.content)
            for i, t in enumerate(request.recent_turns)
        ),
        context_window=request.context_window,
        include_sources=request.include_sources,
        min_relevance=request.min_relevance if request.HasField("min_relevance") else None,
        token_budget=request.token_budget,
        skip_cache=request.skip_cache,
    )


def memory_message(m: Memory) -> memory_pb2.Memory:
    msg = memory_pb2.Memory(
        id=m.id,
        user_id=m.namespace.user_id,
        content=m.content,
        role=ROLE_ENUMS[m.role],
        kind=KIND_ENUMS[m.kind],
        tags=list(m.tags),
        session_id=m.session_id,
        importance=m.importance,
        tier=TIER_ENUMS[m.tier],
        create_time=s_to_ts(m.created_at),
        update_time=s_to_ts(m.updated_at),
        usage_count=m.usage_count,
        quality=m.quality,
        consistency=m.consistency,
        decay=m.decay,
        retention_status=STATUS_ENUMS[m.retention_status],
        embedding_version=m.embedding_version,
        superseded_by=m.superseded_by,
        confirmation_count=m.confirmation_count,
        score_reasons=dict(m.score_reasons),
        vitality=m.vitality,
        source_memory_ids=list(m.source_ids),
        speaker_name=m.speaker_name,
        stale=m.stale,
    )
    if m.metadata:
        msg.metadata.CopyFrom(dict_to_struct(m.metadata))
    if m.last_accessed_at is not None:
        msg.last_access_time.CopyFrom(s_to_ts(m.last_accessed_at))
    if m.expires_at is not None:
        msg.expire_time.CopyFrom(s_to_ts(m.expires_at))
    return msg


CHANGES: dict[int, MemoryChange] = {
    memory_pb2.MEMORY_CHANGE_CREATE: MemoryChange.CREATE,
    memory_pb2.MEMORY_CHANGE_UPDATE: MemoryChange.UPDATE,
    memory_pb2.MEMORY_CHANGE_SUPERSEDE: MemoryChange.SUPERSEDE,
    memory_pb2.MEMORY_CHANGE_CONFIRM: MemoryChange.CONFIRM,
    memory_pb2.MEMORY_CHANGE_TIER_MOVE: MemoryChange.TIER_MOVE,
    memory_pb2.MEMORY_CHANGE_DELETE: MemoryChange.DELETE,
    memory_pb2.MEMORY_CHANGE_IMPORT: MemoryChange.IMPORT,
}
CHANGE_ENUMS = _invert(CHANGES)


def version_message(v: MemoryVersion) -> memory_pb2.MemoryVersion:
    msg = memory_pb2.MemoryVersion(
        id=v.id,
        memory_id=v.memory_id,
        version=v.version,
        create_time=s_to_ts(v.at),
        actor=v.actor,
        change=CHANGE_ENUMS[v.change],
        changed_fields=list(v.fields),
        description=v.description,
        content=v.content,
        tier=TIER_ENUMS[v.tier],
        retention_status=STATUS_ENUMS[v.retention_status],
        importance=v.importance,
    )
    if v.metadata:
        msg.metadata.CopyFrom(dict_to_struct(v.metadata))
    return msg


def imported_memory(msg: memory_pb2.Memory, namespace: Namespace, field: str) -> Memory:
    """A Memory of an export record, as the import path takes it (output-only fields included)."""
    return Memory(
        id=msg.id,
        namespace=namespace,
        content=msg.content,
        role=_required(enum_value(ROLES, msg.role, f"{field}.role", Role.USER)),
        kind=_required(enum_value(KINDS, msg.kind, f"{field}.kind", MemoryKind.FACT)),
        tags=tuple(msg.tags),
        session_id=msg.session_id,
        importance=msg.importance,
        metadata=struct_to_dict(msg.metadata),
        tier=_required(enum_value(TIERS, msg.tier, f"{field}.tier", Tier.HOT)),
        created_at=ts_to_s(msg.create_time) if msg.HasField("create_time") else 0.0,
        updated_at=ts_to_s(msg.update_time) if msg.HasField("update_time") else 0.0,
        usage_count=msg.usage_count,
        last_accessed_at=ts_to_s(msg.last_access_time) if msg.HasField("last_access_time") else None,
        quality=msg.quality,
        consistency=msg.consistency,
        decay=msg.decay,
        retention_status=_required(
            enum_value(STATUSES, msg.retention_status, f"{field}.retention_status", RetentionStatus.ACTIVE)
        ),
        superseded_by=msg.superseded_by,
        expires_at=ts_to_s(msg.expire_time) if msg.HasField("expire_time") else None,
        confirmation_count=msg.confirmation_count,
        score_reasons=dict(msg.score_reasons),
        vitality=msg.vitality,
        source_ids=tuple(msg.source_memory_ids),
        speaker_name=msg.speaker_name,
    )


def imported_version(msg: memory_pb2.MemoryVersion, field: str) -> MemoryVersion:
    return MemoryVersion(
        id=msg.id,
        memory_id=msg.memory_id,
        version=msg.version,
        at=ts_to_s(msg.create_time),
        actor=msg.actor,
        change=_required(enum_value(CHANGES, msg.change, f"{field}.change", MemoryChange.UPDATE)),
        fields=tuple(msg.changed_fields),
        description=msg.description,
        tier=_required(enum_value(TIERS, msg.tier, f"{field}.tier", Tier.HOT)),
        retention_status=_required(
            enum_value(STATUSES, msg.retention_status, f"{field}.retention_status", RetentionStatus.ACTIVE)
        ),
        importance=msg.importance,
        content=msg.content,
        metadata=struct_to_dict(msg.metadata),
    )


def breakdown_message(b: ScoreBreakdown) -> memory_pb2.ScoreBreakdown:
    return memory_pb2.ScoreBreakdown(
        semantic=b.semantic,
        recency=b.recency,
        importance=b.importance,
        usage=b.usage,
        quality=b.quality,
        consistency=b.consistency,
        decay=b.decay,
        lexical=b.lexical,
        dense_rank=b.dense_rank,
        lexical_rank=b.lexical_rank,
        relevance=b.relevance,
        term_coverage=b.term_coverage,
    )


def ranked_message(r: RankedMemory) -> query_service_pb2.RankedMemory:
    return query_service_pb2.RankedMemory(
        memory=memory_message(r.memory),
        score=r.score,
        score_breakdown=breakdown_message(r.breakdown),
        matched_queries=list(r.matched_queries),
        context_neighbor=r.context_neighbor,
        sources=[memory_message(m) for m in r.sources],
    )


def report_message(r: QueryReport) -> query_service_pb2.QueryReport:
    return query_service_pb2.QueryReport(
        mode=MODE_ENUMS.get(r.mode, query_service_pb2.QUERY_MODE_DIRECT),
        selected_tool=r.selected_tool,
        queries=r.queries,
        searches=r.searches,
        llm_calls=r.llm.calls,
        llm_time_ms=r.llm.time_ms,
        input_tokens=r.llm.input_tokens,
        output_tokens=r.llm.output_tokens,
        stages=[query_service_pb2.StageTiming(stage=k, duration_ms=v) for k, v in r.stages_ms.items()],
        cache_hit=r.cache_hit,
        embedding_cache_hit=r.embedding_cache_hit,
        candidates_recalled=r.candidates_recalled,
        dropped_by_importance=r.dropped_by_importance,
        dropped_below_relevance=r.dropped_below_relevance,
        degraded=r.degraded,
        notes=[*r.notes, *r.llm.notes],
        confidence=r.confidence,
    )
