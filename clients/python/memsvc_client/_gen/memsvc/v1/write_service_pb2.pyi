import datetime

from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from memsvc_client._gen.memsvc.v1 import memory_pb2 as _memory_pb2
from memsvc_client._gen.memsvc.v1 import query_service_pb2 as _query_service_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WriteOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WRITE_OUTCOME_UNSPECIFIED: _ClassVar[WriteOutcome]
    WRITE_OUTCOME_CREATED: _ClassVar[WriteOutcome]
    WRITE_OUTCOME_IDEMPOTENT_REPLAY: _ClassVar[WriteOutcome]
    WRITE_OUTCOME_CONFIRMED_EXISTING: _ClassVar[WriteOutcome]

class Extractor(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXTRACTOR_UNSPECIFIED: _ClassVar[Extractor]
    EXTRACTOR_LLM: _ClassVar[Extractor]
    EXTRACTOR_RULES: _ClassVar[Extractor]
    EXTRACTOR_RULES_AFTER_LLM_FAILURE: _ClassVar[Extractor]
    EXTRACTOR_NONE: _ClassVar[Extractor]
WRITE_OUTCOME_UNSPECIFIED: WriteOutcome
WRITE_OUTCOME_CREATED: WriteOutcome
WRITE_OUTCOME_IDEMPOTENT_REPLAY: WriteOutcome
WRITE_OUTCOME_CONFIRMED_EXISTING: WriteOutcome
EXTRACTOR_UNSPECIFIED: Extractor
EXTRACTOR_LLM: Extractor
EXTRACTOR_RULES: Extractor
EXTRACTOR_RULES_AFTER_LLM_FAILURE: Extractor
EXTRACTOR_NONE: Extractor

class NewMemory(_message.Message):
    __slots__ = ("content", "role", "kind", "tags", "session_id", "importance", "metadata", "tier", "create_time", "idempotency_key", "expire_time")
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    content: str
    role: _memory_pb2.Role
    kind: _memory_pb2.MemoryKind
    tags: _containers.RepeatedScalarFieldContainer[str]
    session_id: str
    importance: float
    metadata: _struct_pb2.Struct
    tier: _memory_pb2.Tier
    create_time: _timestamp_pb2.Timestamp
    idempotency_key: str
    expire_time: _timestamp_pb2.Timestamp
    def __init__(self, content: _Optional[str] = ..., role: _Optional[_Union[_memory_pb2.Role, str]] = ..., kind: _Optional[_Union[_memory_pb2.MemoryKind, str]] = ..., tags: _Optional[_Iterable[str]] = ..., session_id: _Optional[str] = ..., importance: _Optional[float] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., tier: _Optional[_Union[_memory_pb2.Tier, str]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class AddMemoryResult(_message.Message):
    __slots__ = ("outcome", "reason", "superseded_ids")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_IDS_FIELD_NUMBER: _ClassVar[int]
    outcome: WriteOutcome
    reason: str
    superseded_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, outcome: _Optional[_Union[WriteOutcome, str]] = ..., reason: _Optional[str] = ..., superseded_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class AddMemoriesRequest(_message.Message):
    __slots__ = ("user_id", "memories")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    memories: _containers.RepeatedCompositeFieldContainer[NewMemory]
    def __init__(self, user_id: _Optional[str] = ..., memories: _Optional[_Iterable[_Union[NewMemory, _Mapping]]] = ...) -> None: ...

class AddMemoriesResponse(_message.Message):
    __slots__ = ("memories", "created", "results")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    created: _containers.RepeatedScalarFieldContainer[bool]
    results: _containers.RepeatedCompositeFieldContainer[AddMemoryResult]
    def __init__(self, memories: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ..., created: _Optional[_Iterable[bool]] = ..., results: _Optional[_Iterable[_Union[AddMemoryResult, _Mapping]]] = ...) -> None: ...

class AddConversationRequest(_message.Message):
    __slots__ = ("user_id", "session_id", "turns", "first_turn_index")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    FIRST_TURN_INDEX_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    session_id: str
    turns: _containers.RepeatedCompositeFieldContainer[_query_service_pb2.ConversationTurn]
    first_turn_index: int
    def __init__(self, user_id: _Optional[str] = ..., session_id: _Optional[str] = ..., turns: _Optional[_Iterable[_Union[_query_service_pb2.ConversationTurn, _Mapping]]] = ..., first_turn_index: _Optional[int] = ...) -> None: ...

class AddConversationResponse(_message.Message):
    __slots__ = ("turns", "turn_results", "extracted", "extracted_results", "summary", "extractor", "extractor_reason", "llm_tokens")
    TURNS_FIELD_NUMBER: _ClassVar[int]
    TURN_RESULTS_FIELD_NUMBER: _ClassVar[int]
    EXTRACTED_FIELD_NUMBER: _ClassVar[int]
    EXTRACTED_RESULTS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    EXTRACTOR_FIELD_NUMBER: _ClassVar[int]
    EXTRACTOR_REASON_FIELD_NUMBER: _ClassVar[int]
    LLM_TOKENS_FIELD_NUMBER: _ClassVar[int]
    turns: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    turn_results: _containers.RepeatedCompositeFieldContainer[AddMemoryResult]
    extracted: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    extracted_results: _containers.RepeatedCompositeFieldContainer[AddMemoryResult]
    summary: _memory_pb2.Memory
    extractor: Extractor
    extractor_reason: str
    llm_tokens: int
    def __init__(self, turns: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ..., turn_results: _Optional[_Iterable[_Union[AddMemoryResult, _Mapping]]] = ..., extracted: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ..., extracted_results: _Optional[_Iterable[_Union[AddMemoryResult, _Mapping]]] = ..., summary: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., extractor: _Optional[_Union[Extractor, str]] = ..., extractor_reason: _Optional[str] = ..., llm_tokens: _Optional[int] = ...) -> None: ...

class MemoryUpdate(_message.Message):
    __slots__ = ("content", "tags", "tier", "importance", "metadata", "expire_time")
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    content: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    tier: _memory_pb2.Tier
    importance: float
    metadata: _struct_pb2.Struct
    expire_time: _timestamp_pb2.Timestamp
    def __init__(self, content: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., tier: _Optional[_Union[_memory_pb2.Tier, str]] = ..., importance: _Optional[float] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class UpdateMemoryRequest(_message.Message):
    __slots__ = ("user_id", "id", "memory", "update_mask")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    id: str
    memory: MemoryUpdate
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, user_id: _Optional[str] = ..., id: _Optional[str] = ..., memory: _Optional[_Union[MemoryUpdate, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class UpdateMemoryResponse(_message.Message):
    __slots__ = ("memory",)
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ...) -> None: ...

class DeleteMemoryRequest(_message.Message):
    __slots__ = ("user_id", "id")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    id: str
    def __init__(self, user_id: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class DeleteMemoryResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ForgetUserRequest(_message.Message):
    __slots__ = ("user_id",)
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    def __init__(self, user_id: _Optional[str] = ...) -> None: ...

class ForgetUserResponse(_message.Message):
    __slots__ = ("deleted_count",)
    DELETED_COUNT_FIELD_NUMBER: _ClassVar[int]
    deleted_count: int
    def __init__(self, deleted_count: _Optional[int] = ...) -> None: ...

class GetMemoryRequest(_message.Message):
    __slots__ = ("user_id", "id")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    id: str
    def __init__(self, user_id: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class GetMemoryResponse(_message.Message):
    __slots__ = ("memory",)
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ...) -> None: ...

class ListMemoriesRequest(_message.Message):
    __slots__ = ("user_id", "filter", "page_size", "page_token")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    filter: _memory_pb2.MemoryFilter
    page_size: int
    page_token: str
    def __init__(self, user_id: _Optional[str] = ..., filter: _Optional[_Union[_memory_pb2.MemoryFilter, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListMemoriesResponse(_message.Message):
    __slots__ = ("memories", "next_page_token")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    next_page_token: str
    def __init__(self, memories: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class FeedbackRequest(_message.Message):
    __slots__ = ("user_id", "request_id", "used_ids", "unused_ids")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    USED_IDS_FIELD_NUMBER: _ClassVar[int]
    UNUSED_IDS_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    request_id: str
    used_ids: _containers.RepeatedScalarFieldContainer[str]
    unused_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, user_id: _Optional[str] = ..., request_id: _Optional[str] = ..., used_ids: _Optional[_Iterable[str]] = ..., unused_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class FeedbackResponse(_message.Message):
    __slots__ = ("recorded_count", "ignored_ids")
    RECORDED_COUNT_FIELD_NUMBER: _ClassVar[int]
    IGNORED_IDS_FIELD_NUMBER: _ClassVar[int]
    recorded_count: int
    ignored_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, recorded_count: _Optional[int] = ..., ignored_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class GetMemoryHistoryRequest(_message.Message):
    __slots__ = ("user_id", "id", "page_size", "page_token")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    id: str
    page_size: int
    page_token: str
    def __init__(self, user_id: _Optional[str] = ..., id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class GetMemoryHistoryResponse(_message.Message):
    __slots__ = ("versions", "next_page_token")
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    versions: _containers.RepeatedCompositeFieldContainer[_memory_pb2.MemoryVersion]
    next_page_token: str
    def __init__(self, versions: _Optional[_Iterable[_Union[_memory_pb2.MemoryVersion, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ExportMemoriesRequest(_message.Message):
    __slots__ = ("user_id",)
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    def __init__(self, user_id: _Optional[str] = ...) -> None: ...

class ExportMemoriesResponse(_message.Message):
    __slots__ = ("records",)
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[_memory_pb2.MemoryRecord]
    def __init__(self, records: _Optional[_Iterable[_Union[_memory_pb2.MemoryRecord, _Mapping]]] = ...) -> None: ...

class ImportMemoriesRequest(_message.Message):
    __slots__ = ("user_id", "records")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    records: _containers.RepeatedCompositeFieldContainer[_memory_pb2.MemoryRecord]
    def __init__(self, user_id: _Optional[str] = ..., records: _Optional[_Iterable[_Union[_memory_pb2.MemoryRecord, _Mapping]]] = ...) -> None: ...

class ImportMemoriesResponse(_message.Message):
    __slots__ = ("imported_count", "skipped_count", "memory_ids")
    IMPORTED_COUNT_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_COUNT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    imported_count: int
    skipped_count: int
    memory_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, imported_count: _Optional[int] = ..., skipped_count: _Optional[int] = ..., memory_ids: _Optional[_Iterable[str]] = ...) -> None: ...
