import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_USER: _ClassVar[Role]
    ROLE_ASSISTANT: _ClassVar[Role]
    ROLE_SYSTEM: _ClassVar[Role]

class MemoryKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEMORY_KIND_UNSPECIFIED: _ClassVar[MemoryKind]
    MEMORY_KIND_FACT: _ClassVar[MemoryKind]
    MEMORY_KIND_PREFERENCE: _ClassVar[MemoryKind]
    MEMORY_KIND_EPISODE: _ClassVar[MemoryKind]
    MEMORY_KIND_DECISION: _ClassVar[MemoryKind]
    MEMORY_KIND_SUMMARY: _ClassVar[MemoryKind]
    MEMORY_KIND_RECOMMENDATION: _ClassVar[MemoryKind]
    MEMORY_KIND_COMMITMENT: _ClassVar[MemoryKind]
    MEMORY_KIND_INSTRUCTION: _ClassVar[MemoryKind]

class Tier(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TIER_UNSPECIFIED: _ClassVar[Tier]
    TIER_HOT: _ClassVar[Tier]
    TIER_WARM: _ClassVar[Tier]
    TIER_COLD: _ClassVar[Tier]

class RetentionStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RETENTION_STATUS_UNSPECIFIED: _ClassVar[RetentionStatus]
    RETENTION_STATUS_ACTIVE: _ClassVar[RetentionStatus]
    RETENTION_STATUS_SUPERSEDED: _ClassVar[RetentionStatus]
    RETENTION_STATUS_ARCHIVED: _ClassVar[RetentionStatus]

class MemoryChange(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEMORY_CHANGE_UNSPECIFIED: _ClassVar[MemoryChange]
    MEMORY_CHANGE_CREATE: _ClassVar[MemoryChange]
    MEMORY_CHANGE_UPDATE: _ClassVar[MemoryChange]
    MEMORY_CHANGE_SUPERSEDE: _ClassVar[MemoryChange]
    MEMORY_CHANGE_CONFIRM: _ClassVar[MemoryChange]
    MEMORY_CHANGE_TIER_MOVE: _ClassVar[MemoryChange]
    MEMORY_CHANGE_DELETE: _ClassVar[MemoryChange]
    MEMORY_CHANGE_IMPORT: _ClassVar[MemoryChange]
ROLE_UNSPECIFIED: Role
ROLE_USER: Role
ROLE_ASSISTANT: Role
ROLE_SYSTEM: Role
MEMORY_KIND_UNSPECIFIED: MemoryKind
MEMORY_KIND_FACT: MemoryKind
MEMORY_KIND_PREFERENCE: MemoryKind
MEMORY_KIND_EPISODE: MemoryKind
MEMORY_KIND_DECISION: MemoryKind
MEMORY_KIND_SUMMARY: MemoryKind
MEMORY_KIND_RECOMMENDATION: MemoryKind
MEMORY_KIND_COMMITMENT: MemoryKind
MEMORY_KIND_INSTRUCTION: MemoryKind
TIER_UNSPECIFIED: Tier
TIER_HOT: Tier
TIER_WARM: Tier
TIER_COLD: Tier
RETENTION_STATUS_UNSPECIFIED: RetentionStatus
RETENTION_STATUS_ACTIVE: RetentionStatus
RETENTION_STATUS_SUPERSEDED: RetentionStatus
RETENTION_STATUS_ARCHIVED: RetentionStatus
MEMORY_CHANGE_UNSPECIFIED: MemoryChange
MEMORY_CHANGE_CREATE: MemoryChange
MEMORY_CHANGE_UPDATE: MemoryChange
MEMORY_CHANGE_SUPERSEDE: MemoryChange
MEMORY_CHANGE_CONFIRM: MemoryChange
MEMORY_CHANGE_TIER_MOVE: MemoryChange
MEMORY_CHANGE_DELETE: MemoryChange
MEMORY_CHANGE_IMPORT: MemoryChange

class Memory(_message.Message):
    __slots__ = ("id", "user_id", "content", "role", "kind", "tags", "session_id", "importance", "metadata", "tier", "create_time", "update_time", "usage_count", "last_access_time", "quality", "consistency", "decay", "retention_status", "embedding_version", "superseded_by", "expire_time", "confirmation_count", "score_reasons", "vitality", "source_memory_ids", "speaker_name", "stale", "outdated", "acknowledgement")
    class ScoreReasonsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    USAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    LAST_ACCESS_TIME_FIELD_NUMBER: _ClassVar[int]
    QUALITY_FIELD_NUMBER: _ClassVar[int]
    CONSISTENCY_FIELD_NUMBER: _ClassVar[int]
    DECAY_FIELD_NUMBER: _ClassVar[int]
    RETENTION_STATUS_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_VERSION_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_BY_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    CONFIRMATION_COUNT_FIELD_NUMBER: _ClassVar[int]
    SCORE_REASONS_FIELD_NUMBER: _ClassVar[int]
    VITALITY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    SPEAKER_NAME_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    OUTDATED_FIELD_NUMBER: _ClassVar[int]
    ACKNOWLEDGEMENT_FIELD_NUMBER: _ClassVar[int]
    id: str
    user_id: str
    content: str
    role: Role
    kind: MemoryKind
    tags: _containers.RepeatedScalarFieldContainer[str]
    session_id: str
    importance: float
    metadata: _struct_pb2.Struct
    tier: Tier
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    usage_count: int
    last_access_time: _timestamp_pb2.Timestamp
    quality: float
    consistency: float
    decay: float
    retention_status: RetentionStatus
    embedding_version: str
    superseded_by: str
    expire_time: _timestamp_pb2.Timestamp
    confirmation_count: int
    score_reasons: _containers.ScalarMap[str, str]
    vitality: float
    source_memory_ids: _containers.RepeatedScalarFieldContainer[str]
    speaker_name: str
    stale: bool
    outdated: bool
    acknowledgement: bool
    def __init__(self, id: _Optional[str] = ..., user_id: _Optional[str] = ..., content: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ..., kind: _Optional[_Union[MemoryKind, str]] = ..., tags: _Optional[_Iterable[str]] = ..., session_id: _Optional[str] = ..., importance: _Optional[float] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., tier: _Optional[_Union[Tier, str]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., usage_count: _Optional[int] = ..., last_access_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., quality: _Optional[float] = ..., consistency: _Optional[float] = ..., decay: _Optional[float] = ..., retention_status: _Optional[_Union[RetentionStatus, str]] = ..., embedding_version: _Optional[str] = ..., superseded_by: _Optional[str] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., confirmation_count: _Optional[int] = ..., score_reasons: _Optional[_Mapping[str, str]] = ..., vitality: _Optional[float] = ..., source_memory_ids: _Optional[_Iterable[str]] = ..., speaker_name: _Optional[str] = ..., stale: _Optional[bool] = ..., outdated: _Optional[bool] = ..., acknowledgement: _Optional[bool] = ...) -> None: ...

class MemoryVersion(_message.Message):
    __slots__ = ("id", "memory_id", "version", "create_time", "actor", "change", "changed_fields", "description", "content", "metadata", "tier", "retention_status", "importance")
    ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELDS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    RETENTION_STATUS_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    id: str
    memory_id: str
    version: int
    create_time: _timestamp_pb2.Timestamp
    actor: str
    change: MemoryChange
    changed_fields: _containers.RepeatedScalarFieldContainer[str]
    description: str
    content: str
    metadata: _struct_pb2.Struct
    tier: Tier
    retention_status: RetentionStatus
    importance: float
    def __init__(self, id: _Optional[str] = ..., memory_id: _Optional[str] = ..., version: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., actor: _Optional[str] = ..., change: _Optional[_Union[MemoryChange, str]] = ..., changed_fields: _Optional[_Iterable[str]] = ..., description: _Optional[str] = ..., content: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., tier: _Optional[_Union[Tier, str]] = ..., retention_status: _Optional[_Union[RetentionStatus, str]] = ..., importance: _Optional[float] = ...) -> None: ...

class MemoryRecord(_message.Message):
    __slots__ = ("memory", "versions")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    memory: Memory
    versions: _containers.RepeatedCompositeFieldContainer[MemoryVersion]
    def __init__(self, memory: _Optional[_Union[Memory, _Mapping]] = ..., versions: _Optional[_Iterable[_Union[MemoryVersion, _Mapping]]] = ...) -> None: ...

class ScoreBreakdown(_message.Message):
    __slots__ = ("semantic", "recency", "importance", "usage", "quality", "consistency", "decay", "lexical", "dense_rank", "lexical_rank", "relevance", "term_coverage", "currency")
    SEMANTIC_FIELD_NUMBER: _ClassVar[int]
    RECENCY_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    QUALITY_FIELD_NUMBER: _ClassVar[int]
    CONSISTENCY_FIELD_NUMBER: _ClassVar[int]
    DECAY_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_FIELD_NUMBER: _ClassVar[int]
    DENSE_RANK_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_RANK_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_FIELD_NUMBER: _ClassVar[int]
    TERM_COVERAGE_FIELD_NUMBER: _ClassVar[int]
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
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
    relevance: float
    term_coverage: float
    currency: float
    def __init__(self, semantic: _Optional[float] = ..., recency: _Optional[float] = ..., importance: _Optional[float] = ..., usage: _Optional[float] = ..., quality: _Optional[float] = ..., consistency: _Optional[float] = ..., decay: _Optional[float] = ..., lexical: _Optional[float] = ..., dense_rank: _Optional[int] = ..., lexical_rank: _Optional[int] = ..., relevance: _Optional[float] = ..., term_coverage: _Optional[float] = ..., currency: _Optional[float] = ...) -> None: ...

class MemoryFilter(_message.Message):
    __slots__ = ("tier", "tags_any", "session_id", "metadata", "min_importance", "roles", "kinds", "create_time_after", "create_time_before", "include_inactive")
    TIER_FIELD_NUMBER: _ClassVar[int]
    TAGS_ANY_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    MIN_IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_AFTER_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_BEFORE_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_INACTIVE_FIELD_NUMBER: _ClassVar[int]
    tier: Tier
    tags_any: _containers.RepeatedScalarFieldContainer[str]
    session_id: str
    metadata: _struct_pb2.Struct
    min_importance: float
    roles: _containers.RepeatedScalarFieldContainer[Role]
    kinds: _containers.RepeatedScalarFieldContainer[MemoryKind]
    create_time_after: _timestamp_pb2.Timestamp
    create_time_before: _timestamp_pb2.Timestamp
    include_inactive: bool
    def __init__(self, tier: _Optional[_Union[Tier, str]] = ..., tags_any: _Optional[_Iterable[str]] = ..., session_id: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., min_importance: _Optional[float] = ..., roles: _Optional[_Iterable[_Union[Role, str]]] = ..., kinds: _Optional[_Iterable[_Union[MemoryKind, str]]] = ..., create_time_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., create_time_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., include_inactive: _Optional[bool] = ...) -> None: ...
