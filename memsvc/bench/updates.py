"""What the assistant receives: current truth, filler, repeats, score order and paraphrases, per mode.

Hand-written sets, shipped in memsvc/bench/data/ (any file of the same shape can be given); the
default pair is below, and pairs in other voices (`*-casual.json`, `*-chatty.json`, `*-world.json`,
the last held out: measured, never read to tune) are passed with --stories and --paraphrases:

- update stories: one user each, sessions of a user's chats with an assistant stored through
  AddConversation. In an update story a later turn changes a fact of the user's (a move, a new
  job, a habit given up, a price raised, A -> B -> C); in a non-update a later turn only looks
  like one (someone else's news, an addition, a one-off). Questions about the present, and
  about the value before the change.
- paraphrases: short memories stored with AddMemories (no kind), each asked for in other words,
  and questions that no memory of the user answers.

Per mode it reports, over every answer (limit 10, importance gate off, no cache):

- update win rate: the newest statement (its turn, or a memory derived from it) is in the top
  3 and above every older statement of the fact;
- history: for a question about the value before, the older statement is in the top 3;
- non-update keep rate: the fact that stays true is in the top 3 and nothing marks it outdated;
- filler: answers with a turn the set marks as filler (an acknowledgement) in the top 5;
- repeats: answers whose top 5 says one sentence twice (a memory next to the memory it was
  derived from, or the same sentence in two results);
- out of order: answers whose scores do not descend;
- paraphrase hit rate: the memory in the top 3; unrelated: questions answered with nothing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

from memsvc.bench.harness import QUERY_MODES, BenchServer, parse_modes

DEFAULT_MODES = ("direct", "applicability", "auto")
LIMIT = 10
TOP = 3
SHOWN = 5
# A sentence of fewer words says too little to count as repeated ("Thanks!").
_MIN_REPEATED_WORDS = 4
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_NON_WORD = re.compile(r"[^a-z0-9 ]+")


def bundled(name: str) -> Path:
    return Path(str(resources.files("memsvc.bench") / "data" / name))


# -- the sets -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Story:
    id: str
    type: str
    user_name: str
    sessions: list[dict[str, Any]]
    statements: list[tuple[int, int]]
    current: list[str]
    history: list[str]

    @property
    def is_update(self) -> bool:
        return self.type == "update"


def load_stories(path: Path) -> list[Story]:
    data = json.loads(path.read_text())
    return [
        Story(
            s["id"],
            s["type"],
            s.get("user_name", ""),
            s["sessions"],
            [(int(a), int(b)) for a, b in s["statements"]],
            list(s["questions"].get("current", [])),
            list(s["questions"].get("history", [])),
        )
        for s in data["stories"]
    ]


# -- answers ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    """One returned memory: what it says, and the turns of the story it stands for."""

    memory_id: str
    score: float
    content: str
    source_ids: tuple[str, ...]
    turns: frozenset[tuple[int, int]]


def sentences_of(text: str) -> set[str]:
    out = set()
    for raw in _SENTENCE.split(text):
        # A summary's quote and an extracted memory keep the turn's words after a "Name:" lead.
        words = _NON_WORD.sub(" ", raw.split(": ", 1)[-1].lower()).split()
        if len(words) >= _MIN_REPEATED_WORDS:
            out.add(" ".join(words))
    return out


def repeated(results: Sequence[Result]) -> tuple[Result, Result] | None:
    """Two of `results` that say the same: one derived from the other, or a shared sentence."""
    for i, a in enumerate(results):
        for b in results[i + 1 :]:
            if a.memory_id in b.source_ids or b.memory_id in a.source_ids:
                return a, b
            if sentences_of(a.content) & sentences_of(b.content):
                return a, b
    return None


def out_of_order(results: Sequence[Result]) -> bool:
    return any(a.score < b.score for a, b in itertools.pairwise(results))


def first_at(results: Sequence[Result], wanted: Iterable[tuple[int, int]]) -> int | None:
    wanted = set(wanted)
    return next((i for i, r in enumerate(results) if r.turns & wanted), None)


# -- scores -----------------------------------------------------------------------------------


@dataclass
class Rate:
    hits: int = 0
    n: int = 0

    def add(self, hit: bool) -> None:
        self.hits += int(hit)
        self.n += 1

    @property
    def value(self) -> float:
        return self.hits / self.n if self.n else 0.0

    def as_dict(self) -> dict[str, float | int]:
        return {"rate": round(self.value, 4), "hits": self.hits, "n": self.n}


@dataclass
class ModeScores:
    update_win: Rate = field(default_factory=Rate)
    history: Rate = field(default_factory=Rate)
    non_update_keep: Rate = field(default_factory=Rate)
    filler: Rate = field(default_factory=Rate)
    repeats: Rate = field(default_factory=Rate)
    out_of_order: Rate = field(default_factory=Rate)
    paraphrase: Rate = field(default_factory=Rate)
    unrelated_empty: Rate = field(default_factory=Rate)
    failures: list[str] = field(default_factory=list)

    def answer(self, results: Sequence[Result], filler: set[tuple[int, int]], what: str) -> None:
        """The checks every answer gets; `what` names the answer in the failures."""
        top = results[:SHOWN]
        fillers = [r for r in top if r.turns & filler and len(r.turns) == 1 and not r.source_ids]
        self.filler.add(bool(fillers))
        if fillers:
            self.failures.append(f"{what}: filler {fillers[0].content!r}")
        pair = repeated(top)
        self.repeats.add(pair is not None)
        if pair is not None:
            self.failures.append(f"{what}: repeats {pair[0].content[:80]!r} / {pair[1].content[:80]!r}")
        self.out_of_order.add(out_of_order(results))

    def as_dict(self) -> dict[str, Any]:
        names = (
            "update_win",
            "history",
            "non_update_keep",
            "filler",
            "repeats",
            "out_of_order",
            "paraphrase",
            "unrelated_empty",
        )
        return {name: getattr(self, name).as_dict() for name in names}


# -- the run ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadedStory:
    story: Story
    user: str
    # memory id -> the story turns it stands for (a turn itself, a derived memory its sources)
    turns_of: Mapping[str, frozenset[tuple[int, int]]]
    filler: frozenset[tuple[int, int]]


def _timestamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def load_story(client: Any, story: Story) -> LoadedStory:
    user = f"story-{story.id}"
    turns_of: dict[str, frozenset[tuple[int, int]]] = {}
    filler = set()
    for s, session in enumerate(story.sessions):
        start = datetime.fromisoformat(session["date"].replace("Z", "+00:00"))
        spoken = []
        for t, turn in enumerate(session["turns"]):
            user_turn = turn["role"] == "user"
            spoken.append(
                {
                    "role": "ROLE_USER" if user_turn else "ROLE_ASSISTANT",
                    "content": turn["text"],
                    "name": story.user_name if user_turn else "",
                    "create_time": _timestamp(start + timedelta(minutes=t)),
                }
            )
            if turn.get("filler"):
                filler.add((s, t))
        response = client.add_conversation(user, f"session-{s}", spoken)
        ids = {}
        for t, stored in enumerate(response.get("turns", [])):
            ids[stored["id"]] = (s, t)
            turns_of[stored["id"]] = frozenset({(s, t)})
        derived = [*response.get("extracted", []), *([response["summary"]] if "summary" in response else [])]
        for memory in derived:
            refs = {ids[i] for i in memory.get("source_memory_ids", []) if i in ids}
            turns_of[memory["id"]] = turns_of.get(memory["id"], frozenset()) | frozenset(refs)
    return LoadedStory(story, user, turns_of, frozenset(filler))


@dataclass(frozen=True)
class Asker:
    """Asks questions of a bench server, each question's recall events written before the next
    is asked (as a steady flow of queries has them; see locomo.usage_written)."""

    client: Any
    bench: BenchServer

    def __call__(self, user: str, question: str, mode: str) -> list[dict[str, Any]]:
        response = self.client.query(
            user,
            question,
            limit=LIMIT,
            mode=f"QUERY_MODE_{mode.upper()}",
            filter={"min_importance": 0.0},
            skip_cache=True,
        )
        self.bench.loop.run(self.bench.components.recorder.flush())
        ranked: list[dict[str, Any]] = response.get("memories", [])
        return ranked


def as_results(ranked: Sequence[Mapping[str, Any]], turns_of: Mapping[str, frozenset[tuple[int, int]]]) -> list[Result]:
    out = []
    for r in ranked:
        m = r["memory"]
        sources = tuple(m.get("source_memory_ids", []))
        turns = turns_of.get(m["id"], frozenset())
        out.append(Result(m["id"], float(r.get("score", 0.0)), m.get("content", ""), sources, turns))
    return out


def score_story(ask: Asker, loaded: LoadedStory, mode: str, scores: ModeScores) -> None:
    story = loaded.story
    newest, older = story.statements[-1], story.statements[:-1]
    for question in story.current:
        ranked = ask(loaded.user, question, mode)
        results = as_results(ranked, loaded.turns_of)
        scores.answer(results, set(loaded.filler), f"{mode} {story.id} {question!r}")
        if story.is_update:
            new_at = first_at(results, [newest])
            old_at = first_at(results, older)
            won = new_at is not None and new_at < TOP and (old_at is None or new_at < old_at)
            scores.update_win.add(won)
            if not won:
                scores.failures.append(f"{mode} update {story.id}: {question!r} new at {new_at}, old at {old_at}")
        else:
            kept = story.statements[0]
            at = first_at(results, [kept])
            # What still holds must not be marked as replaced, in any memory standing for it.
            outdated = any(
                r["memory"].get("outdated") for r in ranked if kept in loaded.turns_of.get(r["memory"]["id"], ())
            )
            still = at is not None and at < TOP and not outdated
            scores.non_update_keep.add(still)
            if not still:
                scores.failures.append(f"{mode} non-update {story.id}: {question!r} kept at {at}, outdated {outdated}")
    for question in story.history:
        ranked = ask(loaded.user, question, mode)
        results = as_results(ranked, loaded.turns_of)
        scores.answer(results, set(loaded.filler), f"{mode} {story.id} {question!r}")
        before = story.statements[-2]
        at = first_at(results, [before])
        found = at is not None and at < TOP
        scores.history.add(found)
        if not found:
            scores.failures.append(f"{mode} history {story.id}: {question!r} older value at {at}")


@dataclass(frozen=True)
class LoadedParaphrases:
    users: list[dict[str, Any]]
    # per user: the memory id of each memory, in order
    ids: list[list[str]]


def load_paraphrases(client: Any, path: Path) -> LoadedParaphrases:
    data = json.loads(path.read_text())
    ids = []
    for user in data["users"]:
        memories = []
        for m in user["memories"]:
            item: dict[str, Any] = {"content": m["content"]}
            if m.get("kind"):
                item["kind"] = f"MEMORY_KIND_{m['kind'].upper()}"
            memories.append(item)
        response = client.add(f"para-{user['id']}", memories)
        ids.append([m["id"] for m in response.get("memories", [])])
    return LoadedParaphrases(data["users"], ids)


def score_paraphrases(ask: Asker, loaded: LoadedParaphrases, mode: str, scores: ModeScores) -> None:
    for user, ids in zip(loaded.users, loaded.ids, strict=True):
        name = f"para-{user['id']}"
        for q in user["questions"]:
            ranked = ask(name, q["text"], mode)
            returned = [r["memory"]["id"] for r in ranked]
            wanted = ids[q["answer"]]
            hit = wanted in returned[:TOP]
            scores.paraphrase.add(hit)
            scores.out_of_order.add(out_of_order(as_results(ranked, {})))
            if not hit:
                at = returned.index(wanted) if wanted in returned else None
                scores.failures.append(
                    f"{mode} paraphrase {user['id']}: {q['text']!r} -> {user['memories'][q['answer']]['content']!r} "
                    f"at {at}"
                )
        for question in user.get("unrelated", []):
            ranked = ask(name, question, mode)
            scores.unrelated_empty.add(not ranked)


def format_table(results: Mapping[str, ModeScores]) -> str:
    header = (
        f"{'mode':<14} {'update win':>10} {'history':>8} {'keep':>6} {'filler':>7} {'repeats':>8} "
        f"{'unordered':>9} {'paraphrase':>10} {'unrelated':>9}"
    )
    lines = [header]
    for mode, s in results.items():
        lines.append(
            f"{mode.upper():<14} {s.update_win.value:>10.3f} {s.history.value:>8.3f} {s.non_update_keep.value:>6.3f} "
            f"{s.filler.value:>7.3f} {s.repeats.value:>8.3f} {s.out_of_order.value:>9.3f} "
            f"{s.paraphrase.value:>10.3f} {s.unrelated_empty.value:>9.3f}"
        )
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stories", type=Path, default=None, help="update stories (JSON); default: the set shipped with memsvc"
    )
    parser.add_argument(
        "--paraphrases", type=Path, default=None, help="paraphrase set (JSON); default: the set shipped with memsvc"
    )
    parser.add_argument(
        "--modes",
        default=",".join(DEFAULT_MODES),
        help=f"comma list of query modes ({', '.join(QUERY_MODES)}); default {','.join(DEFAULT_MODES)}",
    )
    parser.add_argument("--json", type=Path, help="write the numbers to this file")
    parser.add_argument("--failures", action="store_true", help="print every answer that missed, with why")


def run(args: argparse.Namespace) -> int:
    from memsvc.api.client import MemoryClient

    modes = parse_modes(str(args.modes))
    if modes is None:
        return 2
    stories = load_stories(args.stories or bundled("updates.json"))
    store = Path(tempfile.mkdtemp(prefix="memsvc-updates-")) / "data"
    try:
        bench = BenchServer.start(store)
        client = MemoryClient(bench.address, bench.api_key, timeout_s=120)
        try:
            loaded = [load_story(client, s) for s in stories]
            para = load_paraphrases(client, args.paraphrases or bundled("paraphrases.json"))
            bench.settle()
        finally:
            client.close()
            bench.stop()
        updates = sum(1 for s in stories if s.is_update)
        print(
            f"{len(stories)} stories ({updates} updates, {len(stories) - updates} non-updates), "
            f"{sum(len(u['questions']) for u in para.users)} paraphrase questions",
            flush=True,
        )
        results: dict[str, ModeScores] = {}
        for mode in modes:
            # Each mode on a copy of the loaded store: none sees the usage another left.
            copy = store.parent / f"copy-{mode}"
            shutil.copytree(store, copy)
            bench = BenchServer.start(copy)
            client = MemoryClient(bench.address, bench.api_key, timeout_s=120)
            try:
                scores = ModeScores()
                ask = Asker(client, bench)
                for story in loaded:
                    score_story(ask, story, mode, scores)
                score_paraphrases(ask, para, mode, scores)
                results[mode] = scores
            finally:
                client.close()
                bench.stop()
    finally:
        shutil.rmtree(store.parent, ignore_errors=True)
    print(format_table(results))
    if args.failures:
        for scores in results.values():
            for line in scores.failures:
                print(line)
    if args.json:
        args.json.write_text(json.dumps({m.upper(): s.as_dict() for m, s in results.items()}, indent=2) + "\n")
    return 0
