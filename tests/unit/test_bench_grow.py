"""The dialogue a bench user is grown with: real turns, cycled without word-for-word repeats."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from memsvc.bench.grow import SESSION_TURNS, filler_sessions


def test_filler_sessions_cycle_the_dialogue_with_other_names_later_dates_and_no_repeats(tmp_path: Path) -> None:
    (tmp_path / "locomo").mkdir()
    (tmp_path / "memorybank").mkdir()
    probe = {"session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": [], "qa": []}
    turns = [{"speaker": "Ana" if i % 2 else "Ben", "dia_id": f"D1:{i}", "text": f"Walk {i}. Rain."} for i in range(30)]
    other = {"session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": turns, "qa": []}
    (tmp_path / "locomo" / "a.json").write_text(json.dumps(probe))
    (tmp_path / "locomo" / "b.json").write_text(json.dumps(other))
    bank = {"E": {"name": "Emily", "history": {"2023-01-01": [{"query": "Tea?", "response": "Green tea."}] * 5}}}
    (tmp_path / "memorybank" / "memory_bank_en.json").write_text(json.dumps(bank))

    sessions = list(itertools.islice(filler_sessions(tmp_path, tmp_path / "locomo" / "a.json", seed=1), 4))
    assert all(len(s) == SESSION_TURNS for s in sessions)
    first, second = sessions[0], sessions[2]  # 40 turns a cycle: two sessions
    assert first[0]["content"] == "Walk 0. Rain." and first[0]["role"] == "ROLE_USER"
    assert second[0]["content"].startswith("Walk 0. Rain. ") and second[0]["content"] != first[0]["content"]
    assert second[0]["name"] != first[0]["name"], "another name each cycle"
    stamps = [t["create_time"] for s in sessions for t in s]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    assistant = [t for s in sessions for t in s if t["role"] == "ROLE_ASSISTANT"]
    assert assistant and all("name" not in t for t in assistant)
