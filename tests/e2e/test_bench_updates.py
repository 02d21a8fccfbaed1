"""`memsvc bench updates` through the real service: update stories, non-updates, paraphrases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memsvc.bench.updates import Result, bundled, load_stories, out_of_order, repeated
from memsvc.cli import main

pytestmark = pytest.mark.e2e

STORIES = {
    "stories": [
        {
            "id": "move",
            "type": "update",
            "domain": "residence",
            "user_name": "",
            "sessions": [
                {
                    "date": "2025-01-10T09:00:00Z",
                    "turns": [
                        {"role": "user", "text": "I live in Leeds, in a flat near the park."},
                        {"role": "assistant", "text": "Good to know!", "filler": True},
                    ],
                },
                {
                    "date": "2025-04-02T09:00:00Z",
                    "turns": [
                        {"role": "user", "text": "Big news, I moved to Manchester last month!"},
                        {"role": "assistant", "text": "Congrats on the move!", "filler": True},
                    ],
                },
            ],
            "statements": [[0, 0], [1, 0]],
            "questions": {"current": ["Where do I live?"], "history": ["Where did I live before I moved?"]},
        },
        {
            "id": "sister",
            "type": "non_update",
            "domain": "residence",
            "user_name": "Bo",
            "sessions": [
                {"date": "2025-01-10T09:00:00Z", "turns": [{"role": "user", "text": "I live in Boston."}]},
                {"date": "2025-03-10T09:00:00Z", "turns": [{"role": "user", "text": "My sister moved to Denver!"}]},
            ],
            "statements": [[0, 0], [1, 0]],
            "questions": {"current": ["Which city do I live in?"]},
        },
    ]
}
PARAPHRASES = {
    "users": [
        {
            "id": "flyer",
            "memories": [{"content": "I prefer window seats"}, {"content": "Allergic to penicillin."}],
            "questions": [{"text": "how do I like to fly?", "answer": 0}],
            "unrelated": ["What's the name of my cat?"],
        }
    ]
}


def test_bench_updates_reports_every_figure_per_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stories, paraphrases, out = tmp_path / "stories.json", tmp_path / "para.json", tmp_path / "out.json"
    stories.write_text(json.dumps(STORIES))
    paraphrases.write_text(json.dumps(PARAPHRASES))
    args = ["--stories", str(stories), "--paraphrases", str(paraphrases), "--json", str(out)]
    rc = main(["bench", "updates", *args, "--modes", "direct,applicability"])
    assert rc == 0
    assert "2 stories (1 updates, 1 non-updates), 1 paraphrase questions" in capsys.readouterr().out
    numbers = json.loads(out.read_text())
    assert list(numbers) == ["DIRECT", "APPLICABILITY"]
    for mode in numbers.values():
        assert set(mode) == {
            "update_win",
            "history",
            "non_update_keep",
            "filler",
            "repeats",
            "out_of_order",
            "paraphrase",
            "unrelated_empty",
        }
        assert mode["update_win"]["n"] == 1 and mode["non_update_keep"]["n"] == 1 and mode["history"]["n"] == 1
        # Every answer is checked for filler, repeats and order: three story questions, one paraphrase.
        assert mode["filler"]["n"] == 3 and mode["out_of_order"]["n"] == 4
        assert mode["update_win"]["rate"] == 1.0 and mode["non_update_keep"]["rate"] == 1.0
        assert mode["filler"]["rate"] == 0.0 and mode["out_of_order"]["rate"] == 0.0
        assert mode["paraphrase"]["rate"] == 1.0


def test_repeats_and_order_are_judged_from_what_an_assistant_reads() -> None:
    turn = Result("t1", 0.9, "I live in Leeds, near the park.", (), frozenset())
    fact = Result("f1", 0.8, "I live in Leeds, near the park.", ("t1",), frozenset())
    quote = Result("s1", 0.7, "Conversation s1:\nAnn: I live in Leeds, near the park.", ("t9",), frozenset())
    other = Result("o1", 0.95, "I work at Acme.", (), frozenset())
    assert repeated([turn, fact]) == (turn, fact)
    assert repeated([turn, quote]) == (turn, quote)
    assert repeated([turn, other]) is None
    assert out_of_order([turn, other]) and not out_of_order([other, turn])


def test_the_shipped_sets_hold_what_the_benchmark_promises() -> None:
    stories = load_stories(bundled("updates.json"))
    updates = [s for s in stories if s.is_update]
    assert len(updates) >= 40 and len(stories) - len(updates) >= 10
    assert sum(1 for s in updates if len(s.statements) >= 3) >= 8  # updates of updates
    paraphrases = json.loads(bundled("paraphrases.json").read_text())
    assert sum(len(u["questions"]) for u in paraphrases["users"]) >= 60


@pytest.mark.parametrize("voice", ["casual", "chatty", "world"])
def test_the_sets_written_by_others_point_at_what_they_say(voice: str) -> None:
    for story in load_stories(bundled(f"updates-{voice}.json")):
        assert story.current and (story.history or not story.is_update)
        for s, t in story.statements:
            assert story.sessions[s]["turns"][t]["role"] == "user"
    paraphrases = json.loads(bundled(f"paraphrases-{voice}.json").read_text())
    for user in paraphrases["users"]:
        assert all(0 <= q["answer"] < len(user["memories"]) for q in user["questions"])
