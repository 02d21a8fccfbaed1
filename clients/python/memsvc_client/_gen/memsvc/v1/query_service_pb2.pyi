import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from memsvc_client._gen.memsvc.v1 import memory_pb2 as _memory_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class QueryMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    QUERY_MODE_UNSPECIFIED: _ClassVar[QueryMode]
    QUERY_MODE_DIRECT: _ClassVar[QueryMode]
    QUERY_MODE_MULTI_QUERY: _ClassVar[QueryMode]
    QUERY_MODE_FUSION: _ClassVar[QueryMode]
    QUERY_MODE_APPLICABILITY: _ClassVar[QueryMode]
    QUERY_MODE_AGENT: _ClassVar[QueryMode]
    QUERY_MODE_AUTO: _ClassVar[QueryMode]
QUERY_MODE_UNSPECIFIED: QueryMode
QUERY_MODE_DIRECT: QueryMode
QUERY_MODE_MULTI_QUERY: QueryMode
QUERY_MODE_FUSION: QueryMode
QUERY_MODE_APPLICABILITY: QueryMode
QUERY_MODE_AGENT: QueryMode
QUERY_MODE_AUTO: QueryMode

class ConversationTurn(_message.Message):
    __slots__ = ("role", "content", "create_time", "name")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    role: _memory_pb2.Role
    content: str
    create_time: _timestamp_pb2.Timestamp
    name: str
    def __init__(self, role: _Optional[_Union[_memory_pb2.Role, str]] = ..., content: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., name: _Optional[str] = ...) -> None: ...

class QueryRequest(_message.Message):
    __slots__ = ("user_id", "query", "limit", "filter", "mode", "additional_queries", "recent_turns", "context_window", "token_budget", "skip_cache", "include_sources", "min_relevance", "include_context")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    ADDITIONAL_QUERIES_FIELD_NUMBER: _ClassVar[int]
    RECENT_TURNS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_WINDOW_FIELD_NUMBER: _ClassVar[int]
    TOKEN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    SKIP_CACHE_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_SOURCES_FIELD_NUMBER: _ClassVar[int]
    MIN_RELEVANCE_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    query: str
    limit: int
    filter: _memory_pb2.MemoryFilter
    mode: QueryMode
    additional_queries: _containers.RepeatedScalarFieldContainer[str]
    recent_turns: _containers.RepeatedCompositeFieldContainer[ConversationTurn]
    context_window: int
    token_budget: int
    skip_cache: bool
    include_sources: bool
    min_relevance: float
    include_context: bool
    def __init__(self, user_id: _Optional[str] = ..., query: _Optional[str] = ..., limit: _Optional[int] = ..., filter: _Optional[_Union[_memory_pb2.MemoryFilter, _Mapping]] = ..., mode: _Optional[_Union[QueryMode, str]] = ..., additional_queries: _Optional[_Iterable[str]] = ..., recent_turns: _Optional[_Iterable[_Union[ConversationTurn, _Mapping]]] = ..., context_window: _Optional[int] = ..., token_budget: _Optional[int] = ..., skip_cache: _Optional[bool] = ..., include_sources: _Optional[bool] = ..., min_relevance: _Optional[float] = ..., include_context: _Optional[bool] = ...) -> None: ...

class RankedMemory(_message.Message):
    __slots__ = ("memory", "score", "score_breakdown", "matched_queries", "context_neighbor", "sources", "context")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    SCORE_BREAKDOWN_FIELD_NUMBER: _ClassVar[int]
    MATCHED_QUERIES_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_NEIGHBOR_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    score: float
    score_breakdown: _memory_pb2.ScoreBreakdown
    matched_queries: _containers.RepeatedScalarFieldContainer[str]
    context_neighbor: bool
    sources: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    context: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., score: _Optional[float] = ..., score_breakdown: _Optional[_Union[_memory_pb2.ScoreBreakdown, _Mapping]] = ..., matched_queries: _Optional[_Iterable[str]] = ..., context_neighbor: _Optional[bool] = ..., sources: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ..., context: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ...) -> None: ...

class StageTiming(_message.Message):
    __slots__ = ("stage", "duration_ms")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    stage: str
    duration_ms: float
    def __init__(self, stage: _Optional[str] = ..., duration_ms: _Optional[float] = ...) -> None: ...

class QueryReport(_message.Message):
    __slots__ = ("mode", "selected_tool", "queries", "searches", "llm_calls", "llm_time_ms", "input_tokens", "output_tokens", "stages", "cache_hit", "embedding_cache_hit", "candidates_recalled", "dropped_by_importance", "degraded", "notes", "confidence", "dropped_below_relevance")
    MODE_FIELD_NUMBER: _ClassVar[int]
    SELECTED_TOOL_FIELD_NUMBER: _ClassVar[int]
    QUERIES_FIELD_NUMBER: _ClassVar[int]
    SEARCHES_FIELD_NUMBER: _ClassVar[int]
    LLM_CALLS_FIELD_NUMBER: _ClassVar[int]
    LLM_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    STAGES_FIELD_NUMBER: _ClassVar[int]
    CACHE_HIT_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_CACHE_HIT_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_RECALLED_FIELD_NUMBER: _ClassVar[int]
    DROPPED_BY_IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    DROPPED_BELOW_RELEVANCE_FIELD_NUMBER: _ClassVar[int]
    mode: QueryMode
    selected_tool: str
    queries: _containers.RepeatedScalarFieldContainer[str]
    searches: int
    llm_calls: int
    llm_time_ms: float
    input_tokens: int
    output_tokens: int
    stages: _containers.RepeatedCompositeFieldContainer[StageTiming]
    cache_hit: bool
    embedding_cache_hit: bool
    candidates_recalled: int
    dropped_by_importance: int
    degraded: bool
    notes: _containers.RepeatedScalarFieldContainer[str]
    confidence: float
    dropped_below_relevance: int
    def __init__(self, mode: _Optional[_Union[QueryMode, str]] = ..., selected_tool: _Optional[str] = ..., queries: _Optional[_Iterable[str]] = ..., searches: _Optional[int] = ..., llm_calls: _Optional[int] = ..., llm_time_ms: _Optional[float] = ..., input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., stages: _Optional[_Iterable[_Union[StageTiming, _Mapping]]] = ..., cache_hit: _Optional[bool] = ..., embedding_cache_hit: _Optional[bool] = ..., candidates_recalled: _Optional[int] = ..., dropped_by_importance: _Optional[int] = ..., degraded: _Optional[bool] = ..., notes: _Optional[_Iterable[str]] = ..., confidence: _Optional[float] = ..., dropped_below_relevance: _Optional[int] = ...) -> None: ...

class QueryResponse(_message.Message):
    __slots__ = ("memories", "explanation", "request_id", "report", "context")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[RankedMemory]
    explanation: str
    request_id: str
    report: QueryReport
    context: str
    def __init__(self, memories: _Optional[_Iterable[_Union[RankedMemory, _Mapping]]] = ..., explanation: _Optional[str] = ..., request_id: _Optional[str] = ..., report: _Optional[_Union[QueryReport, _Mapping]] = ..., context: _Optional[str] = ...) -> None: ...
