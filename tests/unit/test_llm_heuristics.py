"""The offline heuristics that stand in for the LLM: keywords, dates, needs, triviality, parsing, sufficiency."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memsvc.domain.models import embedding_text
from memsvc.llm.dates import named_time, parse_time_window
from memsvc.llm.heuristics import (
    declarative,
    is_trivial,
    judge_evidence,
    route,
    split_query,
    synthesize_questions,
    variations,
)
from memsvc.llm.needs import detect_needs
from memsvc.llm.parse import MalformedReply, parse_json, string_list
from memsvc.llm.text import (
    extract_keywords,
    named_entities,
    salient_terms,
    sentences,
    stem,
    tokens,
    without_names,
    without_questions_asked_back,
)

NOW = datetime(2026, 11, 22, 5, 0, tzinfo=UTC).timestamp()


def day(text: str) -> str:
    return datetime.fromtimestamp(float(text), UTC).strftime("%Y-%m-%d")


def test_keywords_find_names_phrases_numbers_and_content_words() -> None:
    kw = extract_keywords('Did Dave Miller from Acme say "the crane collapse" happened on 8 May 2023 at 5pm?')
    assert kw.entities == ("Dave Miller", "Acme")
    assert kw.phrases == ("the crane collapse",)
    assert "8 May 2023" in kw.numbers
    assert {"crane", "collapse", "happened"} <= set(kw.terms)
    assert "did" not in kw.terms and "pm" not in kw.terms
    assert kw.query().startswith("the crane collapse Dave Miller Acme")


def test_an_emoji_ends_a_sentence_as_a_full_stop_does() -> None:
    assert sentences("name change 😩 whats first? Dr. Okafor said so ❤️ ok") == [
        "name change 😩",
        "whats first?",
        "Dr. Okafor said so ❤️",
        "ok",
    ]


def test_sentence_starters_and_months_are_not_names() -> None:
    assert extract_keywords("Where does the person who recommended the trail work?").entities == ()
    assert extract_keywords("Maria went to Lisbon in March").entities == ("Maria", "Lisbon")
    assert extract_keywords("Tell me about my sister's job").entities == ()


def test_words_and_names_keep_their_letters_in_any_script() -> None:
    assert tokens("vovó, got it. thanks") == ["vovó", "got", "it", "thanks"]
    assert named_entities("We flew to São Paulo with Zoë, then to Reykjavík on the iPhone's map") == [
        "São Paulo",
        "Zoë",
        "Reykjavík",
    ]


def test_names_are_left_out_with_their_possessive_and_nothing_else() -> None:
    assert without_names("What is Caroline's identity?", ["Caroline"]) == "What is identity?"
    assert without_names("Did Mel and Jon Smith\u2019s kids meet?", ["Mel", "Jon Smith"]) == "Did and kids meet?"
    # Whole names only: "Mel" is not in "Melanie" nor in "Carmel".
    assert without_names("Where did Melanie visit Carmel?", ["Mel"]) == "Where did Melanie visit Carmel?"
    # A question of nothing but the name stays as it is.
    assert without_names("Caroline?", ["Caroline"]) == "Caroline?"
    assert without_names("What did Caroline say?", []) == "What did Caroline say?"


def test_a_text_leaves_out_only_the_questions_it_ends_on_after_stating_something() -> None:
    said = "We went camping last weekend. It was great! What did you get up to? Anything fun?"
    assert without_questions_asked_back(said) == "We went camping last weekend. It was great!"
    # Asking first and stating after keeps all of it, as does a text of nothing but questions.
    asked_first = "Can you recommend a hotel in Lisbon? I like quiet places."
    assert without_questions_asked_back(asked_first) == asked_first
    assert without_questions_asked_back("How was the trip? Did you see the coast?") == (
        "How was the trip? Did you see the coast?"
    )
    assert without_questions_asked_back("I finished my screenplay.") == "I finished my screenplay."


def test_only_a_named_speakers_turn_is_embedded_without_the_questions_it_hands_back() -> None:
    said = "I finally finished my screenplay! Have you written anything lately?"
    assert embedding_text(said, "Joanna") == "Joanna: I finally finished my screenplay!"
    # Without a name (a user talking to an assistant) a closing question is a request: it stays.
    assert embedding_text(said, "") == said


def test_stemming_matches_word_forms() -> None:
    assert stem("works") == stem("worked") == stem("working") == "work"
    assert stem("recommended") == "recommend"
    assert stem("stories") == "story"
    assert stem("glass") == "glass"


def test_pseudo_relevance_feedback_prefers_new_names() -> None:
    terms = salient_terms(["Maria recommended the Skyline hiking trail"], ["recommended", "hiking", "trail", "work"])
    assert terms[:2] == ["Maria", "Skyline"]


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("What was I worried about last month?", "2026-10-01", "2026-11-01"),
        ("what did I do in March?", "2026-03-01", "2026-04-01"),
        ("what did I do in December?", "2025-12-01", "2026-01-01"),  # not yet this year: last December
        ("two weeks ago I met someone", "2026-11-04", "2026-11-11"),
        ("what happened on 8 May 2023?", "2023-05-08", "2023-05-09"),
        ("May 8, 2023", "2023-05-08", "2023-05-09"),
        ("2023-05-08", "2023-05-08", "2023-05-09"),
        ("in May 2023", "2023-05-01", "2023-06-01"),
        ("the week before 8 May 2023", "2023-04-30", "2023-05-08"),
        ("in 2022", "2022-01-01", "2023-01-01"),
        ("yesterday", "2026-11-21", "2026-11-22"),
        ("the past 2 weeks", "2026-11-08", "2026-11-23"),
        ("last Monday", "2026-11-16", "2026-11-17"),
        ("where have I lived since 2019?", "2019-01-01", "2026-11-23"),
        ("what changed since March?", "2026-03-01", "2026-11-23"),
    ],
)
def test_date_phrases_become_windows(text: str, start: str, end: str) -> None:
    window = parse_time_window(text, NOW)
    assert window is not None
    assert (day(str(window.start)), day(str(window.end))) == (start, end)


@pytest.mark.parametrize("text", ["May I ask you something?", "When did Caroline go to the support group?", "hello"])
def test_no_date_phrase_no_window(text: str) -> None:
    assert parse_time_window(text, NOW) is None


def test_a_named_time_is_read_against_the_reference_and_vague_words_name_none() -> None:
    window = named_time("When did Melanie go camping in June?", NOW)
    assert window is not None and day(str(window.start)) == "2026-06-01"
    assert named_time("What did Melanie paint recently?", NOW) is None
    assert named_time("What have I been reading lately?", NOW) is None


@pytest.mark.parametrize(
    ("text", "need"),
    [
        ("The magnesium did not help, I still cannot sleep", "follow_up_failure"),
        ("Did that thing you suggested actually work?", "follow_up_failure"),
        ("But I thought you said the meeting was on Friday", "contradiction"),
        ("I keep forgetting my keys again", "loop"),
        ("I need to file taxes before the deadline", "high_stakes"),
        ("From now on just give me short answers", "mode_shift"),
        ("Ugh, why won't this work!!", "frustration"),
        ("My therapist says my anxiety is getting worse", "sensitive_context"),
        ("any ideas?", "under_specified"),
        ("Which one was it, the blue or the other?", "ambiguity"),
    ],
)
def test_need_detection_finds_each_signal(text: str, need: str) -> None:
    assert detect_needs(text).has(need)


def test_need_detection_stays_quiet_on_plain_questions_and_spots_callbacks() -> None:
    assert detect_needs("What is my dog's name?").needs == {}
    assert detect_needs("What did you recommend for my sleep issues?").callback
    assert detect_needs("What did you recommend for my sleep issues?").wants_assistant_turns
    assert not detect_needs("What did my doctor recommend?").callback


@pytest.mark.parametrize("text", ["hi", "thanks!", "ok cool", "Thank you so much!", "hello there", "good morning", "k"])
def test_trivial_messages(text: str) -> None:
    assert is_trivial(text)


@pytest.mark.parametrize("text", ["What should I get my wife?", "Book a table at Nobu", "Thanks, and what about Ana?"])
def test_non_trivial_messages(text: str) -> None:
    assert not is_trivial(text)


def test_synthesized_questions_are_sensible() -> None:
    questions = synthesize_questions("What should I get my wife for her birthday?", [], 2)
    assert questions == ["wife birthday", "What has the user said about my wife?"]
    assert synthesize_questions("thanks!", [], 2) == []
    # A message that leans on the conversation borrows its subject from the recent turns.
    follow_up = synthesize_questions("Does she still like them?", ["My wife grows orchids in the greenhouse"], 2)
    assert "orchids" in " ".join(follow_up)


def test_variations_follow_seed_001() -> None:
    out = variations("What did you recommend for my sleep issues?")
    assert 1 <= len(out) <= 3
    assert "What did you recommend for my sleep issues?" not in out
    assert out[0] == "recommend sleep issues"
    assert variations("Biscuit vet") == []  # already specific
    assert declarative("Where does Maria work?") == "Maria work"


def test_router_and_split() -> None:
    assert route("Where does the person who recommended the hiking trail work?")[0] == "chain_of_query"
    assert route("What is the current company of the spouse of the CEO of Acme?")[0] == "chain_of_query"
    assert route("What do Alice and Bob like to eat?")[0] == "split_query"
    assert route("What is my dog's name?")[0] == "direct"
    assert split_query("What are Melanie's hobbies and what does Caroline do for work?") == [
        "What are Melanie's hobbies",
        "what does Caroline do for work?",
    ]


def test_sufficiency_follows_the_bridge_entity() -> None:
    question = "Where does the person who recommended the hiking trail work?"
    first = judge_evidence(question, [["Maria recommended the Skyline hiking trail"]], True, 0.8, [question])
    assert not first.sufficient
    assert first.next_query == "Maria Skyline work"
    # A distractor that shares the missing word but not the bridge entity does not close the chain.
    distracted = judge_evidence(
        question, [["Maria recommended the Skyline hiking trail"], ["Tom works at a bank"]], True, 0.8, [question]
    )
    assert not distracted.sufficient
    done = judge_evidence(
        question,
        [["Maria recommended the Skyline hiking trail"], ["Maria works at the Lisbon aquarium"]],
        True,
        0.8,
        [question, first.next_query],
    )
    assert done.sufficient and done.confidence == 1.0


def test_json_parsing_tolerates_fences_and_prose() -> None:
    assert parse_json('```json\n["a", "b"]\n```') == ["a", "b"]
    assert parse_json('Sure: {"tool": "direct"} -- hope this helps') == {"tool": "direct"}
    assert string_list({"questions": ["x", " ", "y"]}, "questions") == ["x", "y"]
    with pytest.raises(MalformedReply):
        parse_json("no json here")
    with pytest.raises(MalformedReply):
        string_list([])
