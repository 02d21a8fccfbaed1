"""The chat client: one OpenAI-compatible call per decision, within the RPC's deadline, with fallbacks."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from memsvc.deadline import Deadline
from memsvc.llm.parse import MalformedReply, parse_json
from memsvc.llm.prompts import PromptBook
from memsvc.llm.usage import LlmUsage

log = logging.getLogger(__name__)
T = TypeVar("T")

# Time kept back from the RPC deadline for the searches that follow a failed LLM call.
_RESERVE_S = 0.5
_RESERVE_FRACTION = 0.4
_MIN_CALL_S = 0.05


@dataclass(frozen=True)
class JsonSchema:
    """A structured-output schema: the endpoint is asked for it, the reply's shape is checked anyway."""

    name: str
    schema: Mapping[str, Any]


@dataclass(frozen=True)
class ChatReply:
    text: str
    input_tokens: int
    output_tokens: int


class ChatTimeout(Exception):
    """The endpoint did not answer within the time given."""


class ChatFailed(Exception):
    """The endpoint answered with an error or could not be reached."""


class ChatModel(Protocol):
    async def complete(
        self, system: str, user: str, *, max_tokens: int, timeout_s: float, schema: JsonSchema | None = None
    ) -> ChatReply:
        """`schema`, when given, is asked of the endpoint as a structured-output JSON schema."""
        ...

    async def close(self) -> None: ...


class OpenAIChatModel:
    """Any OpenAI-compatible /v1/chat/completions endpoint (OpenAI, vLLM, Ollama) via `openai`."""

    def __init__(self, *, base_url: str, api_key: str, model: str, timeout_s: float, temperature: float) -> None:
        # Imported only with an endpoint configured: the library takes a second to import.
        from openai import AsyncOpenAI

        # No client retries: a retry would outlive the deadline the caller gave us.
        self._client = AsyncOpenAI(base_url=base_url, api_key=api_key or "unused", timeout=timeout_s, max_retries=0)
        self._model = model
        self._temperature = temperature

    async def complete(
        self, system: str, user: str, *, max_tokens: int, timeout_s: float, schema: JsonSchema | None = None
    ) -> ChatReply:
        from openai import APIError, APITimeoutError

        extra: dict[str, Any] = {}
        if schema is not None:
            extra["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema.name, "schema": dict(schema.schema), "strict": True},
            }
        try:
            reply = await asyncio.wait_for(
                self._client.chat.completions.create(
                    model=self._model,
                    messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                    temperature=self._temperature,
                    max_tokens=max_tokens,
                    timeout=timeout_s,
                    **extra,
                ),
                timeout=timeout_s,
            )
        except (TimeoutError, APITimeoutError) as exc:
            raise ChatTimeout from exc
        except APIError as exc:
            raise ChatFailed(type(exc).__name__) from exc
        text = reply.choices[0].message.content if reply.choices else None
        usage = reply.usage
        return ChatReply(
            text=text or "",
            input_tokens=usage.prompt_tokens if usage else 0,
            output_tokens=usage.completion_tokens if usage else 0,
        )

    async def close(self) -> None:
        await self._client.close()


class Llm:
    """What the strategies call. Every failure becomes None plus a note; callers use heuristics then."""

    def __init__(self, model: ChatModel | None, timeout_s: float, prompts: PromptBook | None = None) -> None:
        self._model = model
        self._timeout_s = timeout_s
        self._prompts = prompts or PromptBook()

    @property
    def configured(self) -> bool:
        return self._model is not None

    def _budget(self, deadline: Deadline) -> float:
        remaining = deadline.remaining()
        if remaining is None:
            return self._timeout_s
        return min(self._timeout_s, remaining - max(_RESERVE_S, _RESERVE_FRACTION * remaining))

    async def ask(
        self,
        prompt: str,
        usage: LlmUsage,
        deadline: Deadline,
        shape: Callable[[Any], T],
        *,
        max_tokens: int = 256,
        fallback: str = "offline heuristics",
        schema: JsonSchema | None = None,
        **values: str,
    ) -> T | None:
        """Render `prompt`, call the model, parse JSON and check its shape; None means use heuristics."""
        if self._model is None:
            return None
        budget = self._budget(deadline)
        if budget < _MIN_CALL_S:
            usage.notes.append(f"llm {prompt}: no time left before the deadline, used {fallback}")
            return None
        system, user = self._prompts.get(prompt).render(**values)
        started = time.perf_counter()
        usage.calls += 1
        try:
            reply = await self._model.complete(system, user, max_tokens=max_tokens, timeout_s=budget, schema=schema)
        except ChatTimeout:
            usage.notes.append(f"llm {prompt}: timeout after {budget * 1000:.0f} ms, used {fallback}")
            return None
        except ChatFailed as exc:
            usage.notes.append(f"llm {prompt}: endpoint error ({exc}), used {fallback}")
            return None
        except Exception:
            log.exception("llm %s: unexpected failure", prompt)
            usage.notes.append(f"llm {prompt}: endpoint error, used {fallback}")
            return None
        finally:
            usage.time_ms += (time.perf_counter() - started) * 1000
        usage.input_tokens += reply.input_tokens
        usage.output_tokens += reply.output_tokens
        try:
            return shape(parse_json(reply.text))
        except MalformedReply as exc:
            usage.notes.append(f"llm {prompt}: malformed reply ({exc}), used {fallback}")
            return None

    async def close(self) -> None:
        if self._model is not None:
            await self._model.close()
