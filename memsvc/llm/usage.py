"""The ledger of a request's LLM calls, kept by the LLM client and read by whoever reports on it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LlmUsage:
    """The ledger of one request's LLM calls: count, time, tokens, and what fell back and why.

    A query's report carries one (and shows it to the caller); a write keeps its own.
    """

    calls: int = 0
    time_ms: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    notes: list[str] = field(default_factory=list)
