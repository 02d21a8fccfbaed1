"""Write-time estimates of importance and quality, each in [0, 1], with their reasons."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memsvc.domain.models import MemoryKind, Role
from memsvc.pipeline.write.facts import Claim, category, extract_claims

_SMALL_TALK = re.compile(
    r"^\s*(hi|hey|hello|thanks|thank you|ok|okay|cool|nice|great|bye|good (morning|night|evening)|lol|sure)\b[\s!.?]*$",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(r"\b(i (really )?(like|love|prefer|hate|dislike|enjoy|want|need)|my favou?rite)\b", re.I)
_COMMITMENT = re.compile(r"\b(i will|i'll|i am going to|i'm going to|remind me|promise|plan to|deadline)\b", re.I)
_DECISION = re.compile(r"\b(decided|we chose|i chose|going with|settled on)\b", re.I)
_RECOMMEND = re.compile(r"\b(recommend|suggest|you should|try (to )?|consider)\b", re.I)
_DATE = re.compile(
    r"\b(\d{1,4}[-/.]\d{1,2}([-/.]\d{1,4})?|(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|yesterday|tomorrow|last (week|month|year))\b",
    re.I,
)
_NUMBER = re.compile(r"\b\d+([.,]\d+)?\b")
# Health and safety: forgetting these can hurt, so they matter most.
_SAFETY = re.compile(
    r"\b(allerg(y|ic|ies)|intoleran(t|ce)|medication|diagnos(ed|is)|asthma|diabet(es|ic)|epilep(sy|tic)|"
    r"pregnan(t|cy)|disabilit(y|ies)|emergency contact|blood type)\b",
    re.I,
)
_PROPER = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]{2,}")

_KIND_BASE = {
    MemoryKind.PREFERENCE: 0.7,
    MemoryKind.DECISION: 0.75,
    MemoryKind.COMMITMENT: 0.75,
    # How the user wants to be answered applies to every answer.
    MemoryKind.INSTRUCTION: 0.8,
    MemoryKind.RECOMMENDATION: 0.7,
    MemoryKind.FACT: 0.6,
    MemoryKind.SUMMARY: 0.6,
    MemoryKind.EPISODE: 0.55,
}


@dataclass(frozen=True)
class Estimate:
    value: float
    reason: str


def estimate_importance(
    content: str, role: Role, kind: MemoryKind, claims: Callable[[str], Sequence[Claim]] = extract_claims
) -> Estimate:
    """Explicit preferences, decisions, commitments and recommendations high; small talk low."""
    if _SMALL_TALK.match(content) or len(content.strip()) < 12:
        return Estimate(0.2, "small talk")
    value, reasons = _KIND_BASE[kind], [f"kind {kind.value}"]
    for pattern, bonus, why in (
        (_PREFERENCE, 0.1, "states a preference"),
        (_COMMITMENT, 0.1, "states a commitment"),
        (_DECISION, 0.1, "states a decision"),
    ):
        if pattern.search(content):
            value += bonus
            reasons.append(why)
    if role is Role.ASSISTANT and _RECOMMEND.search(content):
        value += 0.1
        reasons.append("assistant recommendation")
    if _SAFETY.search(content):
        value += 0.2
        reasons.append("health or safety")
    # Attribute kinds only: reasons are stored in plain text and must not quote the memory.
    personal = sorted({category(c.attribute) for c in claims(content) if c.subject == "user"})
    if personal:
        value += 0.05
        reasons.append(f"a personal fact ({', '.join(personal[:2])})")
    return Estimate(round(min(1.0, value), 3), ", ".join(reasons))


def estimate_quality(content: str) -> Estimate:
    """Specificity: enough words, named entities, dates and numbers."""
    words = len(content.split())
    length = min(1.0, words / 25)
    entities = min(1.0, len(_PROPER.findall(content)) / 3)
    dated = 1.0 if _DATE.search(content) else 0.0
    numbers = 1.0 if _NUMBER.search(content) else 0.0
    value = 0.2 + 0.45 * length + 0.2 * entities + 0.1 * dated + 0.05 * numbers
    reason = f"{words} words, {len(_PROPER.findall(content))} names" + (", dated" if dated else "")
    return Estimate(round(min(1.0, value), 3), reason)
