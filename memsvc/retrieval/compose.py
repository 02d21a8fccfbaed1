"""Context composition (seed 002, stage 4): a ready-to-use block within a token budget.

Up to three blocks, each with a share of the budget: the user's instructions (how they want the
assistant to behave), whatever the query is about; the returned memories, best first, each with
the turns attached to it; and the conversation's recent turns the caller passed. A block that
needs less than its share leaves the rest to the others. Within the memories, near-duplicates
are dropped, and lower-scored memories are dropped before a higher-scored one is shortened.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memsvc.domain.models import Memory, MemoryKind, RankedMemory, spoken_text, utc_from_s
from memsvc.llm.text import estimate_tokens, jaccard, stems
from memsvc.pipeline.context import Turn

CONTRACT_HEADER = "How the user wants you to behave:"
HEADER = "Relevant memories (most applicable first):"
RECENT_HEADER = "Recent conversation:"
# Each block's share of the budget, when all three have more to say than fits.
CONTRACT_SHARE = 0.2
MEMORIES_SHARE = 0.6
RECENT_SHARE = 0.2


@dataclass(frozen=True)
class Composed:
    """The block, and how many memories (near-duplicates or over budget) it left out."""

    text: str
    left_out: int


def _line(m: Memory, lead: str = "-") -> str:
    day = utc_from_s(m.created_at).strftime("%Y-%m-%d")
    kind = "" if m.kind is MemoryKind.FACT else f" {m.kind.value}"
    if m.stale or m.outdated:
        kind += ", may be outdated"
    # A conversation turn says who spoke: "Melanie: Luna and Oliver!".
    return f"{lead} [{day} {m.role.value}{kind}] {spoken_text(m.content, m.speaker_name).strip()}"


def _shortened(line: str, room: int) -> str:
    words = line.split()
    keep = max(1, int(room / 1.3))
    return line if len(words) <= keep else " ".join(words[:keep]) + " ..."


def _allocate(budget: int, needs: Sequence[int], shares: Sequence[float]) -> list[int]:
    """Each block's tokens: its share of `budget`, what a block does not need going to the
    others by their shares (water filling)."""
    out = [0] * len(needs)
    open_blocks = [i for i, need in enumerate(needs) if need > 0]
    left = budget
    while open_blocks and left > 0:
        weight = sum(shares[i] for i in open_blocks)
        grant = {i: int(left * shares[i] / weight) for i in open_blocks}
        satisfied = [i for i in open_blocks if needs[i] - out[i] <= grant[i]]
        if not satisfied:
            for i in open_blocks:
                out[i] += grant[i]
            break
        for i in satisfied:
            left -= needs[i] - out[i]
            out[i] = needs[i]
            open_blocks.remove(i)
    return out


def _memory_lines(memories: Sequence[RankedMemory], skip: set[str], broad: bool) -> tuple[list[list[str]], int]:
    """Each memory's lines (itself, then its attached turns), best first; and how many were left
    out as near-duplicates of a better one or as a stale summary whose turns are there too."""
    present = {r.memory.id for r in memories}
    threshold = 0.5 if broad else 0.7
    kept_terms: list[set[str]] = []
    out: list[list[str]] = []
    left_out = 0
    for r in memories:
        if r.memory.id in skip:
            continue
        if r.memory.stale and present.intersection(r.memory.source_ids):
            left_out += 1  # its own turns, fresher than it, are there
            continue
        terms = stems(r.memory.content)
        if any(jaccard(terms, k) >= threshold for k in kept_terms):
            left_out += 1
            continue
        kept_terms.append(terms)
        out.append([_line(r.memory), *(_line(c, "  ~") for c in r.context)])
    return out, left_out


def _fill(header: str, groups: Sequence[Sequence[str]], room: int, shorten_first: bool) -> tuple[list[str], int]:
    """The header and as many whole groups as fit in `room` tokens, in order; the first group is
    shortened to fit when none would (`shorten_first`). Returns the lines and the groups left out."""
    used = estimate_tokens(header)
    lines: list[str] = []
    left_out = 0
    for group in groups:
        cost = sum(estimate_tokens(line) for line in group)
        if used + cost <= room:
            lines.extend(group)
            used += cost
        elif not lines and shorten_first and used < room:
            line = _shortened(group[0], room - used)
            lines.append(line)
            used += estimate_tokens(line)
        else:
            left_out += 1
    return ([header, *lines] if lines else []), left_out


def compose_context(
    memories: Sequence[RankedMemory],
    token_budget: int,
    broad: bool = False,
    instructions: Sequence[Memory] = (),
    recent: Sequence[Turn] = (),
) -> Composed:
    """The context block of an answer: the user's `instructions` (newest first), the returned
    `memories` (best first; `broad`: a list question, near-duplicates dropped more eagerly) and
    the `recent` turns of the conversation (oldest first)."""
    contract = [[_line(m)] for m in sorted(instructions, key=lambda m: -m.created_at)]
    groups, left_out = _memory_lines(memories, {m.id for m in instructions}, broad)
    turns = [[f"- {t.role.value}: {' '.join(t.content.split())}"] for t in recent]
    blocks = ((CONTRACT_HEADER, contract), (HEADER, groups), (RECENT_HEADER, turns))
    needs = [
        estimate_tokens(header) + sum(estimate_tokens(line) for g in block for line in g) if block else 0
        for header, block in blocks
    ]
    rooms = _allocate(token_budget, needs, (CONTRACT_SHARE, MEMORIES_SHARE, RECENT_SHARE))
    contract_lines, _ = _fill(CONTRACT_HEADER, contract, rooms[0], shorten_first=True)
    memory_lines, over = _fill(HEADER, groups, rooms[1], shorten_first=True)
    # The most recent turns matter most: fill from the newest back, then put them in order.
    recent_lines, _ = _fill(RECENT_HEADER, turns[::-1], rooms[2], shorten_first=True)
    if recent_lines:
        recent_lines = [recent_lines[0], *recent_lines[:0:-1]]
    sections = [lines for lines in (contract_lines, memory_lines, recent_lines) if lines]
    return Composed("\n\n".join("\n".join(lines) for lines in sections), left_out + over)
