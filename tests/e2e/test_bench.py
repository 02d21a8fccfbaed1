"""`memsvc bench query`, `bench write` and `bench scaling` end to end, at tiny sizes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pymilvus import MilvusClient

from memsvc.bench.harness import BENCH_DATABASE
from memsvc.cli import main
from tests.milvus_server import MilvusServer

pytestmark = pytest.mark.e2e

QUERY_KEYS = {
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "qps",
    "floor_p50_ms",
    "ratio_p50",
    "stages_ms",
    "users",
    "memories_per_user",
    "concurrency",
    "mode",
    "embedding_cache",
}


def test_bench_query_writes_the_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "query.json"
    argv = ["bench", "query", "--users", "2", "--memories-per-user", "20", "--queries", "20", "--concurrency", "2"]
    code = main([*argv, "--embedding-cache", "miss", "--floor-samples", "10", "--json", str(out)])
    assert code == 0
    data = json.loads(out.read_text())
    assert set(data) >= QUERY_KEYS
    assert (data["users"], data["memories_per_user"], data["concurrency"]) == (2, 20, 2)
    assert (data["mode"], data["embedding_cache"]) == ("direct", "miss")
    assert data["queries"] == 20 and data["errors"] == {}
    assert 0 < data["p50_ms"] <= data["p95_ms"] <= data["p99_ms"]
    assert data["qps"] > 0 and data["floor_p50_ms"] > 0
    assert data["ratio_p50"] == pytest.approx(data["p50_ms"] / data["floor_p50_ms"], rel=0.01)
    assert set(data["stages_ms"]) >= {"scope", "embed", "recall", "hydrate", "rank", "bookkeep"}
    assert data["engine"] == "milvus-lite"
    cpu = data["server_cpu_ms_per_query"]
    # CPU per measured query (the warm-up's left out), split by the server's thread groups; per
    # stage only one query at a time, where a stage's window holds nothing else.
    assert cpu["total"] > 0 and cpu["threads"]["event loop"] > 0
    assert sum(cpu["threads"].values()) == pytest.approx(cpu["total"], rel=0.25, abs=2.0)
    assert cpu["stages"] == {}
    assert "service / floor" in capsys.readouterr().out


# Each run waits for the server to load its sealed segments (half a minute): the variable's
# reading of the same path runs with the slow tests.
@pytest.mark.parametrize("named_by", ["--milvus-uri", pytest.param("MEMSVC_MILVUS_URI", marks=pytest.mark.slow)])
def test_bench_query_on_a_milvus_server_records_the_engine_and_keeps_to_its_database(
    named_by: str,
    milvus_server: MilvusServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "query.json"
    argv = ["bench", "query", "--users", "2", "--memories-per-user", "20", "--queries", "20", "--floor-samples", "10"]
    if named_by == "--milvus-uri":
        argv += ["--milvus-uri", milvus_server.uri]
    else:  # configured as for `memsvc serve`: the report names the server it ran on all the same
        monkeypatch.setenv("MEMSVC_MILVUS_URI", milvus_server.uri)
    assert main([*argv, "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert (data["engine"], data["milvus_uri"]) == ("milvus-server", milvus_server.uri)
    assert data["server_version"] and data["queries"] == 20 and data["errors"] == {}
    assert f"milvus-server {milvus_server.uri}" in capsys.readouterr().out
    cpu = data["server_cpu_ms_per_query"]  # one query at a time: CPU per stage, adding up
    assert set(cpu["stages"]) >= {"scope", "embed", "recall", "hydrate", "rank", "bookkeep", "outside the stages"}
    assert sum(cpu["stages"].values()) == pytest.approx(cpu["total"], abs=0.01)
    assert cpu["stages"]["embed"] > 0 and cpu["stages"]["recall"] > 0
    default, bench = MilvusClient(uri=milvus_server.uri), MilvusClient(uri=milvus_server.uri, db_name=BENCH_DATABASE)
    try:
        assert default.list_collections() == [] and bench.list_collections()
        # Measured on sealed segments, as production searches them a minute after the writes.
        assert sum(bench.get_collection_stats(c)["row_count"] for c in bench.list_collections()) >= 2 * 20
    finally:
        default.close()
        bench.close()


def test_bench_write_measures_throughput_and_floor(tmp_path: Path) -> None:
    out = tmp_path / "write.json"
    argv = ["bench", "write", "--users", "2", "--memories-per-user", "30", "--batch", "15", "--json", str(out)]
    assert main(argv) == 0
    data = json.loads(out.read_text())
    assert data["memories"] == 60
    assert data["memories_per_s"] > 0 and data["floor_memories_per_s"] > 0
    assert data["ratio"] == pytest.approx(data["floor_memories_per_s"] / data["memories_per_s"], rel=0.01)
    # The server's CPU per memory: the embedder and the event loop worked on every write.
    cpu = data["server_cpu_ms_per_memory"]
    assert cpu["threads"]["embedder"] > 0 and cpu["threads"]["event loop"] > 0
    assert cpu["total"] == pytest.approx(sum(cpu["threads"].values()), abs=0.01 * len(cpu["threads"]))


def test_bench_scaling_prints_both_curves_and_draws_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, png = tmp_path / "scaling.json", tmp_path / "scaling.png"
    argv = ["bench", "scaling", "--memories", "10,20", "--users", "2", "--fixed-memories", "5", "--queries", "10"]
    assert main([*argv, "--plot", str(png), "--json", str(out)]) == 0
    points = json.loads(out.read_text())
    assert [(p["curve"], p["users"], p["memories_per_user"]) for p in points] == [
        ("memories", 1, 10),
        ("memories", 1, 20),
        ("users", 2, 5),
    ]
    for p in points:
        assert p["queries"] == 10 and p["errors"] == {}
        assert 0 < p["p50_ms"] <= p["p95_ms"] <= p["p99_ms"]
        assert p["recall_p50_ms"] > 0 and p["qps"] > 0
        if p["curve"] == "memories":
            assert 0 < p["stored"] <= p["memories_per_user"], "written repeats are confirmed, not stored"
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    printed = capsys.readouterr().out
    assert "recall p50" in printed and f"plot: {png}" in printed


def _tiny_dialogue_data(root: Path) -> Path:
    """A LoCoMo-format probe conversation, a second one and a MemoryBank file: 24 filler turns."""
    (root / "locomo").mkdir(parents=True)
    (root / "memorybank").mkdir()
    probe = {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I play the bassoon in a community orchestra now."},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "I started volunteering at the greyhound rescue."},
        ],
        "qa": [{"question": "What does Ana play?", "answer": "bassoon", "evidence": ["D1:1"], "category": 4}],
    }
    other = {
        "speaker_a": "Cy",
        "speaker_b": "Di",
        "session_1_date_time": "9:00 am on 1 July, 2023",
        "session_1": [
            {"speaker": "Cy" if i % 2 else "Di", "dia_id": f"D1:{i}", "text": f"Day {i} of the canal walk was windy."}
            for i in range(1, 13)
        ],
        "qa": [],
    }
    bank = {
        "Emily": {
            "name": "Emily",
            "history": {
                "2023-04-27": [
                    {"query": f"I tried recipe number {i} today.", "response": f"How did recipe {i} turn out?"}
                    for i in range(6)
                ]
            },
        }
    }
    (root / "locomo" / "00-probe.json").write_text(json.dumps(probe))
    (root / "locomo" / "01-other.json").write_text(json.dumps(other))
    (root / "memorybank" / "memory_bank_en.json").write_text(json.dumps(bank))
    return root


def test_bench_scaling_grows_one_user_through_add_conversation(tmp_path: Path) -> None:
    out, png = tmp_path / "scaling.json", tmp_path / "scaling.png"
    data = _tiny_dialogue_data(tmp_path / "data")
    argv = ["bench", "scaling", "--memories", "", "--users", "", "--conversation-memories", "30,60"]
    argv += ["--data", str(data), "--probe-questions", "1", "--add-sessions", "2", "--queries", "5"]
    assert main([*argv, "--plot", str(png), "--json", str(out)]) == 0
    point, later = json.loads(out.read_text())
    # The same question is asked at every point, and each still embeds it: a local embedding
    # takes milliseconds, a cached vector a tenth of one.
    assert point["stages_ms"]["embed"] > 0.8 and later["stages_ms"]["embed"] > 0.8
    assert point["curve"] == "conversation" and point["memories_per_user"] >= 30
    assert point["queries"] == 1 and point["errors"] == {} and point["recall_p50_ms"] > 0
    assert point["probe_recall"]["n"] == 1 and point["probe_recall"]["hit@10"] == 1.0
    assert point["add_conversation_p50_ms"] > 0 and point["add_conversation_empty_p50_ms"] > 0
    assert point["add_conversation_new_user_p50_ms"] > 0
    assert point["turns_written"] >= 2 + 2 * 20  # the probe, at least one filler session, the timed ones
    assert all(point["disk_bytes"][part] > 0 for part in ("records", "lexical", "vectors"))
