"""Where the server's CPU goes: per stage (from the stage spans) and per thread group.

Latency grows when other processes share the cores; CPU seconds do not, so these are the
figures a budget per query is checked against.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from memsvc.pipeline.context import STAGE_PREFIX

# Python thread names (prefixes) of the server's pools, and what the rest of the process is.
THREAD_GROUPS = (
    ("bench-loop", "event loop"),
    ("embed", "embedder"),
    ("milvus", "milvus"),
    ("sqlite", "record store"),
    ("lexical", "lexical index"),
)
NATIVE = "native (ONNX Runtime, gRPC core, Milvus Lite)"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuBreakdown:
    """Server CPU seconds over a window: all of it, per thread group, and per stage."""

    seconds: float
    threads: dict[str, float]
    # Process CPU while each stage's span was open, summed; empty when two stage spans were ever
    # open at once (concurrent queries, or a mode's searches side by side), where each window
    # would hold the other's work too.
    stages: dict[str, float]
    queries: int


class ServerCpu(SpanProcessor):
    """Measures the server's CPU over the queries that follow a warm-up.

    The window opens when the warm-up's last Query RPC ends (its span), so the warm-up's work,
    which includes first-time costs, stays out of the figures.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._warmup_left: int | None = None
        self._queries = 0
        self._opened: dict[int, float] = {}
        self._stages: dict[str, float] = {}
        self._overlapped = False
        self._start: tuple[float, ThreadCpu] | None = None

    def open_after(self, warmup_queries: int) -> None:
        with self._lock:
            self._start = None
            self._stages.clear()
            self._opened.clear()
            self._overlapped = False
            self._queries = 0
            self._warmup_left = warmup_queries
            if warmup_queries == 0:
                self._open()

    def close(self) -> CpuBreakdown:
        with self._lock:
            if self._start is None:
                return CpuBreakdown(0.0, {}, {}, 0)
            cpu, threads = self._start
            self._start = None
            self._warmup_left = None
            spent = time.process_time() - cpu
            stages = {} if self._overlapped else dict(self._stages)
            return CpuBreakdown(spent, ThreadCpu.now().since(threads), stages, self._queries)

    def _open(self) -> None:
        self._start = (time.process_time(), ThreadCpu.now())

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        # Once two stages overlapped the per-stage figures are void: stop reading the clock
        # (a system call per span, a few per cent of a busy loop's time at concurrency 16).
        if self._start is not None and not self._overlapped and span.name.startswith(STAGE_PREFIX):
            with self._lock:
                self._overlapped = self._overlapped or bool(self._opened)
                self._opened[span.context.span_id] = time.process_time()

    def on_end(self, span: ReadableSpan) -> None:
        if span.name.startswith(STAGE_PREFIX):
            if self._start is None or self._overlapped or span.context is None:
                return
            ended = time.process_time()
            with self._lock:
                started = self._opened.pop(span.context.span_id, None)
                if started is not None:
                    stage = span.name.removeprefix(STAGE_PREFIX)
                    self._stages[stage] = self._stages.get(stage, 0.0) + ended - started
        elif span.name.endswith("/Query"):
            with self._lock:
                if self._start is not None:
                    self._queries += 1
                elif self._warmup_left is not None:
                    self._warmup_left -= 1
                    if self._warmup_left <= 0:
                        self._open()

    def shutdown(self) -> None:
        return

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


@dataclass(frozen=True)
class ThreadCpu:
    """CPU seconds of each live thread of this process at one moment, by group."""

    seconds: dict[int, tuple[str, float]]

    @classmethod
    def now(cls) -> ThreadCpu:
        names = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
        seconds: dict[int, tuple[str, float]] = {}
        for task in Path("/proc/self/task").iterdir():
            tid = int(task.name)
            try:
                seconds[tid] = (group_of(names.get(tid)), stat_cpu_seconds(task / "stat"))
            except OSError:
                continue  # the thread ended between the listing and the read
        return cls(seconds)

    def since(self, before: ThreadCpu) -> dict[str, float]:
        """CPU seconds per group between `before` and this snapshot (threads that ended are lost)."""
        groups: dict[str, float] = {}
        for tid, (group, seconds) in self.seconds.items():
            earlier = before.seconds.get(tid, (group, 0.0))[1]
            groups[group] = groups.get(group, 0.0) + max(seconds - earlier, 0.0)
        return groups


def ms_per(seconds: float, units: int) -> float:
    """CPU milliseconds per unit of work (a query, a memory written); 0 without any."""
    return round(seconds * 1000 / units, 3) if units else 0.0


def ms_per_unit(seconds_by_group: dict[str, float], units: int) -> dict[str, float]:
    """`ms_per` of each thread group, largest first."""
    ordered = sorted(seconds_by_group.items(), key=lambda kv: -kv[1])
    return {group: ms_per(seconds, units) for group, seconds in ordered}


def group_of(thread_name: str | None) -> str:
    if thread_name is None:
        return NATIVE
    for prefix, group in THREAD_GROUPS:
        if thread_name.startswith(prefix):
            return group
    return "other Python threads"


def stat_cpu_seconds(stat: Path) -> float:
    """User and system CPU seconds from a /proc `stat` file (of a process or a thread)."""
    # Fields after the command's closing parenthesis: utime and stime are 14 and 15.
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def process_tree_cpu(pid: int) -> float:
    """CPU seconds used so far by process `pid` and its live descendants (a server's supervisor
    and its workers); a child that already exited is not counted."""
    total = 0.0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            seconds = stat_cpu_seconds(Path(f"/proc/{current}/stat"))
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue  # ended meanwhile
        total += seconds
        pending += [int(c) for c in children]
    return total
