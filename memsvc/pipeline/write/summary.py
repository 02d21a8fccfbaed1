"""Session summaries (level 1 above the level-0 turns): the extractive summarizer.

Without an LLM the summary is the session's most distinctive turns in order: those whose words
the rest of the session does not repeat (names, places, numbers weigh more), so that small talk
never makes it in; in a talk with an assistant, the user's turns before the assistant's. Each
summary names the turns it quotes.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from memsvc.domain.models import Role
from memsvc.llm.text import content_words, named_entities, sentences
from memsvc.pipeline.write.extraction import StoredTurn

_QUOTE_CHARS = 220


@dataclass(frozen=True)
class SessionSummary:
    content: str
    source_ids: tuple[str, ...]
    # When the summary is made of its sources' own words: how many words of it each source is.
    # Its vector is then composed from theirs (ConversationPath), as mean pooling would weigh
    # them, instead of running the model once more over the whole summary.
    quoted_words: tuple[int, ...] = ()


class SessionSummarizer(Protocol):
    async def summarize(self, session_id: str, turns: Sequence[StoredTurn]) -> SessionSummary | None:
        """A summary of the session's turns (oldest first), or None while it is too short."""
        ...


def _day(at: float) -> str:
    day = datetime.fromtimestamp(at, UTC)
    return f"{day.day} {day:%B} {day.year}"


def _quote(content: str) -> str:
    """The turn's first sentences, up to a quote's length."""
    out = ""
    for sentence in sentences(content):
        if out and len(out) + len(sentence) > _QUOTE_CHARS:
            break
        out = f"{out} {sentence}".strip()
    return out if len(out) <= _QUOTE_CHARS else out[: _QUOTE_CHARS - 3].rstrip() + "..."


class ExtractiveSummarizer:
    def __init__(self, min_turns: int = 4, max_quotes: int = 6) -> None:
        self._min_turns = min_turns
        self._max_quotes = max_quotes

    async def summarize(self, session_id: str, turns: Sequence[StoredTurn]) -> SessionSummary | None:
        if len(turns) < self._min_turns:
            return None
        words = [set(content_words(t.turn.content)) for t in turns]
        entities = [set(named_entities(t.turn.content)) for t in turns]
        frequency = Counter(w for bag in words for w in bag)
        n = len(turns)

        def distinctiveness(k: int) -> float:
            if len(words[k]) < 3 or turns[k].acknowledgement:
                return 0.0  # "haha yes!", "ty. yes lets redo it" say nothing a summary needs
            idf = sum(math.log(1 + n / frequency[w]) for w in words[k])
            return (idf + 2.0 * len(entities[k])) / math.sqrt(len(words[k]))

        # Talking to an assistant, the session is about what the user said (their news, their
        # question); the assistant's answers are quoted only where the user's turns leave room.
        def rank(k: int) -> tuple[bool, float]:
            return (turns[k].turn.role is not Role.ASSISTANT, distinctiveness(k))

        wanted = min(self._max_quotes, max(2, n // 5))
        ranked = sorted((k for k in range(n) if distinctiveness(k) > 0), key=rank, reverse=True)
        chosen = sorted(ranked[:wanted])
        if not chosen:
            return None
        speakers = sorted({t.turn.speaker_name or t.turn.role.value for t in turns})
        first, last = _day(turns[0].at), _day(turns[-1].at)
        when = first if first == last else f"{first} to {last}"
        lines = [f"Conversation {session_id} on {when} between {' and '.join(speakers)}:"]
        quoted: list[int] = []
        for k in chosen:
            turn = turns[k].turn
            quote = _quote(turn.content)
            lines.append(f"{turn.speaker_name or turn.role.value}: {quote}")
            quoted.append(len(quote.split()))
        return SessionSummary("\n".join(lines), tuple(turns[k].memory_id for k in chosen), tuple(quoted))
