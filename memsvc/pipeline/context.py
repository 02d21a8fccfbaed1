"""Per-request context shared by the stages: deadline, plan and the report being built."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

from opentelemetry.trace import Span, Tracer

from memsvc.domain.models import MemoryFilter, Namespace, Principal, Role
from memsvc.errors import DeadlineExceeded

T = TypeVar("T")


@dataclass(frozen=True)
class Deadline:
    """When the caller stops waiting (monotonic seconds); None means no deadline."""

    expires_at: float | None

    @classmethod
    def after(cls, seconds: float | None) -> Deadline:
        return cls(None if seconds is None else time.monotonic() + seconds)

    def remaining(self) -> float | None:
        return None if self.expires_at is None else max(0.0, self.expires_at - time.monotonic())

    async def run(self, work: Awaitable[T], what: str) -> T:
        """Await `work` within the time left; a dependency never holds the caller past it."""
        remaining = self.remaining()
        if remaining is None:
            return await work
        try:
            return await asyncio.wait_for(work, timeout=remaining)
        except TimeoutError as exc:
            raise DeadlineExceeded(f"the deadline passed while waiting for {what}") from exc


@dataclass(frozen=True)
class Turn:
    role: Role
    content: str


@dataclass(frozen=True)
class QueryInput:
    """A query as the API hands it to the pipeline, before validation."""

    user_id: str
    query: str
    limit: int = 0
    memory_filter: MemoryFilter = field(default_factory=MemoryFilter)
    mode: str = "direct"
    additional_queries: tuple[str, ...] = ()
    recent_turns: tuple[Turn, ...] = ()
    context_window: int = 0
    token_budget: int = 0
    skip_cache: bool = False


@dataclass(frozen=True)
class QueryPlan:
    """A validated query, scoped to one namespace (output of the scope stage)."""

    principal: Principal
    namespace: Namespace
    query: str
    limit: int
    memory_filter: MemoryFilter
    min_importance: float
    request_id: str
    request_key: str
    skip_cache: bool
    source: QueryInput


@dataclass
class QueryReport:
    """What a query did; filled in by the stages and strategies as they run."""

    mode: str = "direct"
    selected_tool: str = ""
    queries: list[str] = field(default_factory=list)
    searches: int = 0
    llm_calls: int = 0
    llm_time_ms: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    stages_ms: dict[str, float] = field(default_factory=dict)
    cache_hit: bool = False
    embedding_cache_hit: bool = False
    candidates_recalled: int = 0
    dropped_by_importance: int = 0
    degraded: bool = False
    notes: list[str] = field(default_factory=list)
    confidence: float = 0.0

    def add_time(self, stage: str, seconds: float) -> None:
        self.stages_ms[stage] = self.stages_ms.get(stage, 0.0) + seconds * 1000


@contextmanager
def stage_span(tracer: Tracer, report: QueryReport, stage: str) -> Iterator[Span]:
    """One span per stage under the current (RPC) span, and the stage's time in the report."""
    started = time.perf_counter()
    with tracer.start_as_current_span(f"memsvc.stage.{stage}") as span:
        span.set_attribute("memsvc.stage", stage)
        try:
            yield span
        finally:
            report.add_time(stage, time.perf_counter() - started)
