"""`memsvc bench locomo` end to end on a tiny conversation in the LoCoMo format."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from memsvc.bench.locomo import (
    Answer,
    Loaded,
    ModeResult,
    ModeUnavailable,
    Scores,
    clean_evidence,
    evaluate,
    load_conversation,
)
from memsvc.cli import main

pytestmark = pytest.mark.e2e

CONVERSATION = {
    "speaker_a": "Ana",
    "speaker_b": "Ben",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {"speaker": "Ana", "dia_id": "D1:1", "text": "Hi Ben! Long week at the lab."},
        {"speaker": "Ana", "dia_id": "D1:2", "text": "I play the bassoon in a community orchestra now."},
        {"speaker": "Ben", "dia_id": "D1:3", "text": "Nice! I started volunteering at the greyhound rescue."},
    ],
    "session_2_date_time": "10:00 am on 9 June, 2023",
    "session_2": [
        {
            "speaker": "Ben",
            "dia_id": "D2:1",
            "text": "We adopted Pixel last Saturday!",
            "blip_caption": "a photo of a grey dog on a sofa",
            "img_url": ["https://example.invalid/x.jpg"],
        },
        {"speaker": "Ana", "dia_id": "D2:2", "text": "Congrats! My orchestra plays Sibelius next month."},
        {"speaker": "Ben", "dia_id": "D2:3", "text": "I will come and listen."},
    ],
    "session_3_date_time": "9:00 am on 1 July, 2023",
    "session_1_summary": "never a memory",
    "qa": [
        {"question": "What instrument does Ana play?", "answer": "bassoon", "evidence": ["D1:2"], "category": 4},
        {"question": "When did Ben adopt Pixel?", "answer": "June 2023", "evidence": ["D:2:1"], "category": 2},
        {"question": "What do Ana and Ben do?", "answer": "...", "evidence": ["D1:3; D2:2"], "category": 1},
        {"question": "Would Ana like Finland?", "answer": "likely", "evidence": [], "category": 3},
        {"question": "What does Ben play?", "adversarial_answer": "bassoon", "evidence": ["D1:2"], "category": 5},
        {"question": "Who is Zed?", "answer": "?", "evidence": ["D9:9", "D"], "category": 4},
    ],
}


def test_clean_evidence_and_loading(tmp_path: Path) -> None:
    known = {"D1:2", "D11:26", "D8:6", "D9:17"}
    assert clean_evidence(["D8:6; D9:17", "D:11:26", "D", "D10:19", "D1:2", "D1:2"], known) == (
        ("D8:6", "D9:17", "D11:26", "D1:2"),
        1,
        2,
    )
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(CONVERSATION))
    c = load_conversation(path)
    assert [t.dia_id for t in c.turns] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2", "D2:3"]
    assert c.turns[3].content == "Ben: We adopted Pixel last Saturday! [image: a photo of a grey dog on a sofa]"
    assert c.turns[3].created_at.isoformat() == "2023-06-09T10:00:00+00:00" and c.turns[3].session == 2
    assert [(q.category, q.evidence) for q in c.questions] == [(4, ("D1:2",)), (2, ("D2:1",)), (1, ("D1:3", "D2:2"))]
    assert (c.skipped_adversarial, c.dropped_no_evidence) == (1, 2)


def test_metrics_and_unimplemented_modes_are_skipped(tmp_path: Path) -> None:
    s = Scores()
    s.add([["x"], ["a"], ["y"], ["b"]], ["a", "b"])  # first evidence at rank 2, both by rank 4
    s.add([["z"]], ["q"])
    d = s.as_dict()
    assert d["recall@5"] == pytest.approx(0.5) and d["hit@5"] == pytest.approx(0.5)
    assert d["mrr"] == pytest.approx(0.25) and d["n"] == 2
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(CONVERSATION))
    c = load_conversation(path)

    def fake(user: str, text: str, mode: str) -> Answer:
        if mode == "agent":
            raise ModeUnavailable("UNIMPLEMENTED: not yet")
        return Answer(["m1"], 2, [30])

    results, skipped = evaluate([Loaded(c, "u", {"m1": ["D1:2"]}, frozenset())], ["direct", "agent"], fake)
    assert list(results) == ["direct"] and skipped == {"agent": "UNIMPLEMENTED: not yet"}
    assert isinstance(results["direct"], ModeResult)
    assert results["direct"].as_dict()["single-hop"]["recall@5"] == 1.0
    assert results["direct"].as_dict()["temporal"]["recall@5"] == 0.0
    assert results["direct"].as_dict()["turns-only"]["recall@5"] == 0.0  # m1 is derived: no credit
    assert results["direct"].as_dict()["dropped_below_relevance_per_query"] == 2


def test_bench_locomo_through_the_real_service(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "locomo"
    data.mkdir()
    (data / "tiny.json").write_text(json.dumps(CONVERSATION))
    out = tmp_path / "out.json"
    rc = main(["bench", "locomo", "--data", str(data), "--json", str(out), "--modes", "direct"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "3 questions of categories 1-4; skipped 1 adversarial" in printed
    assert "dropped 2 without valid evidence" in printed and "DIRECT" in printed
    # The ingestion line gives the server's own time per call beside the client's.
    assert re.search(r"AddConversation .* p50 [\d.]+ ms, p95 [\d.]+ ms \(server-side p50 [1-9][\d.]* ms", printed)
    assert "AddConversation (one session) x 2, 3.0 turns per call" in printed
    numbers = json.loads(out.read_text())
    assert list(numbers) == ["DIRECT", "ingest"]
    ingest = numbers["ingest"]
    assert (ingest["mode"], ingest["calls"], ingest["turns_per_call"]) == ("conversation", 2, 3.0)
    assert 0 < ingest["p50_ms"] <= ingest["p95_ms"]
    direct = numbers["DIRECT"]
    assert list(direct) == [
        "multi-hop",
        "temporal",
        "open-domain",
        "single-hop",
        "overall",
        "turns-only",
        "latency_ms",
        "dropped_below_relevance_per_query",
    ]
    assert direct["overall"]["n"] == 3 and direct["open-domain"]["n"] == 0
    assert set(direct["overall"]) == {
        "recall@5",
        "recall@7",
        "recall@10",
        "recall@20",
        "hit@5",
        "hit@10",
        "mrr",
        "recall@200tokens",
        "recall@400tokens",
        "n",
    }
    # Six memories, limit 20: everything comes back, so every evidence turn is in the top 20.
    assert direct["overall"]["recall@20"] == 1.0
    # "bassoon" is in one turn only: the hybrid recall puts it first.
    assert direct["single-hop"]["mrr"] == 1.0
    assert direct["latency_ms"]["p50"] > 0 and direct["latency_ms"]["p95"] >= direct["latency_ms"]["p50"]


def test_each_question_is_asked_after_the_usage_the_earlier_ones_left_is_written(tmp_path: Path) -> None:
    """Usage counts feed the ranking, so a question must see those of every earlier question, not
    whichever the periodic flush happened to write (runs of the same code differed)."""
    from memsvc.api.client import MemoryClient
    from memsvc.bench.harness import BenchServer
    from memsvc.bench.locomo import query_with, usage_written

    # No periodic flush in this test's lifetime: only usage_written can write the usage.
    bench = BenchServer.start(tmp_path / "data", bookkeeping_flush_interval_ms=3_600_000)
    client = MemoryClient(bench.address, bench.api_key)
    try:
        client.add("ana", [{"content": "Ana plays the bassoon in a community orchestra."}])
        bench.settle()
        plain = query_with(client)
        ids = plain("ana", "What instrument does Ana play?", "direct").ids
        assert ids and int(client.get("ana", ids[0])["memory"].get("usage_count", 0)) == 0
        ids = usage_written(plain, bench)("ana", "What instrument does Ana play?", "direct").ids
        # Both questions' recall events are written by the time the second one returns.
        assert int(client.get("ana", ids[0])["memory"]["usage_count"]) == 2
    finally:
        client.close()
        bench.stop()
