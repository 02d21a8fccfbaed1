"""The CLI's output for a person at a terminal: one line per memory, what it is and why it ranked.

Input is the response as `memsvc.api.client.as_dict` gives it (proto field names, enum names,
RFC 3339 times); scripts get that JSON itself (`--json`, or whenever stdout is not a terminal).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

Message = Mapping[str, Any]

_PREFIXES = ("MEMORY_KIND_", "ROLE_", "WRITE_OUTCOME_", "MEMORY_CHANGE_", "EXTRACTOR_", "TIER_", "QUERY_MODE_")


def enum_name(value: str) -> str:
    """`MEMORY_KIND_PREFERENCE` -> `preference`."""
    for prefix in _PREFIXES:
        if value.startswith(prefix):
            return value[len(prefix) :].lower().replace("_", " ")
    return value.lower()


def age(rfc3339: str, now: datetime) -> str:
    """How long ago, in the largest whole unit: `now`, `5 min`, `3 h`, `12 d`, `2 y`."""
    if not rfc3339:
        return ""
    when = datetime.fromisoformat(rfc3339.replace("Z", "+00:00"))
    seconds = max((now - when).total_seconds(), 0.0)
    for unit, size in (("y", 365 * 86_400), ("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return "now"


def clip(text: str, width: int) -> str:
    """One line of at most `width` characters, cut at a word with an ellipsis."""
    line = " ".join(text.split())
    if len(line) <= width:
        return line
    cut = line[: max(width - 1, 1)]
    if line[len(cut)] != " " and " " in cut[width // 2 :]:
        cut = cut[: cut.rindex(" ")]  # a word cut in two reads worse than a shorter line
    return cut.rstrip() + "\u2026"


def why_ranked(breakdown: Message) -> str:
    """How well a memory matched on its own: its relevance, the stronger of its meaning (the
    cosine, shown raw; relevance rescales it so that unrelated text is near 0) and its words (the
    share of the query's IDF weight it holds).

    The other signals (recency, importance, usage) order matches; they do not make one.
    """
    value = {k: float(breakdown.get(k, 0.0)) for k in ("relevance", "semantic", "term_coverage")}
    return f"{value['relevance']:.2f} (cosine {value['semantic']:.2f}, words {value['term_coverage']:.2f})"


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    padded = [cell.ljust(width) for cell, width in zip(cells[:-1], widths, strict=False)]
    return "  ".join([*padded, cells[-1]]).rstrip()


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], width: int, wide_column: int) -> list[str]:
    """Columns sized to their content; column `wide_column` gets what the line has left."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    others = sum(w for i, w in enumerate(widths) if i != wide_column) + 2 * (len(header) - 1)
    widths[wide_column] = max(min(widths[wide_column], width - others), 20)
    clipped = [[clip(c, widths[i]) if i == wide_column else c for i, c in enumerate(r)] for r in rows]
    return [_row(header, widths), *(_row(r, widths) for r in clipped)]


def memories_table(memories: Sequence[Message], width: int, now: datetime) -> list[str]:
    rows = [
        [m.get("id", ""), enum_name(m.get("kind", "")), age(m.get("create_time", ""), now), m.get("content", "")]
        for m in memories
    ]
    return _table(["id", "kind", "age", "content"], rows, width, 3) if rows else ["no memories"]


def query_lines(response: Message, width: int, now: datetime) -> list[str]:
    ranked = response.get("memories", [])
    if not ranked:
        return ["no memories matched"]
    rows = []
    for n, r in enumerate(ranked, start=1):
        m = r.get("memory", {})
        why = why_ranked(r.get("score_breakdown", {}))
        kind = enum_name(m.get("kind", "")) + (" (stale)" if m.get("stale") else "")
        if m.get("outdated"):
            kind += " (outdated)"
        rows.append(
            [str(n), f"{float(r.get('score', 0.0)):.2f}", kind, age(m.get("create_time", ""), now), m["content"], why]
        )
    # Content takes what the other columns leave; the reason is printed in full after it.
    header = ["#", "score", "kind", "age", "content", "relevance"]
    why_width = max(len(r[5]) for r in [header, *rows])
    lines = _table(header[:5], [r[:5] for r in rows], width - why_width - 2, 4)
    content_end = max(len(line) for line in lines)
    out = [lines[0].ljust(content_end) + "  relevance"]
    for line, row, r in zip(lines[1:], rows, ranked, strict=True):
        out.append(f"{line.ljust(content_end)}  {row[5]}")
        out += [f"      from: {clip(s.get('content', ''), width - 12)}" for s in r.get("sources", [])]
        out += [f"      said: {clip(c.get('content', ''), width - 12)}" for c in r.get("context", [])]
    report = response.get("report", {})
    mode = enum_name(report.get("mode", "")) if report.get("mode") else ""
    footer = f"{len(ranked)} result{'s' if len(ranked) != 1 else ''}" + (f", mode {mode}" if mode else "")
    return [*out, footer]


def add_lines(response: Message, width: int, now: datetime) -> list[str]:
    out = []
    for m, result in zip(response.get("memories", []), response.get("results", []), strict=False):
        outcome = enum_name(result.get("outcome", ""))
        line = f"{outcome}  {m.get('id', '')}  {clip(m.get('content', ''), max(width - 50, 20))}"
        superseded = result.get("superseded_ids", [])
        out.append(line + (f"  (supersedes {', '.join(superseded)})" if superseded else ""))
    return out


def conversation_lines(response: Message, width: int, now: datetime) -> list[str]:
    results = response.get("turn_results", [])
    new = sum(1 for r in results if r.get("outcome") == "WRITE_OUTCOME_CREATED")
    out = [f"{len(results)} turns, {new} new; extractor {enum_name(response.get('extractor', ''))}"]
    extracted = response.get("extracted", [])
    if extracted:
        out.append(f"extracted {len(extracted)}:")
        out += memories_table(extracted, width, now)
    if response.get("summary"):
        out.append(f"summary: {clip(response['summary'].get('content', ''), width - 9)}")
    return out


def memory_lines(response: Message, width: int, now: datetime) -> list[str]:
    m = response.get("memory", response)
    fields = [
        ("id", m.get("id", "")),
        ("kind", enum_name(m.get("kind", ""))),
        ("role", enum_name(m.get("role", ""))),
        ("created", f"{m.get('create_time', '')} ({age(m.get('create_time', ''), now)} ago)"),
        ("session", m.get("session_id", "")),
        ("importance", f"{float(m.get('importance', 0.0)):.2f}"),
        ("tier", enum_name(m.get("tier", ""))),
        ("status", enum_name(m.get("retention_status", "")).replace("retention status ", "")),
        ("sources", ", ".join(m.get("source_memory_ids", []))),
        ("content", m.get("content", "")),
    ]
    return [f"{name:<11}{value}" for name, value in fields if value]


def list_lines(response: Message, width: int, now: datetime) -> list[str]:
    out = memories_table(response.get("memories", []), width, now)
    token = response.get("next_page_token")
    return [*out, f"more: --page-token {token}"] if token else out


def history_lines(response: Message, width: int, now: datetime) -> list[str]:
    rows = [
        [
            str(v.get("version", "")),
            age(v.get("create_time", ""), now),
            enum_name(v.get("change", "")),
            v.get("actor", ""),
            v.get("description", "") or v.get("content", ""),
        ]
        for v in response.get("versions", [])
    ]
    return _table(["version", "age", "change", "actor", "what"], rows, width, 4) if rows else ["no history"]


def forget_lines(response: Message, width: int, now: datetime) -> list[str]:
    return [f"erased {response.get('deleted_count', 0)} memories"]


Renderer = Callable[[Message, int, datetime], list[str]]

RENDERERS: dict[str, Renderer] = {
    "add": add_lines,
    "add-conversation": conversation_lines,
    "query": query_lines,
    "get": memory_lines,
    "list": list_lines,
    "history": history_lines,
    "forget": forget_lines,
}


def ids_of(command: str, response: Message) -> list[str]:
    """What `--quiet` prints: the ids a script would pipe on, one per line."""
    if command == "query":
        return [r["memory"]["id"] for r in response.get("memories", [])]
    if command == "get":
        return [response.get("memory", {}).get("id", "")]
    if command == "add-conversation":
        summary = [response["summary"]["id"]] if response.get("summary") else []
        return [m["id"] for m in [*response.get("turns", []), *response.get("extracted", [])]] + summary
    if command == "history":
        return [v["id"] for v in response.get("versions", [])]
    if command == "forget":
        return [str(response.get("deleted_count", 0))]
    return [m["id"] for m in response.get("memories", [])]


def render(command: str, response: Message, width: int, now: datetime | None = None) -> str:
    return "\n".join(RENDERERS[command](response, width, now or datetime.now(UTC)))
