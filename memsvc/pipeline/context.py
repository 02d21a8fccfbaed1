"""Per-request context shared by the stages: deadline, plan and the report being built."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, is_dataclass
from enum import Enum, StrEnum
from typing import Any, TypeVar

from opentelemetry.trace import Span, Tracer, get_current_span

from memsvc.domain.models import MemoryFilter, Namespace, Principal, Role
from memsvc.llm.usage import LlmUsage

T = TypeVar("T")


@dataclass(frozen=True)
class Turn:
    role: Role
    content: str


class QueryMode(StrEnum):
    """How a query is answered (seeds 000-004); QueryRequest.mode on the wire."""

    DIRECT = "direct"
    MULTI_QUERY = "multi_query"
    FUSION = "fusion"
    APPLICABILITY = "applicability"
    AGENT = "agent"
    AUTO = "auto"


@dataclass(frozen=True)
class QueryInput:
    """A query as the API hands it to the pipeline, before validation."""

    user_id: str
    query: str
    limit: int = 0
    memory_filter: MemoryFilter = field(default_factory=MemoryFilter)
    mode: QueryMode = QueryMode.DIRECT
    additional_queries: tuple[str, ...] = ()
    recent_turns: tuple[Turn, ...] = ()
    context_window: int = 0
    token_budget: int = 0
    skip_cache: bool = False
    include_sources: bool = False
    # Compose QueryOutcome.context in any mode (APPLICABILITY always does).
    include_context: bool = False
    min_relevance: float | None = None  # DIRECT's relevance floor; None: the server's default


# QueryInput fields that never change what a query returns: the user is already part of the
# cache's namespace, skip_cache only says whether to use the cache, and sources are attached
# after the cached ranking. Every other field is in the result cache key, so a field added to
# QueryInput is in it unless it is listed here.
NOT_IN_RESULT_KEY = frozenset({"user_id", "skip_cache", "include_sources", "include_context"})


def result_key(request: QueryInput, limit: int) -> str:
    """The result cache key of a request: a digest of every field that can change its results,
    with `limit` as the effective one (the default applied)."""
    material = {f.name: _plain(getattr(request, f.name)) for f in fields(request) if f.name not in NOT_IN_RESULT_KEY}
    material["limit"] = limit
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def _plain(value: Any) -> Any:
    """A request field as JSON; a type json cannot encode fails loudly instead of being skipped."""
    if isinstance(value, MemoryFilter):
        return value.fingerprint()
    if isinstance(value, Enum):
        return value.value
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class QueryPlan:
    """A validated query, scoped to one namespace (output of the scope stage)."""

    principal: Principal
    namespace: Namespace
    query: str
    limit: int
    memory_filter: MemoryFilter
    min_importance: float
    min_relevance: float
    request_id: str
    skip_cache: bool
    source: QueryInput
    # The query asks what holds now ("where do I live?"): outdated memories give way (rank.py) and
    # of results that answer it alike the newest statement wins (current.py). Not a question
    # about what held before ("where did I live before I moved?"), which looks for them.
    about_the_present: bool = False
    # The query asks what held before a change ("where did I live before I moved?"): recency,
    # which prefers the newest, does not weigh in (rank.py).
    about_the_past: bool = False

    @property
    def request_key(self) -> str:
        """The result cache key; computed only by a query that uses the cache."""
        return result_key(self.source, self.limit)


@dataclass
class QueryReport:
    """What a query did; filled in by the stages and strategies as they run."""

    mode: QueryMode = QueryMode.DIRECT
    selected_tool: str = ""
    queries: list[str] = field(default_factory=list)
    searches: int = 0
    llm: LlmUsage = field(default_factory=LlmUsage)
    stages_ms: dict[str, float] = field(default_factory=dict)
    cache_hit: bool = False
    embedding_cache_hit: bool = False
    candidates_recalled: int = 0
    dropped_by_importance: int = 0
    dropped_below_relevance: int = 0
    degraded: bool = False
    notes: list[str] = field(default_factory=list)
    confidence: float = 0.0

    def add_time(self, stage: str, seconds: float) -> None:
        self.stages_ms[stage] = self.stages_ms.get(stage, 0.0) + seconds * 1000


STAGE_PREFIX = "memsvc.stage."


@contextmanager
def child_span(tracer: Tracer, name: str) -> Iterator[Span]:
    """A span under the current one; under one that is not recorded (its trace left out of the
    sample, or nothing receives spans) that span itself, since a child would not be recorded
    either and making one costs about 6 us."""
    parent = get_current_span()
    if not parent.is_recording():
        yield parent
        return
    with tracer.start_as_current_span(name) as span:
        yield span


@contextmanager
def stage_span(tracer: Tracer, report: QueryReport, stage: str) -> Iterator[Span]:
    """One span per stage under the current (RPC) span, and the stage's time in the report."""
    started = time.perf_counter()
    with child_span(tracer, STAGE_PREFIX + stage) as span:
        span.set_attribute("memsvc.stage", stage)
        try:
            yield span
        finally:
            report.add_time(stage, time.perf_counter() - started)
