"""The LLM-backed contradiction detector, built only when an LLM endpoint is configured."""

from __future__ import annotations

from typing import Any, cast

from memsvc.config import Settings
from memsvc.deadline import Deadline
from memsvc.llm.client import Llm, OpenAIChatModel
from memsvc.llm.usage import LlmUsage
from memsvc.pipeline.write.review import LlmDetector, RuleDetector


class _Ask:
    """Adapts the shared LLM client to the detector's one-call protocol (failures become None)."""

    def __init__(self, llm: Llm) -> None:
        self._llm = llm

    async def __call__(self, prompt: str, deadline: Deadline, **values: str) -> Any:
        # A write answers no report: its own ledger, whose fallback notes the rules make moot.
        usage = LlmUsage()
        # Only prompt placeholders travel in `values`; the cast tells mypy none is max_tokens.
        return await self._llm.ask(prompt, usage, deadline, lambda parsed: parsed, **cast(dict[str, Any], values))


def llm_detector(settings: Settings) -> LlmDetector:
    model = OpenAIChatModel(
        base_url=settings.llm_base_url,
        api_key=settings.llm_api_key.get_secret_value(),
        model=settings.llm_model,
        timeout_s=settings.llm_timeout_s,
        # Judging contradictions wants the same answer every time.
        temperature=0.0,
    )
    return LlmDetector(_Ask(Llm(model, settings.llm_timeout_s)), fallback=RuleDetector())
