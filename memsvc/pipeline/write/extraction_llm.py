"""The LLM extractor: one call per batch of turns, its answer checked, the rules when it fails.

The reply must match the schema and stay inside what it was shown: every memory cites new turns
of the batch, and names as its speaker the one who said them. A reply that breaks any of this
is not trusted at all: the batch falls back to the rules, so no turn goes unextracted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

from memsvc.config import Settings
from memsvc.deadline import Deadline
from memsvc.domain.models import MemoryKind
from memsvc.llm.client import JsonSchema, Llm, OpenAIChatModel
from memsvc.llm.parse import MalformedReply
from memsvc.llm.usage import LlmUsage
from memsvc.pipeline.write.extraction import (
    ExtractedMemory,
    Extraction,
    ExtractorKind,
    RuleExtractor,
    StoredTurn,
    TurnExtractor,
    extract_by_rules,
)

_KINDS = {
    "fact": MemoryKind.FACT,
    "preference": MemoryKind.PREFERENCE,
    "decision": MemoryKind.DECISION,
    "commitment": MemoryKind.COMMITMENT,
    "recommendation": MemoryKind.RECOMMENDATION,
    "episode": MemoryKind.EPISODE,
}
_MAX_CONTENT_CHARS = 1_000
_CONTEXT_TURNS = 4

EXTRACTION_SCHEMA = JsonSchema(
    "extracted_memories",
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["memories"],
        "properties": {
            "memories": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["content", "kind", "speaker", "source_turns"],
                    "properties": {
                        "content": {"type": "string"},
                        "kind": {"type": "string", "enum": sorted(_KINDS)},
                        "speaker": {"type": "string"},
                        "source_turns": {"type": "array", "items": {"type": "integer"}},
                    },
                },
            }
        },
    },
)


def _speaker(turn: StoredTurn) -> str:
    return turn.turn.speaker_name or turn.turn.role.value


def _render(turns: Sequence[StoredTurn], first_number: int) -> str:
    lines = []
    for n, t in enumerate(turns, start=first_number):
        said = datetime.fromtimestamp(t.at, UTC).strftime("%d %B %Y %H:%M")
        lines.append(f"[{n}] ({said}) {_speaker(t)} ({t.turn.role.value}): {t.turn.content}")
    return "\n".join(lines) or "(none)"


@dataclass(frozen=True)
class _Checked:
    memories: tuple[ExtractedMemory, ...]


def check_reply(parsed: Any, batch: Sequence[StoredTurn]) -> _Checked:
    """The reply as extracted memories, or MalformedReply saying what is wrong with it."""
    if not isinstance(parsed, dict) or not isinstance(parsed.get("memories"), list):
        raise MalformedReply('expected {"memories": [...]}')
    out = []
    for i, item in enumerate(parsed["memories"]):
        if not isinstance(item, dict):
            raise MalformedReply(f"memories[{i}] is not an object")
        content, kind, speaker, sources = (item.get(k) for k in ("content", "kind", "speaker", "source_turns"))
        if not isinstance(content, str) or not content.strip() or len(content) > _MAX_CONTENT_CHARS:
            raise MalformedReply(f"memories[{i}].content must be 1 to {_MAX_CONTENT_CHARS} characters")
        if kind not in _KINDS:
            raise MalformedReply(f"memories[{i}].kind {kind!r} is not one of {sorted(_KINDS)}")
        if not isinstance(sources, list) or not sources:
            raise MalformedReply(f"memories[{i}].source_turns must name at least one turn")
        if not all(isinstance(n, int) and 1 <= n <= len(batch) for n in sources):
            raise MalformedReply(f"memories[{i}].source_turns {sources} are not all new turns 1..{len(batch)}")
        cited = [batch[n - 1] for n in dict.fromkeys(sources)]
        speakers = {_speaker(t) for t in cited}
        if speaker not in speakers:
            raise MalformedReply(
                f"memories[{i}] names {speaker!r} as its speaker, but turns {sources} were said by "
                f"{', '.join(sorted(speakers))}"
            )
        role = next(t.turn.role for t in cited if _speaker(t) == speaker)
        out.append(ExtractedMemory(" ".join(content.split()), _KINDS[kind], role, tuple(t.memory_id for t in cited)))
    return _Checked(tuple(out))


class LlmExtractor:
    def __init__(self, llm: Llm, batch_turns: int, max_tokens: int = 2_048) -> None:
        self._llm = llm
        self._batch_turns = batch_turns
        self._max_tokens = max_tokens

    async def extract(
        self, turns: Sequence[StoredTurn], context: Sequence[StoredTurn], deadline: Deadline
    ) -> Extraction:
        memories: list[ExtractedMemory] = []
        failures: list[str] = []
        tokens = 0
        before = list(context)[-_CONTEXT_TURNS:]
        for start in range(0, len(turns), self._batch_turns):
            batch = turns[start : start + self._batch_turns]
            usage = LlmUsage()
            checked = await self._llm.ask(
                "extract_memories",
                usage,
                deadline,
                partial(check_reply, batch=batch),
                max_tokens=self._max_tokens,
                fallback="the offline rules",
                schema=EXTRACTION_SCHEMA,
                context=_render(before, 1 - len(before)) if before else "(none)",
                turns=_render(batch, 1),
            )
            tokens += usage.input_tokens + usage.output_tokens
            if checked is None:
                failures += usage.notes
                memories += extract_by_rules(batch, before)
            else:
                memories += checked.memories
            before = list(batch)[-_CONTEXT_TURNS:]
        if not failures:
            return Extraction(tuple(memories), ExtractorKind.LLM, llm_tokens=tokens)
        return Extraction(tuple(memories), ExtractorKind.RULES_AFTER_LLM_FAILURE, "; ".join(failures), tokens)


def build_extractor(settings: Settings) -> TurnExtractor:
    """The LLM extractor when an endpoint is configured, the offline rules otherwise."""
    if not settings.llm_base_url:
        return RuleExtractor()
    model = OpenAIChatModel(
        base_url=settings.llm_base_url,
        api_key=settings.llm_api_key.get_secret_value(),
        model=settings.llm_model,
        timeout_s=settings.extraction_timeout_s,
        # Extraction wants the same memories from the same turns.
        temperature=0.0,
    )
    return LlmExtractor(Llm(model, settings.extraction_timeout_s), settings.extraction_batch_turns)
