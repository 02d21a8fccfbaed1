"""The CLI's output for a person at a terminal."""

from __future__ import annotations

from datetime import UTC, datetime

from memsvc.terminal import age, clip, ids_of, render, why_ranked

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def ranked(memory_id: str, content: str, score: float, **extra: object) -> dict[str, object]:
    memory = {"id": memory_id, "content": content, "kind": "MEMORY_KIND_FACT", "create_time": "2026-11-21T11:00:00Z"}
    breakdown = {"relevance": 0.8, "semantic": 0.7, "term_coverage": 0.4}
    return {"memory": memory, "score": score, "score_breakdown": breakdown, **extra}


def test_age_clip_and_reasons() -> None:
    assert [age(t, NOW) for t in ("2026-11-24T11:59:30Z", "2026-11-24T11:40:00Z", "2026-11-21T11:00:00Z")] == [
        "now",
        "20 min",
        "3 d",
    ]
    assert age("2024-01-01T00:00:00Z", NOW) == "2 y" and age("", NOW) == ""
    assert clip("a  short\nline", 40) == "a short line"
    assert clip("the quick brown fox jumps over the lazy dog", 20) == "the quick brown fox\u2026"
    reasons = {"relevance": 0.9, "semantic": 0.71, "term_coverage": 0.4, "recency": 1.0}
    assert why_ranked(reasons) == "0.90 (cosine 0.71, words 0.40)"
    assert why_ranked({}) == "0.00 (cosine 0.00, words 0.00)"


def test_a_query_is_a_table_with_reasons_sources_and_a_footer() -> None:
    response = {
        "memories": [
            ranked("m1", "Zoe loves rye bread", 0.91),
            ranked("m2", "Zoe said: " + "bread " * 40, 0.5, sources=[{"content": "I love rye bread"}]),
        ],
        "report": {"mode": "QUERY_MODE_DIRECT"},
    }
    lines = render("query", response, 80, NOW).splitlines()
    assert lines[0].split() == ["#", "score", "kind", "age", "content", "relevance"]
    assert lines[1].split()[:5] == ["1", "0.91", "fact", "3", "d"]
    assert lines[1].endswith("0.80 (cosine 0.70, words 0.40)")
    assert "\u2026" in lines[2] and max(len(line) for line in lines) <= 80
    assert lines[3].strip() == "from: I love rye bread"
    assert lines[-1] == "2 results, mode direct"
    assert render("query", {"memories": []}, 80, NOW) == "no memories matched"
    assert ids_of("query", response) == ["m1", "m2"]


def test_writes_lists_and_erasure_read_as_sentences() -> None:
    added = {
        "memories": [{"id": "m9", "content": "Zoe moved to Oslo"}],
        "results": [{"outcome": "WRITE_OUTCOME_CREATED", "superseded_ids": ["m3"]}],
    }
    assert render("add", added, 100, NOW) == "created  m9  Zoe moved to Oslo  (supersedes m3)"
    listed = {"memories": [ranked("m1", "Zoe loves rye bread", 0)["memory"]], "next_page_token": "tok"}
    assert render("list", listed, 100, NOW).splitlines()[-1] == "more: --page-token tok"
    assert render("forget", {"deleted_count": "4"}, 100, NOW) == "erased 4 memories"
    conversation = {
        "turns": [{"id": "t1"}],
        "turn_results": [{"outcome": "WRITE_OUTCOME_CREATED"}],
        "extracted": [],
        "summary": {"id": "s1", "content": "Conversation s1"},
        "extractor": "EXTRACTOR_RULES",
    }
    assert render("add-conversation", conversation, 100, NOW).splitlines() == [
        "1 turns, 1 new; extractor rules",
        "summary: Conversation s1",
    ]
    assert ids_of("add-conversation", conversation) == ["t1", "s1"]
