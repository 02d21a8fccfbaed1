"""Context composition (seed 002): a ready-to-use block of memories within a token budget, diverse."""

from __future__ import annotations

from collections.abc import Sequence

from memsvc.domain.models import MemoryKind, RankedMemory, spoken_text, utc_from_s
from memsvc.llm.text import estimate_tokens, jaccard, stems

HEADER = "Relevant memories (most applicable first):"


def _line(r: RankedMemory) -> str:
    m = r.memory
    day = utc_from_s(m.created_at).strftime("%Y-%m-%d")
    kind = "" if m.kind is MemoryKind.FACT else f" {m.kind.value}"
    lead = "  ~" if r.context_neighbor else "-"
    if m.stale:
        kind += ", may be outdated"
    # A conversation turn says who spoke: "Melanie: Luna and Oliver!".
    return f"{lead} [{day} {m.role.value}{kind}] {spoken_text(m.content, m.speaker_name).strip()}"


def compose_context(memories: Sequence[RankedMemory], token_budget: int, broad: bool = False) -> tuple[str, int]:
    """The block and how many memories it left out (near-duplicates or over budget).

    Near-duplicates (term Jaccard at or above the threshold) are dropped, more eagerly for list
    questions; lower-scored memories are dropped before a higher-scored one is truncated. A stale
    summary gives way to its own source turns when they are candidates too (the fresher
    evidence); kept alone, it says it may be outdated.
    """
    present = {r.memory.id for r in memories}
    threshold = 0.5 if broad else 0.7
    used = estimate_tokens(HEADER)
    lines: list[str] = []
    kept: list[set[str]] = []
    left_out = 0
    for r in memories:
        if r.memory.stale and present.intersection(r.memory.source_ids):
            left_out += 1
            continue
        terms = stems(r.memory.content)
        if not r.context_neighbor and any(jaccard(terms, k) >= threshold for k in kept):
            left_out += 1
            continue
        line = _line(r)
        cost = estimate_tokens(line)
        if used + cost > token_budget:
            if lines:
                left_out += 1
                continue
            words = line.split()
            room = max(1, int((token_budget - used) / 1.3))
            line = " ".join(words[:room]) + " ..."
            cost = estimate_tokens(line)
        lines.append(line)
        kept.append(terms)
        used += cost
    if not lines:
        return "", left_out
    return "\n".join([HEADER, *lines]), left_out
