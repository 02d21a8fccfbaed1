"""The LLM extractor: one call per batch of turns, its answer checked, the rules when it fails.

The reply must match the schema and stay inside what it was shown: every memory cites new turns
of the batch, and names as its speaker the one who said them. A reply that breaks any of this
is not trusted at all: the batch falls back to the rules, so no turn goes unextracted.

In the same call the model decides, for each memory, against the user's stored memories nearest
to the turns (mem0's and Graphiti's pattern): it adds a new fact, updates a stored one (which the
write path then supersedes), or only repeats one (whose confirmation count rises). The stored
memories are shown numbered; a decision naming a number that was not shown is ignored (logged),
and the memory is added: the model can only ever point at memories of this user it was shown.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

from memsvc.config import Settings
from memsvc.deadline import Deadline
from memsvc.domain.models import Memory, MemoryKind
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
    "instruction": MemoryKind.INSTRUCTION,
}
_MAX_CONTENT_CHARS = 1_000
_CONTEXT_TURNS = 4
_ACTIONS = ("add", "update", "repeat")

log = logging.getLogger(__name__)

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
                    "required": ["content", "kind", "speaker", "source_turns", "action", "memory"],
                    "properties": {
                        "content": {"type": "string"},
                        "kind": {"type": "string", "enum": sorted(_KINDS)},
                        "speaker": {"type": "string"},
                        "source_turns": {"type": "array", "items": {"type": "integer"}},
                        "action": {"type": "string", "enum": list(_ACTIONS)},
                        # The number of the stored memory it updates or repeats; 0 for "add".
                        "memory": {"type": "integer"},
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


def _render_related(related: Sequence[Memory]) -> str:
    lines = []
    for n, m in enumerate(related, start=1):
        said = datetime.fromtimestamp(m.created_at, UTC).strftime("%d %B %Y")
        lines.append(f"[M{n}] ({said}, {m.kind.value}) {m.content}")
    return "\n".join(lines) or "(none)"


def _decision(item: dict[str, Any], related: Sequence[Memory], i: int) -> tuple[str, str]:
    """(updates, repeats): the id of the stored memory the item updates or repeats, if any. A
    decision naming a memory that was not shown is ignored: the memory is added."""
    action = item.get("action", "add")
    if action not in _ACTIONS:
        raise MalformedReply(f"memories[{i}].action {action!r} is not one of {list(_ACTIONS)}")
    if action == "add":
        return "", ""
    number = item.get("memory")
    if not isinstance(number, int) or not 1 <= number <= len(related):
        log.warning(
            "llm extraction: memories[%d] says %s memory %r, which was not among the %d shown; added instead",
            i,
            action,
            number,
            len(related),
        )
        return "", ""
    target = related[number - 1].id
    return (target, "") if action == "update" else ("", target)


def check_reply(parsed: Any, batch: Sequence[StoredTurn], related: Sequence[Memory] = ()) -> _Checked:
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
        updates, repeats = _decision(item, related, i)
        text = " ".join(content.split())
        out.append(ExtractedMemory(text, _KINDS[kind], role, tuple(t.memory_id for t in cited), updates, repeats))
    return _Checked(tuple(out))


class LlmExtractor:
    reads_related = True

    def __init__(self, llm: Llm, batch_turns: int, max_tokens: int = 2_048) -> None:
        self._llm = llm
        self._batch_turns = batch_turns
        self._max_tokens = max_tokens

    async def extract(
        self,
        turns: Sequence[StoredTurn],
        context: Sequence[StoredTurn],
        deadline: Deadline,
        related: Sequence[Memory] = (),
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
                partial(check_reply, batch=batch, related=related),
                max_tokens=self._max_tokens,
                fallback="the offline rules",
                schema=EXTRACTION_SCHEMA,
                context=_render(before, 1 - len(before)) if before else "(none)",
                turns=_render(batch, 1),
                memories=_render_related(related),
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
