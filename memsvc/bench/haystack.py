"""A user's long history before a LoCoMo conversation: the haystack of `memsvc bench locomo --haystack N`.

A real assistant user accumulates thousands of turns; a benchmark conversation alone is a fresh
user. The history is built from chats that are not the conversation being asked:

- the OTHER LoCoMo conversations of the data directory (never the one being asked), one chat per
  session, the two speakers as in the file;
- the MemoryBank chats (../shared/data/memorybank/memory_bank_en.json): each user's day of chat
  with an AI companion is one session, the user's turn named by the user's name.

Together they hold about 3,500 turns. To reach N they are reused in cycles, newest first: cycle 0
is the chats as written, every later cycle gives each chat's people other names (drawn in order
from HISTORY_NAMES, skipping the conversation's own people), replaced in the speaker names and,
as whole words, in the text, and lies further back in time. Dates: every history session lies
before the conversation starts. Within a chat the sessions keep their relative spacing;
chats are laid back to back, newest first, a day apart, so the conversation is the newest part of
the user's memory. The history is the newest N turns of that sequence (the oldest session taken
may be cut to its last turns), and it is written oldest first, one session per AddConversation
call, as a user's chats accumulate.

Two variants of the same history:
- `own`: the chats' own speakers (renamed per cycle as above); MemoryBank's companion speaks as
  the assistant (ROLE_ASSISTANT, unnamed).
- `same`: the same chats, dates and texts, spoken by the conversation's own two people: a LoCoMo
  chat's first speaker becomes the conversation's first, its second the second; a MemoryBank
  chat's user becomes one of the two (alternating by chat and cycle) and the companion the other,
  both ROLE_USER. Each turn carries one of the user's two names, so a name in a question matches
  the whole history.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memsvc.bench.harness import BenchServer
from memsvc.bench.locomo import (
    GROUP_ORDER,
    HISTORY_K,
    TURNS_ONLY,
    Conversation,
    IngestTimes,
    Loaded,
    ModeResult,
    Turn,
    evaluate_each_on_a_copy,
    ingest_conversation,
    load_conversations,
    write_conversation,
)

HISTORY_VARIANTS = ("own", "same")
# Given names for the repeated cycles of the `own` history: fixed, so runs are comparable.
HISTORY_NAMES = (
    "Aisha", "Bruno", "Chloe", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ingrid", "Jamal",
    "Keiko", "Lars", "Mei", "Nadia", "Omar", "Priya", "Quentin", "Rosa", "Sven", "Tamara",
    "Umar", "Vera", "Wen", "Ximena", "Yusuf", "Zara", "Anton", "Bianca", "Cyrus", "Daria",
    "Emil", "Fiona", "Gustav", "Hana", "Ilya", "Jana", "Kofi", "Lena", "Mateo", "Nora",
)  # fmt: skip
# Between two chats laid back to back, and between the history and the conversation.
_GAP = timedelta(days=1)
ASSISTANT = ""  # the speaker name of MemoryBank's AI companion (an unnamed assistant turn)


@dataclass(frozen=True)
class HistoryTurn:
    speaker: str  # "" for an assistant turn
    text: str


@dataclass(frozen=True)
class HistorySession:
    """One AddConversation call of the history."""

    session_id: str
    created_at: datetime
    turns: tuple[HistoryTurn, ...]


@dataclass(frozen=True)
class _Chat:
    """A source chat: its sessions (date, (speaker, text) turns) oldest first, and its people
    (the first speaker first; MemoryBank: the user, then ASSISTANT)."""

    name: str
    people: tuple[str, str]
    sessions: tuple[tuple[datetime, tuple[tuple[str, str], ...]], ...]
    from_memorybank: bool

    @property
    def turn_count(self) -> int:
        return sum(len(turns) for _, turns in self.sessions)


def locomo_chat(conversation: Conversation) -> _Chat:
    by_session: dict[int, list[Turn]] = {}
    for t in conversation.turns:
        by_session.setdefault(t.session, []).append(t)
    people = tuple(dict.fromkeys(t.speaker for t in conversation.turns))
    sessions = tuple(
        (turns[0].created_at, tuple((t.speaker, t.text) for t in turns)) for _, turns in sorted(by_session.items())
    )
    return _Chat(f"locomo-{conversation.name}", (people[0], people[1]), sessions, from_memorybank=False)


def memorybank_chats(path: Path) -> list[_Chat]:
    """Each MemoryBank user as one chat: a session per day of query/response exchanges."""
    data: dict[str, Any] = json.loads(path.read_text())
    chats = []
    for key, user in data.items():
        name = str(user.get("name") or key).strip()
        sessions = []
        for day, exchanges in sorted(user.get("history", {}).items()):
            when = datetime.strptime(day, "%Y-%m-%d").replace(hour=12, tzinfo=UTC)
            turns: list[tuple[str, str]] = []
            for exchange in exchanges:
                turns.append((name, str(exchange.get("query", "")).strip()))
                turns.append((ASSISTANT, str(exchange.get("response", "")).strip()))
            turns = [t for t in turns if t[1]]
            if turns:
                sessions.append((when, tuple(turns)))
        if sessions:
            chats.append(_Chat(f"memorybank-{name.split()[0].lower()}", (name, ASSISTANT), tuple(sessions), True))
    return chats


def history_sources(
    target: Conversation, conversations: Sequence[Conversation], memorybank: Path | None
) -> list[_Chat]:
    """The chats a conversation's history is built from: every other conversation, then MemoryBank."""
    chats = [locomo_chat(c) for c in conversations if c.name != target.name]
    if memorybank is not None:
        chats += memorybank_chats(memorybank)
    return chats


def _rename(text: str, names: dict[str, str]) -> str:
    """Whole-word replacement of each person's name (and a full name's first word) in a text."""
    for old, new in names.items():
        if not old or not new or old == new:
            continue
        text = re.sub(rf"\b{re.escape(old)}\b", new, text)
        first_old, first_new = old.split()[0], new.split()[0]
        if first_old != old:
            text = re.sub(rf"\b{re.escape(first_old)}\b", first_new, text)
    return text


def _cycle_people(chat: _Chat, cycle: int, index: int, avoid: set[str]) -> tuple[str, str]:
    """The chat's people in a cycle: as written in cycle 0, then names from HISTORY_NAMES."""
    if cycle == 0:
        return chat.people
    names = [n for n in HISTORY_NAMES if n not in avoid]
    start = 2 * (cycle * 7919 + index * 31)  # a spread, so one chat's people differ in each cycle
    first = names[start % len(names)]
    second = ASSISTANT if chat.people[1] == ASSISTANT else names[(start + 1) % len(names)]
    return first, second


def build_history(
    target: Conversation,
    sources: Sequence[_Chat],
    turns_wanted: int,
    variant: str,
) -> list[HistorySession]:
    """The newest `turns_wanted` turns of the cycled sources before `target`, oldest first."""
    if variant not in HISTORY_VARIANTS:
        raise ValueError(f"unknown history variant {variant!r}; choose from {', '.join(HISTORY_VARIANTS)}")
    if turns_wanted <= 0 or not sources or not any(c.turn_count for c in sources):
        return []
    own_people = tuple(dict.fromkeys(t.speaker for t in target.turns))
    target_people = (own_people[0], own_people[1] if len(own_people) > 1 else own_people[0])
    avoid = {n.split()[0] for c in sources for n in c.people if n} | set(target_people)
    end = min(t.created_at for t in target.turns) - _GAP
    newest_first: list[HistorySession] = []
    left = turns_wanted
    cycle = 0
    while left > 0:
        for index in reversed(range(len(sources))):
            chat = sources[index]
            people = _cycle_people(chat, cycle, index, avoid)
            if variant == "same":
                swap = chat.from_memorybank and (index + cycle) % 2 == 1
                speakers = (target_people[1], target_people[0]) if swap else target_people
            else:
                speakers = people
            shift = end - chat.sessions[-1][0]
            renames = dict(zip(chat.people, speakers, strict=True))
            # Names a cycle gave the chat's people stand in the text too (MemoryBank's "my name is Emily").
            text_names = {old: new for old, new in renames.items() if old}
            for n, (when, turns) in reversed(list(enumerate(chat.sessions, 1))):
                spoken = tuple(HistoryTurn(renames[s], _rename(text, text_names)) for s, text in turns)
                if variant == "same":
                    spoken = tuple(HistoryTurn(t.speaker or speakers[1], t.text) for t in spoken)
                spoken = spoken[-left:]
                newest_first.append(HistorySession(f"history-c{cycle}-{chat.name}-s{n}", when + shift, spoken))
                left -= len(spoken)
                if left <= 0:
                    break
            if left <= 0:
                break
            end = chat.sessions[0][0] + shift - _GAP
        cycle += 1
    return list(reversed(newest_first))


def write_history(client: Any, user: str, sessions: Sequence[HistorySession], times: IngestTimes) -> set[str]:
    """Write each history session through AddConversation; return the ids of all it stored."""
    stored: set[str] = set()
    for session in sessions:
        at = session.created_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        spoken = [
            {"role": "ROLE_ASSISTANT", "content": t.text, "create_time": at}
            if t.speaker == ASSISTANT
            else {"role": "ROLE_USER", "content": t.text, "name": t.speaker, "create_time": at}
            for t in session.turns
        ]
        response = times.timed(len(spoken), client.add_conversation, user, session.session_id, spoken)
        derived = [*response.get("extracted", []), *([response["summary"]] if "summary" in response else [])]
        stored.update(m["id"] for m in [*response.get("turns", []), *derived])
    return stored


@dataclass(frozen=True)
class HaystackLoad:
    """How long a variant's store took to write: the history's calls and the conversations'."""

    history: IngestTimes
    conversation: IngestTimes
    wall_s: float


def load_haystack_store(
    store: Path,
    conversations: Sequence[Conversation],
    histories: Mapping[str, Sequence[HistorySession]],
    *,
    ingest: str = "conversation",
) -> tuple[list[Loaded], HaystackLoad]:
    """Per conversation (its own user): its history (`histories[name]`, maybe none), then the
    conversation itself; wait for the index; stop the server."""
    from memsvc.api.client import MemoryClient

    history_times, conversation_times = IngestTimes(), IngestTimes()
    bench = BenchServer.start(store)
    client = MemoryClient(bench.address, bench.api_key, timeout_s=120)
    started = time.perf_counter()
    try:
        loaded = []
        for conversation in conversations:
            user = f"locomo-{conversation.name}"
            history_ids = write_history(client, user, histories.get(conversation.name, ()), history_times)
            write = ingest_conversation if ingest == "conversation" else write_conversation
            written = write(client, user, conversation, conversation_times)
            loaded.append(replace(written, history_ids=frozenset(history_ids)))
        bench.settle()
    finally:
        client.close()
        bench.stop()
    return loaded, HaystackLoad(history_times, conversation_times, time.perf_counter() - started)


def save_loaded(path: Path, loaded: Sequence[Loaded]) -> None:
    """What a kept store stands for, so a later run can ask it again without writing it again."""
    path.write_text(
        json.dumps(
            [
                {
                    "conversation": item.conversation.name,
                    "user": item.user,
                    "evidence_of": {k: list(v) for k, v in item.evidence_of.items()},
                    "turn_ids": sorted(item.turn_ids),
                    "history_ids": sorted(item.history_ids),
                }
                for item in loaded
            ]
        )
    )


def read_loaded(path: Path, conversations: Sequence[Conversation]) -> list[Loaded] | None:
    """The kept store's map, or None when it was loaded from other conversations."""
    by_name = {c.name: c for c in conversations}
    items = json.loads(path.read_text())
    if sorted(i["conversation"] for i in items) != sorted(by_name):
        return None
    return [
        Loaded(
            by_name[i["conversation"]],
            i["user"],
            {k: tuple(v) for k, v in i["evidence_of"].items()},
            frozenset(i["turn_ids"]),
            frozenset(i["history_ids"]),
        )
        for i in items
    ]


HAYSTACK_COLUMNS = ("fresh", *HISTORY_VARIANTS)


def _cell(value: float, base: float) -> str:
    return f"{value:6.3f} {value - base:+6.3f}"


def format_comparison(mode: str, turns: int, by_variant: Mapping[str, ModeResult]) -> str:
    """One mode, fresh vs each history variant: recall@7 per group and latency, with the deltas."""
    fresh = by_variant["fresh"].as_dict()
    variants = [v for v in HISTORY_VARIANTS if v in by_variant]
    head = "".join(f"  {v + ' R@7':>13}" for v in variants)
    lines = [
        f"{mode.upper()}  fresh user vs {turns} turns of history before each conversation "
        f"(own: other speakers; same: the conversation's two people)",
        f"  {'group':<12} {'n':>4}  {'fresh R@7':>9}{head}",
    ]
    numbers = {v: by_variant[v].as_dict() for v in variants}
    for g in (*GROUP_ORDER, TURNS_ONLY):
        base = float(fresh[g]["recall@7"])
        cells = "".join(f"  {_cell(float(numbers[v][g]['recall@7']), base)}" for v in variants)
        lines.append(f"  {g:<12} {fresh[g]['n']:>4}  {base:>9.3f}{cells}")
    for q, label in (("p50", "latency p50"), ("p95", "latency p95"), ("recall_stage_p50", "recall stage p50")):
        base = float(fresh["latency_ms"][q])
        cells = "".join(
            f"  {numbers[v]['latency_ms'][q]:>7.1f} x{numbers[v]['latency_ms'][q] / max(base, 1e-9):<4.2f}"
            for v in variants
        )
        lines.append(f"  {label:<17}  {base:>7.1f} ms{cells}")
    share = "".join(f"  {numbers[v].get(f'history_share@{HISTORY_K}', 0.0):>13.3f}" for v in variants)
    lines.append(f"  {f'history in top {HISTORY_K}':<17}  {'':>9}{share}")
    return "\n".join(lines)


def run_haystack(args: argparse.Namespace, conversations: Sequence[Conversation], modes: Sequence[str]) -> int:
    """`memsvc bench locomo --haystack N`: every mode on a fresh, an `own` and a `same` store."""
    turns = int(args.haystack)
    all_conversations = load_conversations(args.data)
    memorybank: Path | None = args.memorybank
    if memorybank is not None and not memorybank.is_file():
        print(f"no MemoryBank file at {memorybank}: the history is the other conversations only", file=sys.stderr)
        memorybank = None
    variants = [v for v in HAYSTACK_COLUMNS if v in ("fresh", *args.haystack_variants)]
    keep = args.data_dir
    root = keep or Path(tempfile.mkdtemp(prefix="memsvc-locomo-haystack-"))
    results: dict[str, dict[str, ModeResult]] = {}
    ingest: dict[str, Any] = {}
    try:
        for variant in variants:
            store, manifest = root / variant, root / f"{variant}.loaded.json"
            loaded = read_loaded(manifest, conversations) if manifest.is_file() and store.is_dir() else None
            if loaded is not None:
                print(f"{variant}: asking the store kept in {store}", flush=True)
            else:
                shutil.rmtree(store, ignore_errors=True)
                histories = {
                    c.name: build_history(c, history_sources(c, all_conversations, memorybank), turns, variant)
                    for c in conversations
                    if variant != "fresh"
                }
                loaded, load = load_haystack_store(store, conversations, histories, ingest=args.ingest)
                save_loaded(manifest, loaded)
                h, w = load.history.as_dict(), load.conversation.as_dict()
                ingest[variant] = {"history": h, "conversation": w, "wall_s": round(load.wall_s, 1)}
                rate = (
                    f"history {h['turns']} turns in {h['calls']} calls, {h['ms_per_turn']} ms per turn "
                    if h["turns"]
                    else ""
                )
                print(
                    f"{variant}: wrote {rate}+ conversations {w['turns']} turns, {w['ms_per_turn']} ms per turn; "
                    f"{load.wall_s:.1f} s with the index settled",
                    flush=True,
                )
            got, skipped = evaluate_each_on_a_copy(store, loaded, modes, args.min_relevance)
            for mode, why in skipped.items():
                print(f"{mode.upper()}  skipped on {variant} ({why})")
            for mode, result in got.items():
                results.setdefault(mode, {})[variant] = result
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)
    for mode, by_variant in results.items():
        if "fresh" in by_variant:
            print(format_comparison(mode, turns, by_variant))
    if args.json:
        numbers: dict[str, Any] = {
            "haystack": {"turns": turns, "variants": variants, "memorybank": str(memorybank or "")},
        }
        for mode, by_variant in results.items():
            numbers[mode.upper()] = {v: r.as_dict() for v, r in by_variant.items()}
        numbers["ingest"] = {"mode": args.ingest, **ingest}
        args.json.write_text(json.dumps(numbers, indent=2) + "\n")
    return 0
