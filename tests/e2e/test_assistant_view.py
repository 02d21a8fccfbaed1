"""What the assistant receives, over gRPC against a real server (Milvus Lite, SQLite, the local
model): the current truth above what it replaced, results that state something, each fact once,
results in score order, no empty answer when a memory fits, and the user's instructions."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from memsvc.v1 import memory_pb2, query_service_pb2, write_service_pb2
from tests.conftest import RunningServer, ServerFactory
from tests.e2e.test_conversations import add_conversation, turn
from tests.e2e.test_core import add, all_filter, query
from tests.e2e.test_retrieval_modes import ScriptedLlm

pytestmark = pytest.mark.e2e

DAY = 86_400.0
JAN_2025 = 1_736_000_000.0  # 4 January 2025
ASSISTANT = memory_pb2.ROLE_ASSISTANT
MODES = {
    "direct": query_service_pb2.QUERY_MODE_DIRECT,
    "applicability": query_service_pb2.QUERY_MODE_APPLICABILITY,
    "auto": query_service_pb2.QUERY_MODE_AUTO,
}


def said(at: float, *turns: tuple[str, int], name: str = "") -> list[Any]:
    """`turns` a minute apart from `at`; the user's named `name`."""
    return [
        turn(text, name="" if role == ASSISTANT else name, role=role, at=at + i * 60)
        for i, (text, role) in enumerate(turns)
    ]


def user(text: str) -> tuple[str, int]:
    return text, memory_pb2.ROLE_USER


def assistant(text: str) -> tuple[str, int]:
    return text, ASSISTANT


def ask(s: RunningServer, who: str, text: str, mode: str = "direct", **fields: Any) -> Any:
    return query(s, who, text, mode=MODES[mode], filter=all_filter(), skip_cache=True, **fields)


def first_at(response: Any, words: str) -> int | None:
    return next((i for i, r in enumerate(response.memories) if words in r.memory.content), None)


def one_session_each(s: RunningServer, who: str, told: list[tuple[int, str]]) -> None:
    """Each (day, what the user says) as a session of its own, the assistant answering."""
    for n, (day, text) in enumerate(told):
        add_conversation(s, who, f"s{n}", said(JAN_2025 + day * DAY, user(text), assistant("Here are a few ideas.")))


def sessions_apart(s: RunningServer, who: str, days: int, sessions: list[list[tuple[str, int]]]) -> None:
    """Each list of turns a session of its own, `days` after the one before."""
    for n, turns in enumerate(sessions):
        add_conversation(s, who, f"s{n}", said(JAN_2025 + n * days * DAY, *turns))


def assert_newer_first(response: Any, newer: str, older: str) -> None:
    """The newer statement in the top 3, above the older one (if returned at all)."""
    new, old = first_at(response, newer), first_at(response, older)
    assert new is not None and new < 3 and (old is None or new < old), [r.memory.content for r in response.memories]


def assert_no_result_in_any_mode(s: RunningServer, who: str, question: str, words: str) -> None:
    for mode in MODES:
        answer = ask(s, who, question, mode)
        assert all(words not in r.memory.content for r in answer.memories), [r.memory.content for r in answer.memories]


def move_story(s: RunningServer, who: str) -> None:
    add_conversation(
        s,
        who,
        "s1",
        said(
            JAN_2025,
            user("I live in Leeds, in a flat near the park."),
            assistant("Good to know!"),
            user("What's a good houseplant for a dark room?"),
            assistant("A snake plant or a ZZ plant copes with very little light."),
        ),
    )
    add_conversation(
        s,
        who,
        "s2",
        said(
            JAN_2025 + 20 * DAY,
            user("Can you suggest a quick pasta for tonight?"),
            assistant("Aglio e olio: garlic, chilli, olive oil and parsley, ten minutes."),
        ),
    )
    add_conversation(
        s,
        who,
        "s3",
        said(
            JAN_2025 + 70 * DAY,
            user("Big news, I moved to Manchester last month!"),
            assistant("Congrats on the move!"),
            user("Any tips for meeting people in a new city?"),
            assistant("Join a club around something you already enjoy, and say yes to invitations."),
        ),
    )


@pytest.mark.parametrize("mode", list(MODES))
def test_a_later_move_outranks_the_old_city_which_stays_findable_as_history(server: RunningServer, mode: str) -> None:
    move_story(server, "ann")
    now = ask(server, "ann", "Where do I live?", mode)
    new, old = first_at(now, "Manchester"), first_at(now, "Leeds")
    assert new is not None and new < 3 and (old is None or new < old), [r.memory.content for r in now.memories]
    scores = [r.score for r in now.memories]
    assert scores == sorted(scores, reverse=True)
    before = ask(server, "ann", "Where did I live before I moved?", mode)
    at = first_at(before, "Leeds")
    assert at is not None and at < 3, [r.memory.content for r in before.memories]


@pytest.mark.parametrize("mode", list(MODES))
def test_a_question_naming_the_user_gets_the_current_truth_as_one_in_the_first_person(
    server: RunningServer, mode: str
) -> None:
    who = f"gloria-{mode}"

    add_conversation(
        server,
        who,
        "s1",
        # The user's turns carry the user's name, as an assistant that knows it sends them.
        said(
            JAN_2025,
            user("Help me budget. I pay $1,450 each month for my apartment in Albany."),
            assistant("Sure. What else do you pay each month?"),
            user("Phone $40 and groceries about $350."),
            name="Gloria",
        ),
    )
    add_conversation(
        server,
        who,
        "s2",
        said(
            JAN_2025 + 150 * DAY,
            user("The landlord raised my rent when the lease renewed, so since June it has been $1,610."),
            assistant("That's $160 more. Shall we redo the budget?"),
            user("yes please"),
            name="Gloria",
        ),
    )
    answer = ask(server, who, "What does Gloria pay for her apartment each month?", mode)
    new, old = first_at(answer, "1,610"), first_at(answer, "1,450")
    assert new is not None and new < 3 and (old is None or new < old), [r.memory.content for r in answer.memories]
    assert first_at(answer, "yes please") is None  # the answer to an offer states nothing


def test_the_users_name_alone_does_not_make_a_chat_about_something_else_relevant(server: RunningServer) -> None:
    """Every summary of the user's chats names them: a question naming the user matches each
    by that word, which says whose chat it is, not that it answers."""
    who = "sam-named"
    sessions = [
        said(
            JAN_2025,
            user("I started a new job last month, I work at Brightline Clinic as a physiotherapist."),
            assistant("That sounds rewarding! How are you finding it?"),
            name="Sam",
        ),
        said(
            JAN_2025 + 3 * DAY,
            user("I had cold noodles for lunch today, they were surprisingly good."),
            assistant("Cold noodles are great in summer!"),
            name="Sam",
        ),
        said(
            JAN_2025 + 6 * DAY,
            user("Can you recommend a podcast about history?"),
            assistant("Try 'Hardcore History' by Dan Carlin."),
            name="Sam",
        ),
    ]
    for n, turns in enumerate(sessions):
        add_conversation(server, who, f"s{n}", turns)
    answer = ask(server, who, "Where does Sam work?")
    contents = [r.memory.content for r in answer.memories]
    assert contents and "Brightline Clinic" in contents[0], contents
    assert not any("noodles" in c or "podcast" in c for c in contents), contents
    assert answer.report.dropped_below_relevance >= 1


@pytest.mark.parametrize("mode", list(MODES))
def test_a_change_typed_without_its_subject_outranks_the_habit_it_ends(server: RunningServer, mode: str) -> None:
    who = f"lena-{mode}"
    one_session_each(
        server,
        who,
        [
            (0, "what do i wear to bike to work when its 25 degrees. its 7 miles each way and my ears are freezing"),
            (40, "someone stole my bike from outside the office, who do i report it to"),
            (
                80,
                "not biking to work these days, just taking the 22 bus since the theft. any podcast for a 30 min ride",
            ),
            (140, "can i get a cheaper monthly pass through my employer"),
        ],
    )
    assert_newer_first(ask(server, who, "What's my way of commuting at this point?", mode), "22 bus", "25 degrees")


@pytest.mark.parametrize("mode", list(MODES))
def test_a_habit_ended_told_as_how_long_it_has_been_without_it_outranks_the_habit(
    server: RunningServer, mode: str
) -> None:
    who = f"mara-{mode}"
    one_session_each(
        server,
        who,
        [
            (0, "which red goes with lamb? i have a glass of red most nights anyway so a bottle wont go to waste"),
            (50, "two months today without alcohol and sleeping so much better. what do i bring to a bbq instead"),
            (90, "how do i descale a kettle"),
        ],
    )
    assert_newer_first(
        ask(server, who, "Do I still drink wine in the evenings?", mode), "without alcohol", "most nights"
    )


@pytest.mark.parametrize(
    ("who", "asked", "answer", "reply", "question", "words"),
    [
        # A reply that says a clause of the assistant's back.
        (
            "omar",
            "my cat knocks everything off the counter at 5am, why",
            "She wants breakfast, and it works: you get up. Feed her from a timer feeder at 5.",
            "lol yeah she wants breakfast",
            "why does my cat wake me up?",
            "lol yeah",
        ),
        # A reply that only judges what the assistant suggested.
        (
            "theo",
            "my lower back aches after long shifts on my feet, what helps",
            "Stretch your hip flexors, and roll your back on a foam roller for five minutes at night.",
            "the foam roller thing is genius",
            "what helps my back after work?",
            "genius",
        ),
    ],
)
def test_a_reply_that_only_reacts_to_what_the_assistant_said_is_no_result(
    server: RunningServer, who: str, asked: str, answer: str, reply: str, question: str, words: str
) -> None:
    add_conversation(server, who, "s1", said(JAN_2025, user(asked), assistant(answer), user(reply)))
    assert_no_result_in_any_mode(server, who, question, words)


def test_what_the_user_says_in_passing_in_lower_case_is_summarised_and_extracted(server: RunningServer) -> None:
    who = "nadia"
    turns = said(
        JAN_2025,
        user("socks for 12 hr shifts? im a pharmacist at walgreens"),
        assistant(
            "For all-day standing, 15-20 mmHg graduated compression is the sweet spot: Sockwell, Comrad "
            "and Bombas all make good ones, and supportive shoes with cushioned insoles help a lot too."
        ),
        user("sockwell are cute"),
        assistant(
            "Sockwell's Elevation and Comrad's Knee-High are merino, so they stay cooler over a long "
            "shift; Bombas and Vim & Vigr come in wide calves."
        ),
        user("sold"),
        name="Nadia",
    )
    written = add_conversation(server, who, "s1", turns)
    # The summary quotes the user's own statement before the assistant's brand list ...
    assert written.summary.content.splitlines()[1] == "Nadia: socks for 12 hr shifts? im a pharmacist at walgreens"
    # ... and the rules read "im" as "I'm": the job is extracted in the third person.
    assert any("Nadia is a pharmacist at walgreens" in m.content for m in written.extracted)
    answer = ask(server, who, "Which pharmacy chain does Nadia work for?")
    assert first_at(answer, "walgreens") == 0, [r.memory.content for r in answer.memories]


def test_a_statement_before_a_question_and_what_the_household_did_are_extracted(server: RunningServer) -> None:
    who = "ben"
    turns = said(
        JAN_2025,
        user("I'm allergic to penicillin, is amoxicillin ok for my ear infection?"),
        assistant("No, amoxicillin is a penicillin. Ask your doctor for something else, like azithromycin."),
        user("we finally moved out of the Leeds flat, we're in a little house in Otley now"),
        name="Ben",
    )
    written = add_conversation(server, who, "s1", turns)
    extracted = [m.content for m in written.extracted]
    assert "Ben is allergic to penicillin." in extracted, extracted
    assert any("moved out of the Leeds flat" in m for m in extracted), extracted
    answer = ask(server, who, "Am I allergic to anything?")
    assert any(r.memory.content == "Ben is allergic to penicillin." for r in answer.memories[:2]), [
        r.memory.content for r in answer.memories
    ]


@pytest.mark.parametrize("mode", list(MODES))
def test_a_change_ranked_below_the_results_takes_the_place_of_the_answer_it_replaces(
    server: RunningServer, mode: str
) -> None:
    who = f"dee-{mode}"
    add_conversation(
        server,
        who,
        "s1",
        said(
            JAN_2025,
            user("I'm a nurse on the children's ward at the city hospital."),
            assistant("That must keep you busy."),
            user("Any tips for sleeping after night shifts?"),
            assistant("Blackout curtains, and keep the same sleep window even on days off."),
        ),
    )
    add_conversation(
        server,
        who,
        "s2",
        said(
            JAN_2025 + 40 * DAY,
            user("How long should pizza dough rest?"),
            assistant("At least an hour at room temperature, or overnight in the fridge."),
        ),
    )
    add_conversation(
        server,
        who,
        "s3",
        said(
            JAN_2025 + 120 * DAY,
            user("So I finally did it: left nursing in March and I'm a full-time potter now."),
            assistant("What a leap!"),
        ),
    )
    # One result: the new answer must take a place the old one's words alone would not give it.
    answer = ask(server, who, "What's my job?", mode, limit=1)
    assert [r.memory.content for r in answer.memories if "potter" in r.memory.content], answer.memories


def test_supersession_follows_provenance_to_the_source_turn(server: RunningServer) -> None:
    move_story(server, "ann")
    listed = server.writes.ListMemories(
        write_service_pb2.ListMemoriesRequest(
            user_id="ann", page_size=100, filter=memory_pb2.MemoryFilter(include_inactive=True)
        ),
        metadata=server.md,
    ).memories
    old_fact = next(m for m in listed if m.kind != memory_pb2.MEMORY_KIND_EPISODE and "Leeds" in m.content)
    assert old_fact.retention_status == memory_pb2.RETENTION_STATUS_SUPERSEDED and old_fact.outdated
    successor = next(m for m in listed if m.id == old_fact.superseded_by)
    assert "Manchester" in successor.content
    old_turn = next(m for m in listed if m.kind == memory_pb2.MEMORY_KIND_EPISODE and "Leeds" in m.content)
    # The turn stays active (history), marked as stating what is no longer current.
    assert old_turn.retention_status == memory_pb2.RETENTION_STATUS_ACTIVE
    assert old_turn.outdated and old_turn.superseded_by == successor.id
    history = server.writes.GetMemoryHistory(
        write_service_pb2.GetMemoryHistoryRequest(user_id="ann", id=old_turn.id), metadata=server.md
    ).versions
    assert history[-1].change == memory_pb2.MEMORY_CHANGE_SUPERSEDE and successor.id in history[-1].description
    # Outdated, it gives way for a question about the present, with its currency in the breakdown.
    result = next(r for r in ask(server, "ann", "Where do I live?").memories if r.memory.id == old_turn.id)
    assert result.memory.outdated and result.score_breakdown.currency < 1.0


def test_someone_elses_move_supersedes_nothing(server: RunningServer) -> None:
    add_conversation(server, "bo", "s1", said(JAN_2025, user("I live in Boston with my partner.")))
    add_conversation(
        server, "bo", "s2", said(JAN_2025 + 60 * DAY, user("My sister just moved to Denver for a new job!"))
    )
    answer = ask(server, "bo", "Where do I live?")
    at = first_at(answer, "Boston")
    assert at is not None and at < 3
    assert not any(r.memory.outdated for r in answer.memories if "Boston" in r.memory.content)


def test_what_is_typed_before_an_emoji_is_a_statement_even_when_a_question_follows(server: RunningServer) -> None:
    who = "lena"
    add_conversation(
        server,
        who,
        "s1",
        said(JAN_2025, user("any good pierogi near me? i live in pittsburgh, lawrenceville area")),
    )
    written = add_conversation(
        server,
        who,
        "s2",
        said(
            JAN_2025 + 60 * DAY,
            user("we finally moved to denver last week 😅 whats a good grocery store near cap hill?"),
        ),
    )
    # The sentence before the emoji is extracted as what it states, without the emoji.
    facts = [m.content for m in written.extracted]
    assert any("moved to denver last week" in f and "😅" not in f for f in facts), facts
    for mode in MODES:
        assert_newer_first(ask(server, who, "Which city do I live in now?", mode), "denver", "pittsburgh")


@pytest.mark.parametrize("mode", list(MODES))
def test_asked_what_held_before_a_change_the_replaced_statement_comes_first(server: RunningServer, mode: str) -> None:
    who = f"jordan-{mode}"
    sessions = [
        [
            user("Help me budget. Rent's $1,700 for the one-bed, utilities around $150, groceries maybe $400."),
            assistant("With $1,700 rent, try to keep the rest under $1,000 and save what is left."),
        ],
        [
            user("How do I get my deposit back when I move out one day?"),
            assistant("Document the flat's condition with photos and give notice in writing."),
        ],
        [
            user("Signed the lease renewal, so my rent is $1,950 now. Can you redo my budget?"),
            assistant("With rent at $1,950, the rest needs to fit in about $950."),
        ],
    ]
    sessions_apart(server, who, 60, sessions)
    answer = ask(server, who, "What was my rent before the renewal?", mode, limit=6)
    assert_newer_first(answer, "1,700", "1,950")
    # ... while the present is asked for as before.
    assert_newer_first(ask(server, who, "What's my rent?", mode, limit=6), "1,950", "1,700")


@pytest.mark.parametrize("mode", list(MODES))
def test_a_relatives_move_comes_after_where_the_user_lives(server: RunningServer, mode: str) -> None:
    who = f"caleb-{mode}"
    sessions = [
        [
            user("friends visiting pittsburgh next weekend, where do i take them for food"),
            assistant("Primanti Bros for the sandwich, then the Strip District on Saturday morning."),
        ],
        [
            user("my sister just moved to denver for a nursing job, whats a good housewarming gift i can ship her"),
            assistant("A plant delivered locally, or a humidifier: the air there is very dry."),
        ],
        [
            user("best way to bike to downtown without dealing with the hills"),
            assistant("Take the riverfront trail; it stays flat most of the way."),
        ],
    ]
    sessions_apart(server, who, 50, sessions)
    answer = ask(server, who, "What city do I live in?", mode, limit=6)
    assert_newer_first(answer, "pittsburgh", "denver")


@pytest.mark.parametrize("mode", list(MODES))
def test_a_car_measured_against_the_old_one_in_a_question_outranks_it(server: RunningServer, mode: str) -> None:
    who = f"gerald-{mode}"
    sessions = [
        [
            user(
                "Good morning. My 2011 Honda Civic needs an oil change and the shop quoted me $90. Can I do it myself?"
            ),
            assistant("You can: you need a drain pan, a filter wrench, the right filter and about four quarts of oil."),
            user("Do I need to reset the oil light"),
            assistant("Yes, hold the reset knob with the ignition on until the oil life shows 100%."),
        ],
        [
            user("My granddaughter is coming for a week in July. What can we do around Asheville that isn't hiking?"),
            assistant("The science museum, tubing on the French Broad River, or the nature center's red pandas."),
        ],
        [
            user("Good afternoon. First, can you freeze cooked pumpkin? We have a glut from the garden."),
            assistant("Yes: cool it, then freeze it flat in bags for up to three months."),
            # Unlike the oil change in its words, and a question at its end.
            user(
                "Question about tires. The RAV4 handles the hills up to our place much better than the old Honda "
                "did, but do I need all-weather tires for the three or four snow days we get?"
            ),
            assistant("All-weather tires with the snowflake symbol are a good fit for a few snow days."),
            user("Does the hybrid battery need any maintenance?"),
            assistant("Very little: keep its cooling vent clear."),
        ],
    ]
    sessions_apart(server, who, 100, sessions)
    assert_newer_first(ask(server, who, "which car do I have currently?", mode), "RAV4", "Civic")


@pytest.mark.parametrize("mode", list(MODES))
def test_a_change_beside_a_remark_that_would_laugh_at_it_outranks_the_old_habit(
    server: RunningServer, mode: str
) -> None:
    who = f"pete-{mode}"
    sessions = [
        [
            user("can't sleep, as usual, I'm normally in bed around 1am anyway, night owl. is a pricey pram worth it?"),
            assistant("You don't need the priciest one: a mid-range travel system does the job."),
            user("fair enough"),
        ],
        [
            user("is it worth getting a flu jab if I'm healthy, the depot offers them free"),
            assistant("If it's free it's usually worth it, especially with a baby at home."),
            user(
                "new job starts at the depot at 6am so I'm going to bed at half nine now, which me from a year ago "
                "would find hilarious. Can you help me with meal prep for a 30 minute break?"
            ),
            assistant("Chicken pasta salad, chilli and rice in a flask, or wraps."),
            user("flask is smart it's cold in the depot"),
        ],
    ]
    sessions_apart(server, who, 200, sessions)
    assert_newer_first(ask(server, who, "when am I usually going to sleep now?", mode), "half nine", "1am")


@pytest.mark.parametrize("mode", list(MODES))
def test_the_assistants_reply_that_repeats_a_replaced_fact_gives_way_with_it(server: RunningServer, mode: str) -> None:
    who = f"owen-{mode}"
    sessions = [
        [
            user(
                "Trying to get my finances in order. Take-home is about 2,300 a month, rent is 1,250 for the one-bed "
                "in Clapton. Where do I even start?"
            ),
            assistant("Try a simple split: after rent and bills, move a fixed amount to savings on payday."),
            user("ok weekly allowance I can do. how much should I save"),
            assistant("A common target is 20% of take-home. With 1,250 rent, maybe start with 200 a month."),
        ],
        [
            user(
                "Letter came from the letting agent today. They raised it to 1,450 a month, for the same flat with "
                "the same mouldy bathroom. I want to push back"
            ),
            assistant("Ouch, that's a big jump. Ask them to justify it against similar one-beds nearby."),
        ],
        [
            user(
                "Update: they didn't budge, so I moved. Smaller studio in Walthamstow, 1,100 a month, and the "
                "bathroom has no mould. Anyway I need a recipe for a two-ring hob."
            ),
            assistant("Oh that's great news, a mould-free bathroom and cheaper rent! Try a chorizo and chickpea stew."),
        ],
    ]
    sessions_apart(server, who, 120, sessions)
    # "With 1,250 rent, ..." says again what the raise replaced: it ranks below the raise.
    assert_newer_first(ask(server, who, "what's my rent currently?", mode), "1,450", "1,250")


@pytest.mark.parametrize("mode", list(MODES))
def test_a_session_summary_gives_way_with_the_statement_it_answered_through(server: RunningServer, mode: str) -> None:
    who = f"mila-{mode}"
    sessions = [
        [
            user("My cat Mila only gets dry food, Royal Canin indoor. Is that ok or does she need wet?"),
            assistant("Dry alone can be fine, but adding wet food helps with hydration and kidney health."),
            user("okay, something to think about"),
        ],
        [
            user(
                "We switched Mila to wet food, she's on Lily's Kitchen pouches twice a day now. How much should"
                " she have?"
            ),
            assistant("Happy cat!"),
            user("extremely lol"),
            assistant("For a 4 kg indoor cat, about 3 pouches a day; check the pack guide and watch her weight."),
        ],
        [
            user("what's a good dinner for 6 with one vegan and one gluten free"),
            assistant("A big Thai green curry with tofu and veg on rice fits both."),
        ],
        [
            user("vet visit today, bit stressful"),
            assistant("Oh no, how's Mila?"),
            user(
                "Early kidney disease. So she's on a prescription renal diet now, Hill's k/d wet, nothing else allowed."
            ),
            assistant("I'm sorry, that's worrying news."),
            user("she's ok for now"),
            assistant("Warming the food slightly can make it more appealing."),
        ],
    ]
    sessions_apart(server, who, 80, sessions)
    assert_newer_first(ask(server, who, "What does my cat eat?", mode), "renal diet", "Lily's Kitchen")


@pytest.mark.parametrize("mode", list(MODES))
def test_a_role_given_the_user_outranks_the_role_before(server: RunningServer, mode: str) -> None:
    who = f"barista-{mode}"
    sessions = [
        [
            user("hey what's the difference between a cortado and a flat white"),
            assistant("A cortado is about half espresso, half milk; a flat white has more milk."),
            user("thanks!! im a barista at Lark Coffee but I only started 2 weeks ago so still learning the menu"),
            assistant("You'll have it down in no time."),
        ],
        [
            user("good news, they made me shift supervisor! any tips for counting a till fast"),
            assistant("Congratulations! Count notes first, in stacks of ten, then coins by weight if you can."),
        ],
        [
            user("How do I write a rota that people don't hate lol"),
            assistant("Publish it two weeks ahead and rotate the unpopular shifts fairly."),
            user("I was made store manager last week so the whole rota's on me"),
            assistant("Congratulations on the promotion!"),
        ],
    ]
    sessions_apart(server, who, 100, sessions)
    assert_newer_first(
        ask(server, who, "What position do I hold at the coffee shop?", mode), "store manager", "barista"
    )


@pytest.mark.parametrize("mode", list(MODES))
def test_flats_looked_at_after_the_past_retold_leave_the_home_current(server: RunningServer, mode: str) -> None:
    who = f"siobhan-{mode}"
    sessions = [
        [
            user("quick one, how do I get tea stains out of my mugs"),
            assistant("Scrub them with a paste of baking soda and a little water, then rinse."),
            user("hiya, I live in Manchester and my flat is damp as anything, black mould in the bedroom. help"),
            assistant("Report the mould to your landlord in writing with photos, and wipe it with a mould remover."),
            user("would a dehumidifier help?"),
            assistant("Yes, a compressor one pulls a lot of water out of a damp flat."),
        ],
        [
            user(
                "back when I lived in Cork we never had this damp problem lol. Anyway, now I'm looking at a couple "
                "of other flats, Chorlton and Didsbury, which is better for a girl on a budget who loves a pub"
            ),
            assistant("Chorlton is a bit cheaper with lots of independent pubs; Didsbury is leafier and pricier."),
            user("Chorlton it is"),
            assistant("Good choice. Check how far the tram stop is too."),
        ],
        [
            user("I need a Halloween costume using stuff I already have, a black dress and a lot of eyeliner"),
            assistant("Try Wednesday Addams, a black cat with eyeliner whiskers, or a witch."),
        ],
    ]
    sessions_apart(server, who, 60, sessions)
    answer = ask(server, who, "which city do I live in right now?", mode)
    at = first_at(answer, "Manchester")
    assert at is not None and at < 3, [r.memory.content for r in answer.memories]
    assert not any(r.memory.outdated for r in answer.memories if "Manchester" in r.memory.content)


@pytest.mark.parametrize("mode", list(MODES))
def test_a_loan_of_an_earlier_conversation_has_run_its_course_and_the_own_car_comes_first(
    server: RunningServer, mode: str
) -> None:
    who = f"dustin-{mode}"
    sessions = [
        [
            user("whats the right tire pressure for my 2016 tacoma when im towing a small trailer"),
            assistant("Check the door-jamb sticker; for towing, many owners add a few psi to the rear tires."),
            user("and the trailer tires"),
            assistant("Trailer tires usually run at the max pressure on their sidewall."),
        ],
        [
            user("borrowing my brother's tesla model 3 for the weekend while hes away, how does supercharging work"),
            assistant("Plug in at a Supercharger and it bills the car's account; 20 minutes adds a lot of range."),
        ],
        [
            user("how often should i change the oil on the tacoma, mostly highway miles"),
            assistant("Every 5,000 to 7,500 miles with synthetic oil, or what the manual says."),
        ],
    ]
    sessions_apart(server, who, 50, sessions)
    answer = ask(server, who, "What do I drive these days?", mode, limit=6)
    # The borrowed car, and the assistant's answer about charging it, come after the own one.
    assert_newer_first(answer, "tacoma", "tesla model 3")
    assert_newer_first(answer, "tacoma", "Supercharger")
    assert not any(r.memory.outdated for r in answer.memories if "tacoma" in r.memory.content)


def test_an_acknowledgement_is_context_of_the_turn_it_answers_never_a_result(server: RunningServer) -> None:
    move_story(server, "cy")
    for mode in MODES:
        answer = ask(server, "cy", "Leeds flat park", mode)
        assert not any(r.memory.acknowledgement for r in answer.memories)
        assert all("Good to know" not in r.memory.content for r in answer.memories)
    expanded = ask(server, "cy", "Leeds flat park", context_window=1)
    leeds = next(r for r in expanded.memories if r.memory.content.startswith("I live in Leeds"))
    assert [c.content for c in leeds.context] == ["Good to know!"]
    assert leeds.context[0].acknowledgement and not leeds.context_neighbor
    ids = [r.memory.id for r in expanded.memories]
    assert len(ids) == len(set(ids)) and all(c.id not in ids for r in expanded.memories for c in r.context)


def test_an_exclamation_of_joy_is_no_result_in_any_mode(server: RunningServer) -> None:
    add_conversation(
        server,
        "ayla",
        "s1",
        said(
            JAN_2025,
            user("SAM PROPOSED!!! on the beach in Kas, I said yes obviously. Now I need to tell everyone help"),
            assistant("Oh my goodness, congratulations!!"),
        ),
    )
    assert_no_result_in_any_mode(server, "ayla", "Is Sam my fiancé now?", "goodness")


def test_a_fact_and_the_turn_it_was_extracted_from_are_one_result(server: RunningServer) -> None:
    add_conversation(server, "di", "s1", [turn("I'm allergic to shellfish, so no oysters for me", at=JAN_2025)])
    for mode in MODES:
        answer = ask(server, "di", "Am I allergic to anything?", mode, include_sources=True)
        saying = [r for r in answer.memories if "shellfish" in r.memory.content]
        assert len(saying) == 1, [r.memory.content for r in answer.memories]


def test_a_short_memory_asked_for_in_other_words_is_returned_and_nothing_is_explained_when_empty(
    server: RunningServer,
) -> None:
    add(server, "eve", "I prefer window seats")
    answer = query(server, "eve", "how do I like to fly?")
    assert [r.memory.content for r in answer.memories] == ["I prefer window seats"]
    # Stored without a kind, a stated preference is classified as one.
    assert answer.memories[0].memory.kind == memory_pb2.MEMORY_KIND_PREFERENCE
    empty = query(server, "eve", "how do I like to fly?", min_relevance=0.99)
    assert not empty.memories and empty.explanation == "No memory matched the query and filters."


def test_the_contract_has_its_own_block_within_its_budget_whatever_the_query(server: RunningServer) -> None:
    added = add(server, "fay", "Please always answer in German.", "Call me Sam.")
    assert {m.kind for m in added} == {memory_pb2.MEMORY_KIND_INSTRUCTION}
    add(server, "fay", *[f"I visited the {n} museum last spring and loved the paintings." for n in range(12)])
    for mode in ("direct", "applicability"):
        answer = ask(server, "fay", "which museum did I visit?", mode, include_context=True, token_budget=120)
        block = answer.context
        assert block.startswith("How the user wants you to behave:"), block
        assert "answer in German" in block and "Call me Sam" in block and "museum" in block
        assert len(block.split()) * 1.3 <= 130
    # A later instruction about the same thing replaces the earlier one.
    add_conversation(server, "fay", "s1", said(time.time(), user("English is fine again from now on.")))
    block = ask(server, "fay", "any plans?", "applicability").context
    assert "English is fine again" in block and "answer in German" not in block


def test_an_instruction_replaces_the_earlier_one_about_the_same_conduct_however_unlike_in_words(
    server: RunningServer,
) -> None:
    add_conversation(server, "hal", "s1", said(JAN_2025, user("Please address me as Dr. Okafor.")))
    add_conversation(
        server,
        "hal",
        "s2",
        said(JAN_2025 + 90 * DAY, user("All my friends call me Chi these days, so you can go with that.")),
    )
    listed = server.writes.ListMemories(
        write_service_pb2.ListMemoriesRequest(
            user_id="hal", page_size=100, filter=memory_pb2.MemoryFilter(include_inactive=True)
        ),
        metadata=server.md,
    ).memories
    instructions = {m.content: m for m in listed if m.kind == memory_pb2.MEMORY_KIND_INSTRUCTION}
    old = instructions["Please address me as Dr. Okafor."]
    assert old.retention_status == memory_pb2.RETENTION_STATUS_SUPERSEDED
    assert "Chi" in next(m.content for m in listed if m.id == old.superseded_by)
    block = ask(server, "hal", "what's a good gift for a gardener?", "applicability").context
    contract = block.split("\n\n")[0]
    assert contract.startswith("How the user wants you to behave:") and "Chi" in contract, block
    assert "Okafor" not in contract, block


def test_recent_turns_get_a_block_of_their_own(server: RunningServer) -> None:
    add(server, "gus", "I keep bees on my allotment.")
    recent = [query_service_pb2.ConversationTurn(role=memory_pb2.ROLE_USER, content="The hive swarmed today.")]
    block = ask(server, "gus", "bees", include_context=True, recent_turns=recent).context
    assert "Relevant memories" in block and "Recent conversation:" in block and "The hive swarmed" in block


# -- the LLM's add / update / repeat decision ----------------------------------------------------


@pytest.fixture
def llm() -> Iterator[ScriptedLlm]:
    scripted = ScriptedLlm()
    yield scripted
    scripted.close()


def extraction(content: str, action: str = "add", memory: int = 0) -> str:
    item = {"content": content, "kind": "fact", "speaker": "user", "source_turns": [1], "action": action}
    return json.dumps({"memories": [{**item, "memory": memory}]})


def scripted(reply: str, delay: float = 0.0) -> Any:
    def script(system: str, user_text: str) -> tuple[str, float]:
        if "long-term memory keeps" in system:
            return reply, delay
        return '{"contradicted": []}', 0.0

    return script


def llm_server(server_factory: ServerFactory, llm: ScriptedLlm) -> RunningServer:
    s = server_factory(llm_base_url=llm.base_url, llm_model="scripted", extraction_timeout_s=1.0)
    llm.script = scripted(extraction("The user works as a nurse at St Mary's hospital."))
    add_conversation(s, "hal", "s1", said(JAN_2025, user("I work as a nurse at St Mary's.")))
    return s


def facts_of(s: RunningServer, who: str) -> list[Any]:
    listed = s.writes.ListMemories(
        write_service_pb2.ListMemoriesRequest(
            user_id=who, page_size=100, filter=memory_pb2.MemoryFilter(include_inactive=True)
        ),
        metadata=s.md,
    ).memories
    return [m for m in listed if m.kind == memory_pb2.MEMORY_KIND_FACT]


def test_the_llm_sees_the_related_memories_and_its_update_supersedes_one(
    server_factory: ServerFactory, llm: ScriptedLlm
) -> None:
    s = llm_server(server_factory, llm)
    llm.script = scripted(extraction("The user now works as a paramedic.", "update", 1))
    add_conversation(s, "hal", "s2", said(JAN_2025 + 30 * DAY, user("I'm a paramedic now, I left the hospital.")))
    prompt = [c for c in llm.calls if "long-term memory keeps" in c["messages"][0]["content"]][-1]
    assert "[M1]" in prompt["messages"][1]["content"] and "nurse at St Mary's" in prompt["messages"][1]["content"]
    facts = facts_of(s, "hal")
    old = next(m for m in facts if "nurse" in m.content)
    new = next(m for m in facts if "paramedic" in m.content)
    assert old.retention_status == memory_pb2.RETENTION_STATUS_SUPERSEDED and old.superseded_by == new.id


def test_the_llms_repeat_confirms_the_stored_memory(server_factory: ServerFactory, llm: ScriptedLlm) -> None:
    s = llm_server(server_factory, llm)
    llm.script = scripted(extraction("The user is a nurse at St Mary's.", "repeat", 1))
    add_conversation(s, "hal", "s2", said(JAN_2025 + 30 * DAY, user("Still nursing at St Mary's, long shifts.")))
    facts = facts_of(s, "hal")
    assert len(facts) == 1 and facts[0].confirmation_count == 2


@pytest.mark.parametrize(
    ("reply", "delay"),
    [(extraction("The user is a paramedic.", "update", 9), 0.0), ("not json", 0.0), (extraction("x"), 3.0)],
    ids=["update-of-a-memory-not-shown", "malformed", "timeout"],
)
def test_a_decision_about_a_memory_not_shown_or_a_failed_call_touches_no_stored_memory(
    server_factory: ServerFactory, llm: ScriptedLlm, reply: str, delay: float
) -> None:
    s = llm_server(server_factory, llm)
    other = add(s, "ivy", "I work as a nurse at St Mary's.")[0]
    llm.script = scripted(reply, delay)
    add_conversation(s, "hal", "s2", said(JAN_2025 + 30 * DAY, user("I started as a paramedic last week.")))
    nurse = next(m for m in facts_of(s, "hal") if "nurse" in m.content)
    assert nurse.retention_status == memory_pb2.RETENTION_STATUS_ACTIVE
    untouched = s.writes.GetMemory(write_service_pb2.GetMemoryRequest(user_id="ivy", id=other.id), metadata=s.md)
    assert untouched.memory.retention_status == memory_pb2.RETENTION_STATUS_ACTIVE
    assert untouched.memory.confirmation_count == 1


def test_a_later_turn_of_the_same_call_that_changes_a_fact_is_the_current_one(server: RunningServer) -> None:
    turns = said(JAN_2025, user("I live in Leeds."), user("Actually, I moved to York last week."))
    response = add_conversation(server, "jo", "s1", turns)
    assert len(response.turns) == 2  # both kept, as said
    answer = ask(server, "jo", "Where do I live?")
    york, leeds = first_at(answer, "York"), first_at(answer, "Leeds")
    assert york == 0 and (leeds is None or leeds > york), [r.memory.content for r in answer.memories]
