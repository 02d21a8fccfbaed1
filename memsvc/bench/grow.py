"""One user grown through AddConversation of real dialogue, measured as the history grows.

The user's first conversation is a LoCoMo one (the probe): its questions, whose evidence turns
are known, are asked at every point, so recall is measured on the user's oldest memories while
the history above them grows. The rest of the history is 20-turn sessions cut from the other
LoCoMo conversations and the MemoryBank dialogues (user and assistant turns), cycled: each
cycle gives the speakers other names and moves the dates on, and from the second cycle on each
turn is followed by one sentence of another turn, so that a cycle is no word-for-word repeat
(the write path confirms a duplicate instead of storing it again).
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memsvc.bench.harness import BenchServer, LatencySummary, drive_queries, percentile
from memsvc.bench.haystack import ASSISTANT, HistoryTurn, locomo_chat, memorybank_chats
from memsvc.bench.locomo import IngestTimes, Loaded, Scores, ingest_conversation, load_conversation, query_with

SESSION_TURNS = 20
_NAMES = (
    "Avery", "Blake", "Camila", "Dario", "Elena", "Farid", "Greta", "Hiro", "Imani", "Jonas",
    "Kira", "Luca", "Maya", "Nikhil", "Olga", "Pablo", "Quinn", "Rosa", "Sami", "Tomas",
)  # fmt: skip
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def filler_sessions(data_dir: Path, probe: Path, seed: int) -> Iterator[list[dict[str, Any]]]:
    """Endless AddConversation sessions of SESSION_TURNS turns (see the module doc)."""
    locomo = sorted(p for p in (data_dir / "locomo").glob("*.json") if p != probe)
    chats = [locomo_chat(load_conversation(p)) for p in locomo]
    chats += memorybank_chats(data_dir / "memorybank" / "memory_bank_en.json")
    stream = [HistoryTurn(speaker, text) for chat in chats for _, turns in chat.sessions for speaker, text in turns]
    rng = random.Random(seed)
    when = datetime(2024, 1, 1, 9, tzinfo=UTC)
    cycle = 0
    while True:
        names: dict[str, str] = {}
        for start in range(0, len(stream) - SESSION_TURNS + 1, SESSION_TURNS):
            session = []
            for turn in stream[start : start + SESSION_TURNS]:
                text = turn.text
                if cycle:
                    other = _SENTENCE.split(rng.choice(stream).text)[0]
                    text = f"{text} {other}"
                if turn.speaker != ASSISTANT:
                    name = names.setdefault(turn.speaker, _NAMES[(len(names) + cycle * 7) % len(_NAMES)])
                    session.append({"role": "ROLE_USER", "content": text, "name": name, "create_time": _stamp(when)})
                else:
                    session.append({"role": "ROLE_ASSISTANT", "content": text, "create_time": _stamp(when)})
                when += timedelta(minutes=2)
            # Sessions a few hours apart, as an assistant used every day has them: 100,000
            # memories then span about a year and a half from 2024, not years past today, which
            # the service refuses as a future create_time.
            when += timedelta(hours=3)
            yield session
        cycle += 1


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class GrowthPoint:
    memories: int
    turns_written: int
    load_s: float
    query: LatencySummary
    recall: dict[str, float | int]
    add_conversation_p50_ms: float
    add_conversation_p95_ms: float
    # The same sessions written for a user without a history, beside the grown one's.
    add_conversation_new_user_p50_ms: float
    disk_bytes: dict[str, int]


class GrowingUser:
    """The probe conversation written first; then filler sessions until each target count."""

    def __init__(self, bench: BenchServer, data_dir: Path, user: str, seed: int) -> None:
        from memsvc.api.client import MemoryClient

        self._bench = bench
        self._client = MemoryClient(bench.address, bench.api_key, timeout_s=300)
        self._user = user
        self._probe_path = sorted((data_dir / "locomo").glob("*.json"))[0]
        self._fillers = filler_sessions(data_dir, self._probe_path, seed)
        self._turns = 0
        self._sessions = 0
        self._loaded: Loaded | None = None

    def close(self) -> None:
        self._client.close()

    def write_probe(self) -> None:
        conversation = load_conversation(self._probe_path)
        self._loaded = ingest_conversation(self._client, self._user, conversation, IngestTimes())
        self._turns += len(conversation.turns)

    def count(self) -> int:
        from memsvc.bench.scaling import stored_memories

        return stored_memories(self._bench, self._user)

    def grow_to(self, target: int, check_every: int = 25) -> tuple[int, float]:
        """Write filler sessions until the user holds `target` memories; (memories, seconds)."""
        started = time.perf_counter()
        count = self.count()
        while count < target:
            for _ in range(check_every):
                self._write_session()
            self._bench.settle(timeout_s=600)
            count = self.count()
        return count, time.perf_counter() - started

    def _next_session(self) -> tuple[str, list[dict[str, Any]]]:
        """The next filler session and its id, counted as written."""
        session = next(self._fillers)
        self._sessions += 1
        self._turns += len(session)
        return f"grow-{self._sessions}", session

    def _write_session(self) -> float:
        return self._timed_write(self._user, *self._next_session())

    def _timed_write(self, user: str, session_id: str, session: list[dict[str, Any]]) -> float:
        started = time.perf_counter()
        self._client.add_conversation(user, session_id, session)
        return (time.perf_counter() - started) * 1000

    def add_conversation_ms(self, sessions: int) -> list[float]:
        """The wall time of `sessions` AddConversation calls of SESSION_TURNS turns, one at a time."""
        return [self._write_session() for _ in range(sessions)]

    def add_beside_a_new_user_ms(self, sessions: int) -> tuple[list[float], list[float]]:
        """Each of `sessions` next sessions written for the grown user and for a user without a
        history, in turn first: (the grown user's times, the new user's). The history's later
        cycles lengthen their turns (module doc), so only the same sessions compare the two."""
        grown: list[float] = []
        new: list[float] = []
        for n in range(sessions):
            session_id, session = self._next_session()
            newcomer = f"{self._user}-new-{self._sessions}"
            writes = [(self._user, grown), (newcomer, new)]
            for user, times in writes if n % 2 == 0 else writes[::-1]:
                times.append(self._timed_write(user, session_id, session))
        return grown, new

    def probe_questions(self, limit: int) -> list[tuple[str, Sequence[str]]]:
        assert self._loaded is not None
        questions = self._loaded.conversation.questions[:limit]
        return [(q.text, q.evidence) for q in questions]

    def recall(self, limit: int) -> dict[str, float | int]:
        """Recall of the probe conversation's questions (DIRECT), as bench locomo scores them."""
        assert self._loaded is not None
        ask = query_with(self._client)
        scores = Scores()
        for text, evidence in self.probe_questions(limit):
            answer = ask(self._user, text, "direct")
            scores.add([list(self._loaded.evidence_of.get(i, ())) for i in answer.ids], evidence, answer.tokens)
        return {k: v for k, v in scores.as_dict().items() if k in ("recall@5", "recall@10", "hit@10", "mrr", "n")}

    @property
    def user(self) -> str:
        return self._user

    @property
    def turns_written(self) -> int:
        return self._turns


def disk_bytes(data_dir: Path) -> dict[str, int]:
    """Bytes on disk: the record store's SQLite files, the lexical tables within them (where
    SQLite reports its pages per table), and the Milvus Lite directory."""
    import sqlite3

    records = sum(p.stat().st_size for p in data_dir.glob("memsvc.db*"))
    milvus = data_dir / "milvus.db"
    vectors = sum(p.stat().st_size for p in milvus.rglob("*") if p.is_file()) if milvus.exists() else 0
    lexical = 0
    try:
        with sqlite3.connect(f"file:{data_dir / 'memsvc.db'}?mode=ro", uri=True) as db:
            row = db.execute("SELECT SUM(pgsize) FROM dbstat WHERE name LIKE 'lexical%'").fetchone()
            lexical = int(row[0] or 0)
    except sqlite3.Error:
        lexical = -1  # this SQLite has no dbstat table
    return {"records": records, "lexical": lexical, "vectors": vectors}


def measure_point(
    grower: GrowingUser, bench: BenchServer, memories: int, load_s: float, *, queries: int, sessions: int
) -> GrowthPoint:
    questions = grower.probe_questions(queries)
    user = grower.user
    warmup = [(user, text) for text, _ in questions[:10]]
    result = drive_queries(
        bench.address, bench.api_key, warmup, [(user, t) for t, _ in questions], concurrency=1, max_seconds=300.0
    )
    recall = grower.recall(queries)
    add_ms, new_user_ms = grower.add_beside_a_new_user_ms(sessions)
    bench.settle(timeout_s=600)
    return GrowthPoint(
        memories=memories,
        turns_written=grower.turns_written,
        load_s=load_s,
        query=LatencySummary.of(result),
        recall=recall,
        add_conversation_p50_ms=percentile(add_ms, 50),
        add_conversation_p95_ms=percentile(add_ms, 95),
        add_conversation_new_user_p50_ms=percentile(new_user_ms, 50),
        disk_bytes=disk_bytes(bench.data_dir),
    )
