"""`memsvc bench locomo --haystack N`: a conversation asked after a history of other chats."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from memsvc.bench.haystack import HISTORY_NAMES, build_history, history_sources
from memsvc.bench.locomo import load_conversation
from memsvc.cli import main

from .test_bench_locomo import CONVERSATION

pytestmark = pytest.mark.e2e

# Another chat of the same shape; its other session repeats the asked conversation's evidence turn
# word for word, so in the `same` variant a history turn reads exactly like the evidence.
OTHER = {
    "speaker_a": "Cleo",
    "speaker_b": "Dan",
    "session_1_date_time": "9:00 am on 1 March, 2023",
    "session_1": [
        {"speaker": "Cleo", "dia_id": "D1:1", "text": "Dan, I finally fixed the bike."},
        {"speaker": "Dan", "dia_id": "D1:2", "text": "Great, Cleo! Ride to the lake on Sunday?"},
    ],
    "session_2_date_time": "9:00 am on 3 March, 2023",
    "session_2": [
        {"speaker": "Cleo", "dia_id": "D2:1", "text": "I play the bassoon in a community orchestra now."},
        {"speaker": "Dan", "dia_id": "D2:2", "text": "Which instrument is next?"},
    ],
    "qa": [],
}
MEMORYBANK = {
    "Eve": {
        "name": "Eve",
        "history": {
            "2023-04-01": [
                {"query": "Hello, my name is Eve. I like tea.", "response": "Hello, Eve. Green or black?"},
                {"query": "Green, always.", "response": "A fine choice."},
            ]
        },
    }
}


def _write_data(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "locomo"
    data.mkdir()
    (data / "a-tiny.json").write_text(json.dumps(CONVERSATION))
    (data / "b-other.json").write_text(json.dumps(OTHER))
    memorybank = tmp_path / "memory_bank_en.json"
    memorybank.write_text(json.dumps(MEMORYBANK))
    return data, memorybank


def test_history_is_older_cycled_renamed_and_never_the_asked_conversation(tmp_path: Path) -> None:
    data, memorybank = _write_data(tmp_path)
    target, other = load_conversation(data / "a-tiny.json"), load_conversation(data / "b-other.json")
    sources = history_sources(target, [target, other], memorybank)
    assert [s.name for s in sources] == ["locomo-b-other", "memorybank-eve"]  # 4 + 4 turns a cycle
    own = build_history(target, sources, 19, "own")
    assert sum(len(s.turns) for s in own) == 19
    first = min(t.created_at for t in target.turns)
    dates = [s.created_at for s in own]
    assert dates == sorted(dates) and dates[-1] < first
    # Within a chat the sessions keep their spacing (two days in b-other).
    cycle0 = {s.session_id: s.created_at for s in own if s.session_id.startswith("history-c0-locomo")}
    assert (cycle0["history-c0-locomo-b-other-s2"] - cycle0["history-c0-locomo-b-other-s1"]).days == 2
    # Cycle 0 keeps the chats' people; later cycles give them other names, in the text too.
    cycle0_speakers = {t.speaker for s in own if s.session_id.startswith("history-c0") for t in s.turns}
    assert cycle0_speakers == {"Cleo", "Dan", "Eve", ""}
    later = {t.speaker for s in own if not s.session_id.startswith("history-c0") for t in s.turns} - {""}
    assert later and later <= set(HISTORY_NAMES)
    texts = " ".join(t.text for s in own if not s.session_id.startswith("history-c0") for t in s.turns)
    assert "Cleo" not in texts and "Eve" not in texts and "Ana" not in texts
    # The same chats and dates, spoken by the conversation's own two people.
    same = build_history(target, sources, 19, "same")
    assert [(s.session_id, s.created_at) for s in same] == [(s.session_id, s.created_at) for s in own]
    assert {t.speaker for s in same for t in s.turns} == {"Ana", "Ben"}
    assert "Hello, my name is Ana. I like tea." in {t.text for s in same for t in s.turns}


def test_bench_locomo_haystack_through_the_real_service(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, memorybank = _write_data(tmp_path)
    out, kept = tmp_path / "out.json", tmp_path / "kept"
    args = ["bench", "locomo", "--data", str(data), "--limit-conversations", "1", "--modes", "direct"]
    args += ["--haystack", "8", "--memorybank", str(memorybank), "--data-dir", str(kept), "--json", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "DIRECT  fresh user vs 8 turns of history" in printed
    numbers = json.loads(out.read_text())
    assert list(numbers) == ["haystack", "DIRECT", "ingest"]
    assert numbers["haystack"]["variants"] == ["fresh", "own", "same"]
    direct = numbers["DIRECT"]
    assert list(direct) == ["fresh", "own", "same"]
    for variant in ("own", "same"):
        assert numbers["ingest"][variant]["history"]["turns"] == 8
        assert numbers["ingest"][variant]["history"]["ms_per_turn"] > 0
        assert direct[variant]["overall"]["n"] == 3
        assert direct[variant]["latency_ms"]["p50"] > 0
        # The server's own time in the recall stage, a part of the whole.
        assert 0 < direct[variant]["latency_ms"]["recall_stage_p50"] < direct[variant]["latency_ms"]["p50"]
    assert re.search(r"recall stage p50 +[\d.]+ ms +[\d.]+ x[\d.]+ +[\d.]+ x[\d.]+", printed)
    assert "history_share@7" not in direct["fresh"]
    # The history comes back among the results (14 memories and more, limit 20) ...
    assert direct["same"]["history_share@7"] > 0
    # ... but a history memory never stands for an evidence turn: the twin of "I play the bassoon"
    # in the history is not the conversation's D1:2.
    loaded = json.loads((kept / "same.loaded.json").read_text())
    assert len(loaded) == 1 and loaded[0]["history_ids"]
    assert not set(loaded[0]["history_ids"]) & set(loaded[0]["evidence_of"])
    assert {d for ids in loaded[0]["evidence_of"].values() for d in ids} <= {f"D1:{i}" for i in (1, 2, 3)} | {
        f"D2:{i}" for i in (1, 2, 3)
    }
    assert direct["fresh"]["single-hop"]["recall@20"] == direct["same"]["single-hop"]["recall@20"] == 1.0
    # A second run asks the kept stores again instead of writing them anew.
    assert main(args) == 0
    assert "same: asking the store kept in" in capsys.readouterr().out
