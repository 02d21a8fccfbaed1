"""JSON out of chat replies that wrap it in fences, prose or trailing text."""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


class MalformedReply(ValueError):
    """The reply holds no JSON value of the expected shape."""


def parse_json(text: str) -> Any:
    """The first JSON object or array in `text`, inside a ``` fence or not."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        for i, ch in enumerate(candidate):
            if ch not in "[{":
                continue
            try:
                value, _ = decoder.raw_decode(candidate, i)
            except json.JSONDecodeError:
                continue
            return value
    raise MalformedReply("no JSON value in the reply")


def string_list(value: Any, key: str = "", limit: int = 3) -> list[str]:
    """A list of non-empty strings, from a bare array or from `value[key]`."""
    if key and isinstance(value, dict):
        value = value.get(key)
    if not isinstance(value, list) or not value:
        raise MalformedReply(f"expected a non-empty JSON array{f' under {key!r}' if key else ''}")
    out = [v.strip() for v in value if isinstance(v, str) and v.strip()]
    if not out:
        raise MalformedReply("the array holds no non-empty strings")
    return out[:limit]


def unit_float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MalformedReply(f"expected a number, got {type(value).__name__}")
    return min(1.0, max(0.0, float(value)))
