"""Evidence recall on LoCoMo conversations through the real service, per query mode.

Protocol (../shared/data/locomo/README.md): each conversation is one user; one memory per
dialogue turn ("<speaker>: <text>" plus " [image: <caption>]"), created at its session's
date, session id "session-N", role user, importance 0.5; every question of categories 1-4 is
asked with limit 20, and evidence recall@5/7/10/20, hit@5/10 and MRR of the first evidence
turn are averaged per category and overall. Annotations (observations, summaries, events)
are never memories.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from memsvc.bench.harness import QUERY_MODES, BenchServer, parse_modes, percentile
from memsvc.domain.models import spoken_text
from memsvc.llm.text import estimate_tokens

GROUPS = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
GROUP_ORDER = ("multi-hop", "temporal", "open-domain", "single-hop", "overall")
# Overall recall when an extracted memory or a summary counts for nothing, only returned turns do.
TURNS_ONLY = "turns-only"
RECALL_KS = (5, 7, 10, 20)
HIT_KS = (5, 10)
# Recall of the results that fit an assistant's prompt budget (tokens, first results first): what
# filler, repeats and long memories cost.
TOKEN_BUDGETS = (200, 400)
LIMIT = 20
# How deep the share of history memories among the results is measured (the headline recall's k).
HISTORY_K = 7
_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DIA_ID = re.compile(r"^D:?(\d+):(\d+)$")
_DATE_FORMAT = "%I:%M %p on %d %B, %Y"


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    created_at: datetime
    speaker: str
    text: str  # what was said, with the image caption if any

    @property
    def content(self) -> str:
        """The turn as one memory of the per-turn protocol: "<speaker>: <text>"."""
        return f"{self.speaker}: {self.text}"


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass
class Conversation:
    name: str
    turns: list[Turn]
    questions: list[Question]
    skipped_adversarial: int = 0
    dropped_no_evidence: int = 0
    evidence_fixed: int = 0
    evidence_removed: int = 0


def turn_text(turn: Mapping[str, Any]) -> str:
    text = str(turn.get("text", ""))
    caption = turn.get("blip_caption")
    if caption:
        text += f" [image: {caption}]"
    return text


def clean_evidence(raw: Sequence[str], known: set[str]) -> tuple[tuple[str, ...], int, int]:
    """Split "a; b", repair "D:11:26", drop ids with no such turn.

    Returns the clean ids (in order, without repeats), how many were repaired, how many dropped.
    """
    out: list[str] = []
    fixed = removed = 0
    for entry in raw:
        for part in re.split(r"[;,]", entry):
            text = part.strip()
            if not text:
                continue
            match = _DIA_ID.match(text)
            canonical = f"D{match.group(1)}:{match.group(2)}" if match else text
            if canonical != text:
                fixed += 1
            if canonical not in known:
                removed += 1
                continue
            if canonical not in out:
                out.append(canonical)
    return tuple(out), fixed, removed


def load_conversation(path: Path) -> Conversation:
    data = json.loads(path.read_text())
    turns: list[Turn] = []
    sessions = sorted(int(m.group(1)) for key in data if (m := _SESSION_KEY.match(key)))
    for n in sessions:
        when = datetime.strptime(data[f"session_{n}_date_time"], _DATE_FORMAT).replace(tzinfo=UTC)
        turns.extend(Turn(t["dia_id"], n, when, t["speaker"], turn_text(t)) for t in data[f"session_{n}"])
    conversation = Conversation(path.stem, turns, [])
    known = {t.dia_id for t in turns}
    for qa in data.get("qa", []):
        category = int(qa["category"])
        if category not in GROUPS:
            conversation.skipped_adversarial += 1
            continue
        evidence, fixed, removed = clean_evidence(qa.get("evidence", []), known)
        conversation.evidence_fixed += fixed
        conversation.evidence_removed += removed
        if not evidence:
            conversation.dropped_no_evidence += 1
            continue
        conversation.questions.append(Question(qa["question"], category, evidence))
    return conversation


def load_conversations(data_dir: Path, limit: int = 0) -> list[Conversation]:
    paths = sorted(data_dir.glob("*.json"))
    if limit:
        paths = paths[:limit]
    return [load_conversation(p) for p in paths]


@dataclass
class Scores:
    """Per-question metrics, summed, for one group."""

    n: int = 0
    recall: dict[int, float] = field(default_factory=lambda: dict.fromkeys(RECALL_KS, 0.0))
    hit: dict[int, float] = field(default_factory=lambda: dict.fromkeys(HIT_KS, 0.0))
    mrr: float = 0.0
    within: dict[int, float] = field(default_factory=lambda: dict.fromkeys(TOKEN_BUDGETS, 0.0))

    def add(self, ranked: Sequence[Sequence[str]], evidence: Sequence[str], tokens: Sequence[int] = ()) -> None:
        """`ranked`: the turn ids of each returned memory, best first; `tokens`: what each costs
        in a prompt (none given: every result fits)."""
        wanted = set(evidence)
        self.n += 1
        for k in RECALL_KS:
            found = {d for ids in ranked[:k] for d in ids} & wanted
            self.recall[k] += len(found) / len(wanted)
        for budget in TOKEN_BUDGETS:
            used, fit = 0, 0
            for cost in tokens or [0] * len(ranked):
                if used + cost > budget:
                    break
                used += cost
                fit += 1
            found = {d for ids in ranked[:fit] for d in ids} & wanted
            self.within[budget] += len(found) / len(wanted)
        for k in HIT_KS:
            self.hit[k] += 1.0 if any(d in wanted for ids in ranked[:k] for d in ids) else 0.0
        first = next((i for i, ids in enumerate(ranked) if any(d in wanted for d in ids)), None)
        self.mrr += 0.0 if first is None else 1.0 / (first + 1)

    def as_dict(self) -> dict[str, float | int]:
        n = max(self.n, 1)
        out: dict[str, float | int] = {f"recall@{k}": round(self.recall[k] / n, 4) for k in RECALL_KS}
        out.update({f"hit@{k}": round(self.hit[k] / n, 4) for k in HIT_KS})
        out["mrr"] = round(self.mrr / n, 4)
        out.update({f"recall@{b}tokens": round(self.within[b] / n, 4) for b in TOKEN_BUDGETS})
        out["n"] = self.n
        return out


@dataclass
class ModeResult:
    groups: dict[str, Scores] = field(default_factory=lambda: {g: Scores() for g in (*GROUP_ORDER, TURNS_ONLY)})
    latencies_ms: list[float] = field(default_factory=list)
    # per question, the server's time in the recall stage (dense and lexical search, fusion)
    recall_ms: list[float] = field(default_factory=list)
    dropped_below_relevance: list[int] = field(default_factory=list)
    # per question, the share of the first HISTORY_K results that came from the user's history
    history_share: list[float] = field(default_factory=list)
    errors: int = 0

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {g: self.groups[g].as_dict() for g in (*GROUP_ORDER, TURNS_ONLY)}
        out["latency_ms"] = {
            "p50": round(percentile(self.latencies_ms, 50), 2),
            "p95": round(percentile(self.latencies_ms, 95), 2),
            "recall_stage_p50": round(percentile(self.recall_ms, 50), 2) if self.recall_ms else 0.0,
        }
        asked = max(len(self.dropped_below_relevance), 1)
        out["dropped_below_relevance_per_query"] = round(sum(self.dropped_below_relevance) / asked, 3)
        if self.history_share:
            out[f"history_share@{HISTORY_K}"] = round(sum(self.history_share) / len(self.history_share), 4)
        return out


@dataclass
class IngestTimes:
    """Wall time of each write call while the store is loaded, with the turns it carried."""

    calls_ms: list[float] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)

    def timed(self, turns: int, call: Callable[..., Any], *args: Any) -> Any:
        started = time.perf_counter()
        result = call(*args)
        self.calls_ms.append((time.perf_counter() - started) * 1000)
        self.turns.append(turns)
        return result

    def as_dict(self) -> dict[str, float | int]:
        return {
            "calls": len(self.calls_ms),
            "turns": sum(self.turns),
            "turns_per_call": round(sum(self.turns) / max(len(self.turns), 1), 1),
            "ms_per_turn": round(sum(self.calls_ms) / max(sum(self.turns), 1), 2),
            "p50_ms": round(percentile(self.calls_ms, 50), 1),
            "p95_ms": round(percentile(self.calls_ms, 95), 1),
        }


class ModeUnavailable(Exception):
    """The server does not implement a query mode (yet)."""


class Answer(NamedTuple):
    """The returned memory ids, best first; how many the relevance floor dropped; what each
    result costs an assistant's prompt, in tokens; and the server's time in the recall stage."""

    ids: list[str]
    dropped: int
    tokens: list[int]
    recall_ms: float = 0.0


# (user, question, mode) -> the answer
QueryFn = Callable[[str, str, str], Answer]


@dataclass(frozen=True)
class Loaded:
    """A conversation as written: its user, and what each stored memory stands for."""

    conversation: Conversation
    user: str
    # memory id -> the turn ids it stands for: a turn itself; a derived memory its source turns
    evidence_of: Mapping[str, Sequence[str]]
    # the ids of the memories that are turns (not extracted memories or summaries)
    turn_ids: frozenset[str]
    # the ids of what the user's earlier history left (turns, extracted memories, summaries)
    history_ids: frozenset[str] = frozenset()


def write_conversation(
    client: Any, user: str, conversation: Conversation, times: IngestTimes, batch: int = 64
) -> Loaded:
    """Write every turn as one memory; return memory id -> the turn ids it stands for."""
    by_id: dict[str, list[str]] = {}
    for start in range(0, len(conversation.turns), batch):
        chunk = conversation.turns[start : start + batch]
        memories = [
            {
                "content": t.content,
                "role": "ROLE_USER",
                "session_id": f"session-{t.session}",
                "importance": 0.5,
                "create_time": t.created_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "metadata": {"dia_id": t.dia_id},
                "idempotency_key": f"locomo-{conversation.name}-{t.dia_id}",
            }
            for t in chunk
        ]
        response = times.timed(len(chunk), client.add, user, memories)
        for turn, stored in zip(chunk, response.get("memories", []), strict=True):
            by_id.setdefault(stored["id"], []).append(turn.dia_id)
    return Loaded(conversation, user, by_id, frozenset(by_id))


def ingest_conversation(client: Any, user: str, conversation: Conversation, times: IngestTimes) -> Loaded:
    """Write each session through AddConversation; return memory id -> the turn ids it stands for.

    A turn stands for itself; an extracted memory or a summary for its source turns.
    """
    by_id: dict[str, list[str]] = {}
    turn_ids: set[str] = set()
    sessions: dict[int, list[Turn]] = {}
    for t in conversation.turns:
        sessions.setdefault(t.session, []).append(t)
    for n, turns in sorted(sessions.items()):
        spoken = [
            {
                "role": "ROLE_USER",
                "content": t.text,
                "name": t.speaker,
                "create_time": t.created_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
            for t in turns
        ]
        response = times.timed(len(turns), client.add_conversation, user, f"session-{n}", spoken)
        dia_of_turn = {}
        for turn, stored in zip(turns, response.get("turns", []), strict=True):
            dia_of_turn[stored["id"]] = turn.dia_id
            turn_ids.add(stored["id"])
            by_id.setdefault(stored["id"], []).append(turn.dia_id)
        derived = [*response.get("extracted", []), *([response["summary"]] if "summary" in response else [])]
        for memory in derived:
            sources = [dia_of_turn[s] for s in memory.get("source_memory_ids", []) if s in dia_of_turn]
            known = by_id.setdefault(memory["id"], [])
            known += [d for d in sources if d not in known]
    return Loaded(conversation, user, by_id, frozenset(turn_ids))


def evaluate(
    conversations: Sequence[Loaded],
    modes: Sequence[str],
    query: QueryFn,
    progress: Callable[[str], None] = lambda _: None,
) -> tuple[dict[str, ModeResult], dict[str, str]]:
    """Ask every question in every mode; returns results per mode and the modes skipped (with why)."""
    results: dict[str, ModeResult] = {}
    skipped: dict[str, str] = {}
    for mode in modes:
        result = ModeResult()
        try:
            for loaded in conversations:
                for q in loaded.conversation.questions:
                    started = time.perf_counter()
                    ids, dropped, tokens, recall_ms = query(loaded.user, q.text, mode)
                    result.latencies_ms.append((time.perf_counter() - started) * 1000)
                    result.recall_ms.append(recall_ms)
                    result.dropped_below_relevance.append(dropped)
                    ranked = [list(loaded.evidence_of.get(i, ())) for i in ids]
                    result.groups[GROUPS[q.category]].add(ranked, q.evidence, tokens)
                    result.groups["overall"].add(ranked, q.evidence, tokens)
                    # The same answer with no credit for derived memories: what the turns alone found.
                    turns_only = [ids_ if i in loaded.turn_ids else [] for i, ids_ in zip(ids, ranked, strict=True)]
                    result.groups[TURNS_ONLY].add(turns_only, q.evidence, tokens)
                    if loaded.history_ids:
                        top = ids[:HISTORY_K]
                        result.history_share.append(sum(i in loaded.history_ids for i in top) / max(len(top), 1))
                progress(f"{mode}: {loaded.conversation.name} done")
        except ModeUnavailable as exc:
            skipped[mode] = str(exc)
            continue
        results[mode] = result
    return results, skipped


def format_table(mode: str, result: ModeResult) -> str:
    lat = result.as_dict()["latency_ms"]
    lines = [
        f"{mode.upper()}  latency p50 {lat['p50']:.1f} ms, p95 {lat['p95']:.1f} ms, "
        f"recall stage p50 {lat['recall_stage_p50']:.1f} ms, "
        f"{result.as_dict()['dropped_below_relevance_per_query']} results per query below the relevance floor",
        f"  {'group':<12} {'n':>4}  {'R@5':>6} {'R@7':>6} {'R@10':>6} {'R@20':>6}  {'H@5':>6} {'H@10':>6}  {'MRR':>6}"
        f"  {'R@200t':>6} {'R@400t':>6}",
    ]
    for g in (*GROUP_ORDER, TURNS_ONLY):
        d = result.groups[g].as_dict()
        lines.append(
            f"  {g:<12} {d['n']:>4}  {d['recall@5']:>6.3f} {d['recall@7']:>6.3f} {d['recall@10']:>6.3f} "
            f"{d['recall@20']:>6.3f}  {d['hit@5']:>6.3f} {d['hit@10']:>6.3f}  {d['mrr']:>6.3f}"
            f"  {d['recall@200tokens']:>6.3f} {d['recall@400tokens']:>6.3f}"
        )
    return "\n".join(lines)


def query_with(client: Any, min_relevance: float | None = None) -> QueryFn:
    """Ask one question in one mode, as the protocol says (limit 20, no importance gate, no
    cache), with the server's relevance floor unless `min_relevance` is given."""
    from memsvc.api.client import ClientError

    floor = {} if min_relevance is None else {"min_relevance": min_relevance}

    def query(user: str, text: str, mode: str) -> Answer:
        try:
            response = client.query(
                user,
                text,
                limit=LIMIT,
                mode=f"QUERY_MODE_{mode.upper()}",
                filter={"min_importance": 0.0},
                skip_cache=True,
                **floor,
            )
        except ClientError as exc:
            if exc.code == "UNIMPLEMENTED":
                raise ModeUnavailable(f"UNIMPLEMENTED: {exc.message}") from exc
            raise
        dropped = int(response.get("report", {}).get("dropped_below_relevance", 0))
        memories = [r["memory"] for r in response.get("memories", [])]
        tokens = [estimate_tokens(spoken_text(m.get("content", ""), m.get("speaker_name", ""))) for m in memories]
        stages = response.get("report", {}).get("stages", [])
        recall_ms = sum(float(s.get("duration_ms", 0.0)) for s in stages if s.get("stage") == "recall")
        return Answer([m["id"] for m in memories], dropped, tokens, recall_ms)

    return query


def usage_written(ask: QueryFn, bench: BenchServer) -> QueryFn:
    """`ask`, then the question's recall events written before the next question is asked, as a
    steady flow of queries has them. Left to the periodic flush (every second), a question saw the
    usage an earlier one left or not, by timing, and runs of the same code differed."""

    def query(user: str, text: str, mode: str) -> Answer:
        answer = ask(user, text, mode)
        bench.loop.run(bench.components.recorder.flush())
        return answer

    return query


def load_store(store: Path, conversations: Sequence[Conversation], ingest: str, times: IngestTimes) -> list[Loaded]:
    """Write every conversation into a server on `store`, wait for the index, stop the server."""
    from memsvc.api.client import MemoryClient

    bench = BenchServer.start(store)
    client = MemoryClient(bench.address, bench.api_key, timeout_s=120)
    try:
        started = time.perf_counter()
        loaded = []
        for conversation in conversations:
            user = f"locomo-{conversation.name}"
            write = ingest_conversation if ingest == "conversation" else write_conversation
            loaded.append(write(client, user, conversation, times))
        bench.settle()
        timing = times.as_dict()
        method = "AddConversation" if ingest == "conversation" else "AddMemories"
        call = "AddConversation (one session)" if ingest == "conversation" else "AddMemories (64 turns)"
        server_ms = bench.rpc_times.ms.get(method, [])
        print(
            f"wrote {sum(len(c.turns) for c in conversations)} turns in {time.perf_counter() - started:.1f} s; "
            f"{call} x {timing['calls']}, {timing['turns_per_call']} turns per call: "
            f"p50 {timing['p50_ms']} ms, p95 {timing['p95_ms']} ms "
            f"(server-side p50 {percentile(server_ms, 50):.1f} ms, p95 {percentile(server_ms, 95):.1f} ms)"
        )
    finally:
        client.close()
        bench.stop()
    return loaded


def evaluate_each_on_a_copy(
    store: Path,
    loaded: Sequence[Loaded],
    modes: Sequence[str],
    min_relevance: float | None = None,
) -> tuple[dict[str, ModeResult], dict[str, str]]:
    """Every mode on its own copy of the loaded store, so none sees the usage counts another left."""
    from memsvc.api.client import MemoryClient

    results: dict[str, ModeResult] = {}
    skipped: dict[str, str] = {}

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    for mode in modes:
        copy = Path(tempfile.mkdtemp(prefix="memsvc-locomo-mode-")) / "data"
        shutil.copytree(store, copy)
        bench = BenchServer.start(copy)
        client = MemoryClient(bench.address, bench.api_key, timeout_s=120)

        try:
            got, why = evaluate(loaded, [mode], usage_written(query_with(client, min_relevance), bench), progress)
        finally:
            client.close()
            bench.stop()
            shutil.rmtree(copy.parent, ignore_errors=True)
        results.update(got)
        skipped.update(why)
    return results, skipped


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, type=Path, help="directory of LoCoMo conversation files (*.json)")
    parser.add_argument(
        "--modes", default="direct", help=f"comma list of query modes ({', '.join(QUERY_MODES)}); default direct"
    )
    parser.add_argument(
        "--ingest",
        choices=("conversation", "turns"),
        default="conversation",
        help="conversation: each session through AddConversation (turns, extracted memories, summaries; "
        "a derived memory counts as its source turns); turns: one AddMemories memory per turn",
    )
    parser.add_argument(
        "--min-relevance",
        type=float,
        help="DIRECT's relevance floor for every question (default: the server's MEMSVC_MIN_RELEVANCE; 0 turns it off)",
    )
    parser.add_argument(
        "--haystack",
        type=int,
        default=0,
        metavar="N",
        help="also ask each conversation after N turns of other chats written for the same user, fresh vs "
        "own speakers vs the conversation's two people (memsvc/bench/haystack.py); --data-dir then keeps "
        "one store per variant and asks a kept one again",
    )
    parser.add_argument(
        "--haystack-variants",
        type=lambda text: [v.strip() for v in text.split(",") if v.strip()],
        default=["own", "same"],
        help="comma list of history variants beside fresh: own, same (default both)",
    )
    parser.add_argument(
        "--memorybank",
        type=Path,
        help="MemoryBank chats for the history (default: memorybank/memory_bank_en.json beside --data)",
    )
    parser.add_argument("--json", type=Path, help="write the numbers to this file")
    parser.add_argument("--limit-conversations", type=int, default=0, help="use only the first N files")
    parser.add_argument(
        "--conversations",
        type=lambda text: [n.strip() for n in text.split(",") if n.strip()],
        default=[],
        help="use only these files (comma list of names without .json, e.g. 41,42)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="an empty directory to keep the loaded store in (default: a temporary one); each mode runs on a copy",
    )


def run(args: argparse.Namespace) -> int:
    modes = parse_modes(str(args.modes))
    if modes is None:
        return 2
    conversations = load_conversations(args.data, args.limit_conversations)
    if args.conversations:
        conversations = [c for c in load_conversations(args.data) if c.name in args.conversations]
    if not conversations:
        print(f"no LoCoMo files (*.json) in {args.data}", file=sys.stderr)
        return 2
    questions = sum(len(c.questions) for c in conversations)
    print(
        f"{len(conversations)} conversations, {sum(len(c.turns) for c in conversations)} turns, "
        f"{questions} questions of categories 1-4; skipped {sum(c.skipped_adversarial for c in conversations)} "
        f"adversarial (category 5); dropped {sum(c.dropped_no_evidence for c in conversations)} without valid "
        f"evidence; evidence ids repaired {sum(c.evidence_fixed for c in conversations)}, "
        f"removed {sum(c.evidence_removed for c in conversations)}",
        flush=True,
    )
    if args.haystack > 0:
        from memsvc.bench.haystack import run_haystack

        if args.memorybank is None:
            args.memorybank = args.data.parent / "memorybank" / "memory_bank_en.json"
        return run_haystack(args, conversations, modes)
    if args.data_dir is not None and args.data_dir.exists() and any(args.data_dir.iterdir()):
        # Loading again into a kept store replays every turn, so nothing would be derived or scored.
        print(f"--data-dir {args.data_dir} is not empty: give a new or empty directory", file=sys.stderr)
        return 2
    owns_store = args.data_dir is None
    store = args.data_dir or Path(tempfile.mkdtemp(prefix="memsvc-locomo-"))
    try:
        times = IngestTimes()
        loaded = load_store(store, conversations, args.ingest, times)
        results, skipped = evaluate_each_on_a_copy(store, loaded, modes, args.min_relevance)
    finally:
        if owns_store:
            shutil.rmtree(store, ignore_errors=True)
    for mode, result in results.items():
        print(format_table(mode, result))
    for mode, why in skipped.items():
        print(f"{mode.upper()}  skipped ({why})")
    if args.json:
        numbers: dict[str, Any] = {m.upper(): r.as_dict() for m, r in results.items()}
        numbers["ingest"] = {"mode": args.ingest, **times.as_dict()}
        args.json.write_text(json.dumps(numbers, indent=2) + "\n")
    return 0
