"""The offline rules behind what the assistant receives: acknowledgements, changes, instructions,
kinds, third-person rewriting, questions about the present or the past, and the context block."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest

from memsvc.deadline import Deadline
from memsvc.domain.models import (
    Memory,
    MemoryFilter,
    MemoryKind,
    Namespace,
    Principal,
    RankedMemory,
    Role,
    ScoreBreakdown,
)
from memsvc.llm.acknowledgements import is_acknowledgement
from memsvc.llm.changes import (
    replaces_what_held,
    states_a_change,
    tells_a_one_off,
    tells_anothers_change,
    tells_the_past,
)
from memsvc.llm.heuristics import asks_about_the_past, asks_about_the_present
from memsvc.pipeline.context import QueryInput, QueryPlan, Turn
from memsvc.pipeline.query.current import CurrentTruth, _as_newer, _can_hold, _first_person
from memsvc.pipeline.write.extraction import kind_of
from memsvc.pipeline.write.facts import extract_claims, find_conflict
from memsvc.pipeline.write.instructions import instruction_of
from memsvc.pipeline.write.third_person import as_said_by
from memsvc.retrieval.compose import CONTRACT_HEADER, HEADER, RECENT_HEADER, compose_context

NS = Namespace("t", "p", "e", "u")


@pytest.mark.parametrize(
    ("text", "answered", "role", "answered_role", "reacts"),
    [
        ("Good to know!", "I moved to Leeds last month.", Role.ASSISTANT, Role.USER, True),
        ("Haha yes", "That sounds like a lot of work.", Role.USER, Role.ASSISTANT, True),
        ("Noted, thanks!", "Your dentist is on Tuesday.", Role.USER, Role.ASSISTANT, True),
        ("Congrats on the new job!", "I got a job at Globex.", Role.ASSISTANT, Role.USER, True),
        ("Berlin, nice!", "I moved to Berlin.", Role.ASSISTANT, Role.USER, True),
        ("Thanks, Caroline!", "Here you go.", Role.USER, Role.USER, True),
        # The assistant remarking on news it was told, its own feelings included.
        ("Quieter than the old street, then!", "We moved out to a village.", Role.ASSISTANT, Role.USER, True),
        ("I'm so sorry. Losing a pet is awful.", "Our old cat died on Sunday.", Role.ASSISTANT, Role.USER, True),
        ("Safe travels, Prof. Lindqvist.", "off to the airport", Role.ASSISTANT, Role.USER, True),
        ("Sounds fun!", "Spent the day at the lake.", Role.ASSISTANT, Role.USER, True),
        ("What a leap!", "I quit my job to sail round the world.", Role.ASSISTANT, Role.USER, True),
        ("Happy to help. Which bills come out monthly?", "help me budget", Role.ASSISTANT, Role.USER, True),
        # Wishes, whatever they name; a one-word judgement of news; a kind named in the plural.
        ("Have a wonderful holiday!", "We fly to Crete on Friday.", Role.ASSISTANT, Role.USER, True),
        ("Enjoy the Bruins game!", "got tickets for tonight", Role.ASSISTANT, Role.USER, True),
        ("Smart.", "I'll book the earlier train then.", Role.ASSISTANT, Role.USER, True),
        ("Toddlers are like that!", "she bites everything", Role.ASSISTANT, Role.USER, True),
        ("cheers mate", "About £40 for the part.", Role.USER, Role.ASSISTANT, True),
        ("Have the best weekend!", "off camping", Role.ASSISTANT, Role.USER, True),
        ("Lovely, I hope the recital goes well!", "she plays on Friday", Role.ASSISTANT, Role.USER, True),
        ("Of course. Let me know how it turns out.", "ok thanks", Role.ASSISTANT, Role.USER, True),
        ("¡De nada!", "gracias", Role.ASSISTANT, Role.USER, True),
        ("What a thoughtful gift.", "got her a telescope", Role.ASSISTANT, Role.USER, True),
        # The user taking up what the assistant said: one word, what they do with it, a stretched
        # or unapostrophed reaction, the answer to an offer.
        ("sold", "The wool ones are warmer and cost less.", Role.USER, Role.ASSISTANT, True),
        ("ok booking it", "The 9:40 ferry is the quietest one.", Role.USER, Role.ASSISTANT, True),
        ("Great. I'll report back tomorrow.", "Bake it for 25 minutes.", Role.USER, Role.ASSISTANT, True),
        ("lmaooo thats so good", "Call it the Bean Counter Cup.", Role.USER, Role.ASSISTANT, True),
        ("nah im good", "Want me to write the rest?", Role.USER, Role.ASSISTANT, True),
        ("worked!!", 'Send "Is the flat still free?" and sign it.', Role.USER, Role.ASSISTANT, True),
        # A judgement of what the assistant told; its own exclamation opening on a common noun.
        (
            "ok thats actually not bad",
            "That leaves about $840 a month of buffer after the rent.",
            Role.USER,
            Role.ASSISTANT,
            True,
        ),
        (
            "sick ty",
            "The river trail is flat, shaded and about four miles long.",
            Role.USER,
            Role.ASSISTANT,
            True,
        ),
        (
            "cheaper than i thought",
            "At 33 mpg the round trip is about 21 gallons, so $70 in fuel.",
            Role.USER,
            Role.ASSISTANT,
            True,
        ),
        ("Soccer mom hacks!", "lifesaver", Role.ASSISTANT, Role.USER, True),
        # A judgement of a thing the assistant named, in its words, is no choice of it.
        (
            "cinnamon sticks is wild but ok",
            "Sunflower seeds, carrot sticks or even cinnamon sticks to chew on.",
            Role.USER,
            Role.ASSISTANT,
            True,
        ),
        ("the glove thing is genius", "Keep thin gloves in the glove box.", Role.USER, Role.ASSISTANT, True),
        # Reactions and thanks as English is spoken around the world; a statement beside one states.
        ("eish, ok thanks", "Soak it in cold water before you wash it.", Role.USER, Role.ASSISTANT, True),
        ("wah shiok", "Try the laksa at the hawker centre near the MRT.", Role.USER, Role.ASSISTANT, True),
        ("arre yaar ok", "Book the Tatkal ticket at 10am sharp.", Role.USER, Role.ASSISTANT, True),
        ("och aye thanks", "The bus leaves from Buchanan Street.", Role.USER, Role.ASSISTANT, True),
        ("sige po salamat", "Bring your ID and the receipt.", Role.USER, Role.ASSISTANT, True),
        ("no wahala, thank you ma", "Soak the beans overnight.", Role.USER, Role.ASSISTANT, True),
        ("thik hai, thanks a ton", "Take the metro to Rajiv Chowk.", Role.USER, Role.ASSISTANT, True),
        ("asante sana", "The matatu stage is by the market.", Role.USER, Role.ASSISTANT, True),
        ("terima kasih!", "The LRT runs every 5 minutes at peak.", Role.USER, Role.ASSISTANT, True),
        ("merci beaucoup", "Take the 38 bus from the station.", Role.USER, Role.ASSISTANT, True),
        ("Okay, I will do the needful", "Renew the licence online before the 15th.", Role.USER, Role.ASSISTANT, True),
        ("Thanks a lot bhai", "Book the Tatkal ticket at 10am sharp.", Role.USER, Role.ASSISTANT, True),
        # Thanks run long and say nothing else; beside the user's own news they state it.
        (
            "Thank you so much for your patience, it was really very helpful",
            "Soak the beans overnight in cold water, then cook them for 40 minutes on a low flame.",
            Role.USER,
            Role.ASSISTANT,
            True,
        ),
        (
            "thanks so much, my mum will be thrilled with this recipe",
            "Soak the beans overnight in cold water, then cook them for 40 minutes on a low flame.",
            Role.USER,
            Role.ASSISTANT,
            False,
        ),
        ("ok thank you, God bless", "Drink plenty of water today.", Role.USER, Role.ASSISTANT, True),
        # "my goodness", "oh my god": exclamations, as "wow" is.
        ("Oh my goodness, congratulations!!", "SAM PROPOSED!!! on the beach", Role.ASSISTANT, Role.USER, True),
        ("oh my god I love that show", "Try Derry Girls.", Role.USER, Role.ASSISTANT, False),
        ("Inshallah it goes well!", "the interview is tomorrow", Role.ASSISTANT, Role.USER, True),
        ("Eid Mubarak!", "off to my parents' for Eid", Role.ASSISTANT, Role.USER, True),
        ("Have a blessed Sunday!", "thanks, it worked", Role.ASSISTANT, Role.USER, True),
        ("blessed with twins last week", "How is the family?", Role.USER, Role.ASSISTANT, False),
        ("ja, I live in Durban now", "Is the weather nice there?", Role.USER, Role.ASSISTANT, False),
        ("my kids are wild", "The park by the river has a splash pad for kids.", Role.USER, Role.ASSISTANT, False),
        ("omg the photo idea", "You could make her teachers a photo book.", Role.USER, Role.ASSISTANT, True),
        ("vovó, got it. thanks", "Grandma is vovó in Portuguese.", Role.USER, Role.ASSISTANT, True),
        ("ooh the blue one", "The blue one or the red one both fit.", Role.USER, Role.ASSISTANT, False),
        # Saying a clause of the assistant's back agrees with it; its numbers are not news.
        (
            "lol he def thinks he wins",
            "He barks, the mailman leaves. He thinks he wins.",
            Role.USER,
            Role.ASSISTANT,
            True,
        ),
        ("lol yeah not cooking at 4am", "Prep oats so you're not cooking at 4am.", Role.USER, Role.ASSISTANT, True),
        ("10, got it", "Rest it for 10 minutes.", Role.USER, Role.ASSISTANT, True),
        ("ok 10 it is", "Rest it for 10 or 15 minutes.", Role.USER, Role.ASSISTANT, False),
        ("yeah moving on the 3rd", "Moving is stressful, plan ahead.", Role.USER, Role.ASSISTANT, False),
        ("lmao the apron", "An apron, a mug or Knicks seats.", Role.USER, Role.ASSISTANT, False),
        ("spin class is at 6 now", "A spin class is good cardio.", Role.USER, Role.ASSISTANT, False),
        # Wishes and cheers, after words of reaction too, and whatever is said beside them decides.
        ("My pleasure, enjoy the planting!", "lovely, thank you dear", Role.ASSISTANT, Role.USER, True),
        ("That sounds lovely, have a great time!", "escape room it is", Role.ASSISTANT, Role.USER, True),
        ("Have a spooky fun time!", "carving pumpkins tonight", Role.ASSISTANT, Role.USER, True),
        ("Go Brewers!", "perfect", Role.ASSISTANT, Role.USER, True),
        ("Give Biscuit a scratch from me!", "thanks!", Role.ASSISTANT, Role.USER, True),
        ("Say hi to your mum!", "she's visiting", Role.ASSISTANT, Role.USER, True),
        ("Give him a pat when he gets back.", "he gets anxious", Role.ASSISTANT, Role.USER, False),
        ("You got it! Congrats on Clearpath, hope it takes off.", "perfect, thx man", Role.ASSISTANT, Role.USER, True),
        ("Ha, she's going to love it. Happy birthday to her!", "thx", Role.ASSISTANT, Role.USER, True),
        ("Congrats! I just adopted a puppy too.", "We got a beagle.", Role.USER, Role.USER, False),
        ("Go left at the lights.", "how do I get to the pool", Role.ASSISTANT, Role.USER, False),
        # What the user calls the assistant is nothing of the user's.
        ("thank you love, you're a treasure", "Register with a practice near you.", Role.USER, Role.ASSISTANT, True),
        ("thanks hen", "A proper Scottish classic.", Role.USER, Role.ASSISTANT, True),
        ("you're right, I moved last month", "Is that still your address?", Role.USER, Role.ASSISTANT, False),
        # ... but picking from it, a word of the user's own, or a thing named states something.
        ("malbec", "A rioja, a malbec or a pinot would all work.", Role.USER, Role.ASSISTANT, False),
        ("im vegan tho", "A cheese board is an easy starter.", Role.USER, Role.ASSISTANT, False),
        ("and a chair that helps", "Stretch every hour.", Role.USER, Role.ASSISTANT, False),
        ("feeling better already", "Rest and fluids help most.", Role.USER, Role.ASSISTANT, False),
        (
            "she's tiny and fearless",
            "Congratulations on the new puppy, what a lovely surprise!",
            Role.USER,
            Role.ASSISTANT,
            False,
        ),
        ("yes please", "Shall I list a few?", Role.USER, Role.ASSISTANT, True),
        ("Have a look at the Brompton.", "need a folding bike", Role.ASSISTANT, Role.USER, False),
        ("Lisbon.", "Where should I go in March?", Role.ASSISTANT, Role.USER, False),
        # Answers, however short, state something.
        ("Luna and Oliver!", "What are your pets called?", Role.USER, Role.USER, False),
        ("Tuesdays at 7.", "When is the class?", Role.USER, Role.ASSISTANT, False),
        ("Nope!", "Are you still vegetarian?", Role.USER, Role.ASSISTANT, False),
        ("pinot noir it is", "Pinot noir or a Beaujolais would both work.", Role.USER, Role.ASSISTANT, False),
        ("What's a good soup for autumn", "Sure.", Role.USER, Role.ASSISTANT, False),
        ("I love hiking in the hills.", "Nice weather today.", Role.USER, Role.USER, False),
        # What the assistant was asked for, advice or a name is no remark.
        ("Mostly rain in the hills.", "what's the weather like up north", Role.ASSISTANT, Role.USER, False),
        ("Good choice; water them weekly.", "got a fern", Role.ASSISTANT, Role.USER, False),
        ("The Hobbit is a gentle start.", "my son wants to read fantasy", Role.ASSISTANT, Role.USER, False),
        ("Is that the 2019 Corolla?", "my car is making a noise", Role.ASSISTANT, Role.USER, False),
        ("Seven years is a long time!", "We've been together 7 years.", Role.ASSISTANT, Role.USER, False),
        # How someone will feel about what the assistant gave is a reaction.
        (
            "thank you, she'll be so pleased",
            "To whom it may concern: Josie is reliable.",
            Role.USER,
            Role.ASSISTANT,
            True,
        ),
        ("she'll be home at 6", "When is Josie back?", Role.USER, Role.ASSISTANT, False),
    ],
)
def test_acknowledgements_are_told_from_turns_that_state_something(
    text: str, answered: str, role: Role, answered_role: Role, reacts: bool
) -> None:
    assert is_acknowledgement(text, answered, "", None, role, answered_role) is reacts


@pytest.mark.parametrize(
    ("text", "changes"),
    [
        ("We moved to Manchester last weekend!", True),
        ("I don't eat meat anymore.", True),
        ("I've switched to matcha in the mornings.", True),
        ("My sister just moved to Denver.", False),
        ("I went for an evening run for once.", False),
        ("If I ever move to Rome I would learn Italian.", False),
        ("Back when I lived in Oslo I swam every morning.", False),
        ("We also adopted a kitten.", False),
        ("Where should I move next?", False),
        ("Dev went paleo, so dinners are meat-heavy, but I'm not changing my diet.", False),
        ("We haven't moved, still in the same flat.", False),
        ("I sold my old Golf and got a little electric Fiat.", True),
        ("The dosage got too high so I'm on a lower one now.", True),
        ("i fully ditched coffee, making matcha every morning", True),
        # Its subject left out, a clause that says what the writer no longer does.
        ("not riding to work these days, just taking the 14 bus since the theft", True),
        ("no longer eating meat, it just stopped appealing", True),
        # ... or saying how long it has been without the thing.
        ("what helps w cravings. 3 weeks today without the vape and nights are the worst", True),
        ("two months off sugar and feeling great", True),
        # ... or what it has been doing, where it words a change; "going to" a place is no plan,
        # nor is a time a clause's end.
        ("been going to the 6:30pm classes instead of the crack of dawn ones", True),
        ("been going to the gym a lot", False),
        ("I fly out a week today", False),
        ("Yes please, something cheerful but not showing off.", False),
        ("I swapped the gym for a climbing wall", True),
        # A statement before the question it ends on still states; a question is asked.
        ("I started running in the mornings, is that bad for my knees?", True),
        ("Should I switch to running in the mornings?", False),
        ("The rent on our flat went up to 1,200 in May, but do we have to pay it from this month?", True),
        # Put on a new shift, plan or dose by somebody else; not something put somewhere.
        ("they put our whole crew on 4 tens, mon-thur 5am to 3:30", True),
        ("they put it in the fridge overnight", False),
        # A role given them is a change; a thing made for them or a feeling is not.
        ("good news, they made me shift supervisor! any tips for counting a till fast", True),
        ("I was made store manager last week so the whole rota's on me", True),
        ("she made me a cake for my birthday", False),
        ("I was made aware of the policy", False),
        # A day or a month left over from a list is no subject of its own.
        ("news: the company's gone hybrid, I'm in the office Tuesdays and Thursdays now.", True),
        ("I swim on Mondays and Noor swims on Sundays now", False),
        # Measured against the one it replaced.
        ("The RAV4 handles the hills up to our place much better than the old Honda did", True),
        ("my previous landlord never fixed anything", True),
        # What holds from now over a span to come; an emoji ends a sentence, so the question typed
        # after it asks ("going up my nose") and states nothing.
        ("pt says swimming is best for my acl rehab, no soccer for me the rest of the year 😑 how do i swim", True),
        ("back from the honeymoon and now i gotta do the last name change 😩 whats first, ssn or dmv?", True),
        ("my goggles fog up 😩 how do i keep water from going up my nose", False),
    ],
)
def test_a_change_of_the_speakers_is_told_from_what_only_looks_like_one(text: str, changes: bool) -> None:
    assert states_a_change(text) is changes


@pytest.mark.parametrize(
    ("text", "question", "holds"),
    [
        ("We moved to Manchester last weekend!", "Where do I live?", True),
        ("My sister just moved to Denver!", "Where do I live?", False),
        ("Noor swims Sunday mornings at 9 now", "When is Noor's swim class?", True),
        ("I went for an evening run for once, so hard", "When do I usually run?", False),
        ("Back when I lived in Oslo I swam every morning", "Which city do I live in?", False),
        ("Tom got a new job at Google", "Where do I work?", False),
        # A request holds its own clause; a condition its whole sentence.
        ("need shoe advice, I boulder twice a week now", "What do I do for fun?", True),
        ("If we move to York, the commute is shorter", "How long is my commute?", False),
        # ... but "if" after a verb of asking opens a question.
        ("The RAV4 climbs better than the old Honda, I'm wondering if I need new tyres", "What do I drive?", True),
        # A clause that opens with its verb is about whoever the clause before is about.
        ("my grandson took up the cello and practises at mine on Sundays", "What do I play?", False),
        ("my grandson took up the cello, I still play the piano", "What do I play?", True),
        ("Nursery wrote: fees go up to £900 from May", "How much is nursery?", True),
        # A stay or a loan that ends is no new home or car.
        ("in Leeds all week for a course, the hotel is by the station", "Where do I live?", False),
        ("borrowing my neighbour's van to shift the sofa", "What do I drive?", False),
        # "may" the month, written in lower case, is no "may" of what might be.
        ("i fully ditched coffee in may so im making matcha every morning", "What do I drink?", True),
        ("I may switch to tea", "What do I drink?", False),
        # "today" after the time that ran up to it counts, no one-off.
        ("3 weeks today without the vape", "Do I vape?", True),
        ("had a cigarette today, first in ages", "Do I smoke?", False),
        # An occasion ("yesterday") is a one-off unless what happened lasts: acquired, or a change.
        ("picked up a used 2020 rav4 yesterday!! how often do i change the oil", "What do I drive?", True),
        ("quit my job today, so done with retail", "Where do I work?", True),
        ("drove my brother's truck yesterday, so big", "What do I drive?", False),
        ("my insurance renewed at 171 a month and i didnt even get a ticket??", "What do I pay for insurance?", True),
        ("is 171 a month normal for insurance?", "What do I pay for insurance?", False),
        # Options looked at are not had; a relative clause, a question typed without its mark, a
        # word that opens the sentence or a place in a list states nothing of the speaker's.
        ("Anyway, now I'm looking at a couple of flats in Chorlton and Didsbury", "Where do I live?", False),
        ("flat hunting in Leeds now", "Where do I live?", False),
        ("my sister moved to Leeds, which is better for a girl on a budget", "Where do I live?", False),
        ("my sister moved to Denver, whats a good gift i can ship her", "Where do I live?", False),
        ("my friend got divorced, Tom's been great about it", "Who is my husband?", False),
        ("I moved to Leeds, which is cheaper", "Where do I live?", True),
        # ... and after not knowing ("idk if"), as after a verb of asking.
        ("chip keeps sitting on the cool side and idk if his heat mat even works", "What pet do I have?", True),
        # A modal in a relative clause conditions that clause, not the sentence.
        (
            "new job starts at 6am so I'm going to bed at half nine now, which me from a year ago would find hilarious",
            "When do I go to bed?",
            True,
        ),
        ("I'd go to bed at half nine now, if the baby let me", "When do I go to bed?", False),
        # "this time" after "again" names the newest value, not an occasion.
        ("changed majors AGAIN lol, public health this time.", "What do I study?", True),
        ("I'm driving this time", "What do I drive?", False),
    ],
)
def test_what_can_hold_now_depends_on_whom_the_question_asks_about(text: str, question: str, holds: bool) -> None:
    assert replaces_what_held(text, question) is holds


@pytest.mark.parametrize(
    ("old", "new", "attribute"),
    [
        ("My rent is $1,700 a month", "My rent is $1,950.", "amount of rent"),
        ("Gym's £30 a month, off-peak.", "My gym is £38 now.", "amount of gym"),
        ("Our mortgage is $1,200.", "my mortgage went up to $1,350", "amount of mortgage"),
        ("Call me Sam.", "My colleagues call me Samuel, so you can go with that.", "instruction: form of address"),
        ("I drink coffee every morning", "I don't drink coffee anymore", "habit drink"),
        ("I drink coffee every morning", "I switched to matcha, I drink matcha now", "habit drink"),
        ("I smoke about ten a day", "I quit smoking six weeks ago", "given up"),
        ("I work at Acme", "I'm no longer with Acme", "given up"),
        ("My piano lesson is on Tuesdays", "my lesson is on Thursdays now", "time of lesson"),
        ("I earn 52k", "they bumped me to 58k!", "amount of pay"),
        ("I pay Spectrum $55 a month for internet", "They put me on a new plan at $65/month.", "amount per month"),
        ("Our mortgage is £890 a month", "I did the remortgage. It's £1,040 a month now.", "amount per month"),
        ("I'm engaged to Arjun!", "My husband Arjun is useless at thank-you cards", "marital status"),
        ("I'm engaged to Arjun!", "My ex-wife called about the kids", None),
        ("Please always answer in German.", "English is fine again.", "instruction: language"),
        ("No emojis please.", "Please use emojis, I like them!", "instruction: emoji"),
        # Additions, and several values that hold at once, are no change.
        ("I drink coffee every morning", "I also drink tea", None),
        ("I play football on Sundays", "I play tennis too", None),
        ("I drink coffee every morning", "I drink coffee with oat milk now", None),
        ("Never suggest restaurants with loud music.", "Always give me the source.", None),
        ("It's 5 miles to the station.", "That's 20 minutes on foot.", None),
        ("Internet runs me $55 a month", "Storage runs me $60 a year", None),
        ("Internet is $55 a month", "Their new plan is $65 a month", None),  # nobody's said to pay it
    ],
)
def test_slot_claims_find_a_new_value_of_the_same_thing(old: str, new: str, attribute: str | None) -> None:
    found = find_conflict(extract_claims(old), extract_claims(new))
    assert (found.attribute if found else None) == attribute


@pytest.mark.parametrize(
    ("sentence", "aspect", "value"),
    [
        ("Please always answer in German.", "language", "german"),
        ("English is fine again.", "language", "english"),
        ("Call me Sam.", "form of address", "sam"),
        ("No emojis please.", "emoji", "emoji"),
        ("Keep it short.", "length", "short"),
        ("I prefer short answers", "length", "short"),
        ("Use metric units please.", "units", "metric"),
        ("Never suggest restaurants with loud music.", "standing rule", "never suggest restaurants with loud music."),
        ("Please address me as Prof. Ruiz.", "form of address", "prof. ruiz"),
        ("one more thing: always reply in French", "language", "french"),
        ("everyone calls me Bea, so you can go with that", "form of address", "bea"),
        ("we moved back to Ohio, so pounds and ounces are fine", "units", "imperial"),
    ],
)
def test_instructions_name_the_aspect_of_conduct_they_set(sentence: str, aspect: str, value: str) -> None:
    found = instruction_of(sentence)
    assert found is not None and (found.aspect, found.value) == (aspect, value)


@pytest.mark.parametrize(
    "sentence",
    [
        "Don't forget to buy milk.",
        "From now on, I'm vegan.",
        "I'm learning German.",
        "My German is better now.",
        "Tuesday is fine.",
        "The kids call me Mum.",
    ],
)
def test_what_is_not_said_to_the_assistant_about_its_conduct_is_no_instruction(sentence: str) -> None:
    assert instruction_of(sentence) is None


@pytest.mark.parametrize(
    ("content", "role", "kind"),
    [
        ("I prefer window seats", Role.USER, MemoryKind.PREFERENCE),
        ("I kinda like jazz", Role.USER, MemoryKind.PREFERENCE),
        ("Mom loves roses", Role.USER, MemoryKind.PREFERENCE),
        ("I decided to sell my car", Role.USER, MemoryKind.DECISION),
        ("I will call mom on Sunday", Role.USER, MemoryKind.COMMITMENT),
        ("Answer in German please", Role.USER, MemoryKind.INSTRUCTION),
        ("You should try magnesium before bed.", Role.ASSISTANT, MemoryKind.RECOMMENDATION),
        ("Allergic to penicillin.", Role.USER, MemoryKind.FACT),
        ("dentist tues 3pm", Role.USER, MemoryKind.FACT),
    ],
)
def test_a_memory_written_without_a_kind_gets_the_kind_its_words_state(
    content: str, role: Role, kind: MemoryKind
) -> None:
    assert kind_of(content, role) is kind


@pytest.mark.parametrize(
    ("sentence", "told"),
    [
        ("I only drink green tea now", "Ann only drinks green tea now"),
        ("I kinda like jazz", "Ann kinda likes jazz"),
        ("I quit coffee last week", "Ann quit coffee last week"),
        ("I don't eat meat anymore", "Ann doesn't eat meat anymore"),
        ("I still drink coffee", "Ann still drinks coffee"),
        ("I can't stand olives", "Ann can't stand olives"),
        ("I usually go running", "Ann usually goes running"),
        ("I have two cats", "Ann has two cats"),
    ],
)
def test_third_person_keeps_adverbs_and_tense(sentence: str, told: str) -> None:
    assert as_said_by(sentence, "Ann") == told


@pytest.mark.parametrize(
    ("question", "past", "present"),
    [
        ("Where do I live?", False, True),
        ("What's my rent these days?", False, True),
        ("What is Jon currently reading?", False, True),
        ("Where did I live before I moved?", True, False),
        ("What did I use to drink?", True, False),
        ("When did I move to Denver?", False, False),
        ("What is Caroline's relationship status?", False, False),
        ("How old am I?", False, True),
        ("What music helps me concentrate?", False, True),
        ("What music helped me concentrate?", False, False),
        ("Who cuts my hair?", False, True),
        ("What is Jake to Brianna at this point?", False, True),
        ("Where is Omar working at the minute?", False, True),
    ],
)
def test_questions_about_the_present_and_the_past(question: str, past: bool, present: bool) -> None:
    assert (asks_about_the_past(question), asks_about_the_present(question)) == (past, present)


def ranked(content: str, score: float, kind: MemoryKind = MemoryKind.FACT) -> RankedMemory:
    return RankedMemory(Memory(content[:8], NS, content, kind=kind), score, ScoreBreakdown())


def test_each_block_has_its_share_and_lower_scored_memories_go_before_a_higher_one_is_cut() -> None:
    instructions = [Memory("i1", NS, "Please always answer in German.", kind=MemoryKind.INSTRUCTION)]
    places = ["Louvre", "Prado", "Uffizi", "Rijksmuseum", "Tate", "Hermitage", "Belvedere", "Orsay"]
    memories = [
        ranked(f"Visit {n}: the {p} was quiet and its cafe served {p} cake.", 1 - n / 10) for n, p in enumerate(places)
    ]
    recent = [Turn(Role.USER, "Which museum was it again? " * 3)]
    composed = compose_context(memories, 120, instructions=instructions, recent=recent)
    blocks = composed.text.split("\n\n")
    assert [b.splitlines()[0] for b in blocks] == [CONTRACT_HEADER, HEADER, RECENT_HEADER]
    assert "answer in German" in blocks[0]
    kept = blocks[1].splitlines()[1:]
    # Whole memories, best first: the lower-scored ones were left out, none was cut short.
    assert kept and all(line.endswith("cake.") for line in kept)
    assert [line.split("Visit ")[1][0] for line in kept] == [str(n) for n in range(len(kept))]
    assert composed.left_out == len(memories) - len(kept)
    assert len(composed.text.split()) * 1.3 <= 130
    # A block with less to say leaves its share to the others.
    alone = compose_context(memories, 120)
    assert len(alone.text.splitlines()) > len(blocks[1].splitlines())
    # The contract comes whatever the query: even with no memories at all.
    assert compose_context([], 120, instructions=instructions).text.startswith(CONTRACT_HEADER)


@pytest.mark.parametrize(
    ("text", "past"),
    [
        ("back when we rented in Porto I cycled to work daily. any bike shops near here?", True),
        ("I used to paint a lot. Anyway, what's a good easel?", True),
        ("I paint most weekends.", False),
    ],
)
def test_what_is_told_as_the_past_whatever_question_follows(text: str, past: bool) -> None:
    assert tells_the_past(text) is past


@pytest.mark.parametrize(
    ("text", "question", "theirs"),
    [
        ("my sister just moved to denver for a nursing job", "What city do I live in?", True),
        ("she just moved to Leeds", "Where do I live?", True),
        # ... unless the question asks about them, or the speaker's own change is told beside it.
        ("my sister just moved to denver for a nursing job", "Where does my sister live?", False),
        ("my sister moved to Leeds and I moved in with her", "Where do I live?", False),
        ("my fiancé jake wants a taco truck instead of a plated dinner", "What is Jake to me now?", False),
        ("my fiancé jake wants a taco truck instead of a plated dinner", "What do I want to eat?", True),
        # Something of the speaker's changed by someone else is the speaker's change.
        ("they raised my rent to 1,450", "What is my rent?", False),
        ("my sister loves Denver", "What city do I live in?", False),
    ],
)
def test_someone_elses_change_answers_nothing_of_the_speakers_present(text: str, question: str, theirs: bool) -> None:
    assert tells_anothers_change(text, question) is theirs


@pytest.mark.parametrize(
    ("text", "one_off"),
    [
        ("borrowing my brother's tesla for the weekend, how does supercharging work?", True),
        ("in miami all week for a conference, my hotel is in brickell", True),
        # An occasion alone is no one-off that runs its course: what it reports holds till the next.
        ("Weighed in this morning at 79.2, so the plan's working!", False),
        ("I drive a 2016 Tacoma", False),
    ],
)
def test_what_is_worded_as_a_one_off(text: str, one_off: bool) -> None:
    assert tells_a_one_off(text) is one_off


def test_answers_compete_only_across_conversations_and_when_about_the_same_thing() -> None:
    def said(id_: str, session: str, at: float) -> RankedMemory:
        memory = Memory(id_, NS, id_, role=Role.USER, session_id=session, created_at=at, speaker_name="Kit")
        return RankedMemory(memory, 0.5, ScoreBreakdown())

    old, news, chat, aside = (
        said("old", "s1", 1.0),
        said("news", "s2", 9.0),
        said("chat", "s2", 9.5),
        said("aside", "s3", 20.0),
    )
    vectors = {
        "old": np.array([1.0, 0.0, 0.0], dtype=np.float32),
        "news": np.array([0.8, 0.6, 0.0], dtype=np.float32),  # cosine 0.8 with "old"
        "chat": np.array([0.0, 1.0, 0.0], dtype=np.float32),  # its own session's "news" is one time
        "aside": np.array([0.1, 0.0, 1.0], dtype=np.float32),  # cosine 0.1: about something else
    }
    truth = CurrentTruth(index=None)  # type: ignore[arg-type]  # _competing reads no index
    assert truth._competing([old, news, chat, aside], vectors) == {"old", "news"}


def test_a_newer_remark_that_answers_far_less_well_does_not_compete_on_date() -> None:
    def said(id_: str, session: str, at: float, relevance: float) -> RankedMemory:
        memory = Memory(id_, NS, id_, role=Role.USER, session_id=session, created_at=at, speaker_name="Jon")
        return RankedMemory(memory, 0.5, ScoreBreakdown(relevance=relevance))

    vectors = {"answer": np.array([1.0, 0.0], dtype=np.float32), "later": np.array([0.8, 0.6], dtype=np.float32)}
    truth = CurrentTruth(index=None)  # type: ignore[arg-type]  # _competing reads no index
    # "I'm currently reading The Lean Startup" and, weeks later, a remark on marketing tips.
    answer, later = said("answer", "s1", 1.0, 0.9), said("later", "s2", 9.0, 0.3)
    assert truth._competing([answer, later], vectors) == set()
    # A newer statement that leaves the subject unsaid still answers alike.
    assert truth._competing([answer, said("later", "s2", 9.0, 0.4)], vectors) == {"answer", "later"}


def test_a_newer_summary_answers_as_well_as_the_change_it_quotes() -> None:
    def said(id_: str, at: float, relevance: float, content: str, **extra: object) -> RankedMemory:
        memory = Memory(id_, NS, content, role=Role.USER, session_id=id_, created_at=at, speaker_name="Ravi", **extra)  # type: ignore[arg-type]
        return RankedMemory(memory, 0.5, ScoreBreakdown(relevance=relevance))

    old = said("old", 1.0, 0.8, "I'm on the early shift, 5am starts.")
    # The newer session's summary quotes a request and the change: its vector averages both.
    summary = said(
        "summary",
        9.0,
        0.2,
        "Conversation s2 on 9 May 2025 between Ravi and assistant:\n"
        "Ravi: can you give me an easy slow cooker recipe\n"
        "Ravi: they moved me to the late shift from this week, 2pm till 10pm",
        kind=MemoryKind.SUMMARY,
        source_ids=("request", "change"),
    )
    change = said("change", 8.9, 0.7, "they moved me to the late shift from this week, 2pm till 10pm")
    # About the same thing, but not so close that it answers as the older does (cosine 0.3).
    vectors = {"old": np.array([1.0, 0.0], dtype=np.float32), "summary": np.array([0.3, 0.954], dtype=np.float32)}
    truth = CurrentTruth(index=None)  # type: ignore[arg-type]  # _replacements reads no index
    holds = {"old": True, "summary": True}
    speakers = frozenset({"Ravi"})
    pairs = truth._replacements([old, summary], vectors, holds, speakers, _as_newer([old, summary], [old, change]))
    assert [(a.memory.id, b.memory.id) for a, b in pairs] == [("old", "summary")]
    # By its own relevance alone, a quarter of the older's, it answers too little to replace it.
    alone = _as_newer([old, summary], [old])
    assert truth._replacements([old, summary], vectors, holds, speakers, alone) == []


@pytest.mark.parametrize(
    ("quotes", "holds"),
    [
        # A request quoted beside a change leaves the change standing.
        (["need help writing an email to my manager about my hours", "I've switched to the bike now"], True),
        # An addition or a one-off quoted beside it is no current state of the user's.
        (["we also got a kitten", "I've switched to the bike now"], False),
        (["went for a run for once", "I've switched to the bike now"], False),
        # Only requests: nothing of the user's to hold.
        (["need help writing an email to my manager"], False),
    ],
)
def test_a_summary_can_hold_now_when_a_quote_can_and_none_tells_another_state(quotes: list[str], holds: bool) -> None:
    heading = "Conversation s2 on 9 May 2025 between Ines and assistant:"
    content = "\n".join([heading, *(f"Ines: {q}" for q in quotes)])
    memory = Memory("summary", NS, content, kind=MemoryKind.SUMMARY, session_id="s2", speaker_name="Ines")
    summary = RankedMemory(memory, 0.5, ScoreBreakdown())
    assert _can_hold(summary, "How does Ines get to work?", frozenset({"Ines"})) is holds


def test_the_quote_through_which_a_replaced_summary_answered_is_replaced_with_it() -> None:
    def said(id_: str, at: float, relevance: float, content: str, **extra: object) -> RankedMemory:
        memory = Memory(id_, NS, content, role=Role.USER, session_id=id_, created_at=at, speaker_name="Frank", **extra)  # type: ignore[arg-type]
        return RankedMemory(memory, 0.5, ScoreBreakdown(relevance=relevance))

    price = said("price", 1.0, 1.0, "I pay Spectrum $55 a month for 300 Mbps internet.")
    aside = said("aside", 1.1, 0.1, "My neighbour says I am overpaying.")
    summary = said("summary", 1.2, 0.9, "...", kind=MemoryKind.SUMMARY, source_ids=("price", "aside"))
    newer = said("newer", 9.0, 0.2, "They put me on $65 a month for a year.")
    pairs = CurrentTruth._quotes_replaced([price, aside, summary, newer], [(summary, newer)])
    assert [(a.memory.id, b.memory.id) for a, b in pairs] == [("price", "newer")]
    # A quote said after the newer statement is not what it replaced.
    assert CurrentTruth._quotes_replaced([price, aside, summary], [(summary, said("newer", 0.5, 0.2, "..."))]) == []


def test_a_summary_whose_best_quote_was_replaced_is_replaced_with_it() -> None:
    def said(id_: str, session: str, at: float, relevance: float, **extra: object) -> RankedMemory:
        memory = Memory(id_, NS, id_, role=Role.USER, session_id=session, created_at=at, speaker_name="Ann", **extra)  # type: ignore[arg-type]
        return RankedMemory(memory, 0.5, ScoreBreakdown(relevance=relevance))

    wet = said("wet food", "s2", 2.0, 0.6)
    aside = said("extremely lol", "s2", 2.1, 0.1)
    summary = said("summary", "s2", 2.2, 0.99, kind=MemoryKind.SUMMARY, source_ids=("wet food", "extremely lol"))
    renal = said("renal diet now", "s4", 9.0, 0.3)
    pairs = CurrentTruth._summaries_replaced([wet, aside, summary, renal], [(wet, renal)])
    assert [(a.memory.id, b.memory.id) for a, b in pairs] == [("summary", "renal diet now")]
    # Not when only a quote it did not answer through was replaced, nor by its own session.
    assert CurrentTruth._summaries_replaced([wet, aside, summary, renal], [(aside, renal)]) == []
    own = said("later that day", "s2", 2.3, 0.3)
    assert CurrentTruth._summaries_replaced([wet, aside, summary, own], [(wet, own)]) == []


def test_a_newer_statement_close_to_the_older_answers_as_much_as_it_is_like_it() -> None:
    def said(id_: str, at: float, relevance: float, content: str) -> RankedMemory:
        memory = Memory(id_, NS, content, role=Role.USER, session_id=id_, created_at=at, speaker_name="Ahmed")
        return RankedMemory(memory, 0.5, ScoreBreakdown(relevance=relevance))

    old = said("old", 1.0, 0.8, "still living at my parents' in Bradford while I save")
    # Said in passing beside a request: it answers "what city am I living in?" far less well.
    new = said("new", 9.0, 0.1, "the commute from my new flat in Leeds is so much shorter. can you scale a biryani")
    holds = {"old": True, "new": True}
    speakers = frozenset({"Ahmed"})
    truth = CurrentTruth(index=None)  # type: ignore[arg-type]  # _replacements reads no index
    close = {"old": np.array([1.0, 0.0], dtype=np.float32), "new": np.array([0.6, 0.8], dtype=np.float32)}
    pairs = truth._replacements([old, new], close, holds, speakers, _as_newer([old, new], [old, new]))
    assert [(a.memory.id, b.memory.id) for a, b in pairs] == [("old", "new")]
    # Barely about the same thing (cosine 0.25), it answers too little to replace it.
    far = {"old": np.array([1.0, 0.0], dtype=np.float32), "new": np.array([0.25, 0.968], dtype=np.float32)}
    assert truth._replacements([old, new], far, holds, speakers, _as_newer([old, new], [old, new])) == []


def test_a_newer_statement_that_calls_the_older_ones_thing_old_replaces_it_however_unlike() -> None:
    def said(id_: str, at: float, relevance: float, content: str) -> RankedMemory:
        memory = Memory(id_, NS, content, role=Role.USER, session_id=id_, created_at=at, speaker_name="Gerald")
        return RankedMemory(memory, 0.5, ScoreBreakdown(relevance=relevance))

    old = said("old", 1.0, 0.3, "My 2011 Honda Civic needs an oil change, can I do it myself?")
    new = said("new", 9.0, 0.05, "The RAV4 takes the hills up to our place better than the old Honda. Snow tyres?")
    holds = {"old": True, "new": True}
    truth = CurrentTruth(index=None)  # type: ignore[arg-type]  # _replacements reads no index
    # Oil changes and snow tyres: the two are far apart in meaning (cosine 0.13).
    unlike = {"old": np.array([1.0, 0.0], dtype=np.float32), "new": np.array([0.13, 0.99], dtype=np.float32)}
    pairs = truth._replacements([old, new], unlike, holds, frozenset({"Gerald"}), _as_newer([old, new], [old, new]))
    assert [(a.memory.id, b.memory.id) for a, b in pairs] == [("old", "new")]
    # What the older does not name is not what the newer calls old.
    civic = said("old", 1.0, 0.3, "My car needs an oil change, can I do it myself?")
    assert truth._replacements([civic, new], unlike, holds, frozenset({"Gerald"}), _as_newer([civic, new], [])) == []


def test_the_assistants_reply_that_says_again_what_was_replaced_is_replaced_with_it() -> None:
    def said(id_: str, session: str, role: Role, content: str) -> RankedMemory:
        memory = Memory(id_, NS, content, role=role, session_id=session, created_at=float(len(session)))
        return RankedMemory(memory, 0.5, ScoreBreakdown(relevance=0.5))

    was = said("was", "s0", Role.USER, "rent is 1,250 for the one-bed")
    now = said("now", "s1-", Role.USER, "they raised it to 1,450 a month")
    echo = said("echo", "s0", Role.ASSISTANT, "With 1,250 rent, maybe save 200 a month.")
    aside = said("aside", "s0", Role.ASSISTANT, "Glad to help!")
    later = said("later", "s1-", Role.ASSISTANT, "That's a big jump: ask them to justify 1,450.")
    unit = {
        "was": np.array([1.0, 0.0], dtype=np.float32),
        "echo": np.array([0.8, 0.6], dtype=np.float32),
        "aside": np.array([0.1, 0.995], dtype=np.float32),
        "later": np.array([0.8, 0.6], dtype=np.float32),
    }
    truth = CurrentTruth(index=None)  # type: ignore[arg-type]  # _echoes reads no index
    pairs = truth._echoes([echo, aside, later], [(was, now)], unit)
    # The reply of the replaced statement's session about the same thing; not an aside, nor a
    # reply of the replacing session.
    assert [(a.memory.id, b.memory.id) for a, b in pairs] == [("echo", "now")]


@pytest.mark.parametrize(
    ("sessions", "asks_what_holds"),
    [
        # The user of an assistant, named: "What does Gloria pay?" is "What do I pay?".
        ({"s1": [("Gloria", Role.USER), ("", Role.ASSISTANT)]}, True),
        # A participant of a two-person chat: the present tense tells their story, even when the
        # namespace also holds someone's chats with an assistant.
        ({"s1": [("Gloria", Role.USER), ("Tom", Role.USER)], "s2": [("Ann", Role.USER), ("", Role.ASSISTANT)]}, False),
    ],
)
def test_a_question_naming_a_speaker_asks_what_holds_when_the_speaker_talks_to_an_assistant(
    sessions: dict[str, list[tuple[str, Role]]], asks_what_holds: bool
) -> None:
    principal = Principal("k", NS.tenant, NS.project, NS.environment, frozenset())
    query = "What does Gloria pay for her flat each month?"
    plan = QueryPlan(principal, NS, query, 10, MemoryFilter(), 0.0, 0.0, "r", True, QueryInput(NS.user_id, query))
    results = [
        RankedMemory(
            Memory(f"{session}-{i}", NS, "said", role=role, session_id=session, speaker_name=name),
            0.5,
            ScoreBreakdown(),
        )
        for session, said in sessions.items()
        for i, (name, role) in enumerate(said)
    ]
    truth = CurrentTruth(index=None)  # type: ignore[arg-type]  # asks_what_holds reads no index
    assert truth.asks_what_holds(plan, results) is asks_what_holds


class _Vectors:
    """The vector index's one read that CurrentTruth.run makes: stored vectors by id."""

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self._vectors = vectors

    async def vectors(self, namespace: Namespace, memory_ids: Sequence[str]) -> dict[str, np.ndarray]:
        return {i: self._vectors[i] for i in memory_ids if i in self._vectors}


def test_a_statement_replaced_in_turn_does_not_join_in_place_of_the_first() -> None:
    """Monday yoga, then Wednesday, then Saturday: asked when the class is, the Wednesday class
    found below the results does not take the Monday class's place; Saturday comes first."""

    def said(id_: str, text: str, at: float, score: float) -> RankedMemory:
        memory = Memory(id_, NS, text, role=Role.USER, session_id=id_, created_at=at, speaker_name="Bea")
        return RankedMemory(memory, score, ScoreBreakdown(relevance=1.0, currency=1.0))

    first = said("monday", "I go to a Monday evening yoga class at the community centre.", 1.0, 0.9)
    second = said("wednesday", "The Monday class got cancelled, so I moved to a Wednesday morning class.", 5e6, 0.2)
    third = said("saturday", "I switched to the Saturday 9am yoga session now.", 9e6, 0.5)
    close = np.array([1.0, 0.0], dtype=np.float32)
    index = _Vectors({"monday": close, "wednesday": close, "saturday": close})
    principal = Principal("k", NS.tenant, NS.project, NS.environment, frozenset())
    query = "When is my yoga class?"
    plan = QueryPlan(principal, NS, query, 10, MemoryFilter(), 0.0, 0.0, "r", True, QueryInput(NS.user_id, query), True)
    truth = CurrentTruth(index=index)  # type: ignore[arg-type]
    out = asyncio.run(truth.run(plan, [first, third], Deadline.after(5.0), later=[second]))
    assert [r.memory.id for r in out] == ["saturday", "monday"]


@pytest.mark.parametrize(
    ("heading", "asks_what_holds"),
    [
        ("Conversation s1 on 4 May 2025 between Omar and assistant:", True),
        ("Conversation s1 on 4 May 2025 between Omar and Tom:", False),
    ],
)
def test_a_summary_tells_that_the_named_speaker_talks_to_an_assistant(heading: str, asks_what_holds: bool) -> None:
    principal = Principal("k", NS.tenant, NS.project, NS.environment, frozenset())
    query = "How does Omar get to his job?"
    plan = QueryPlan(principal, NS, query, 10, MemoryFilter(), 0.0, 0.0, "r", True, QueryInput(NS.user_id, query))
    summary = Memory("s", NS, f"{heading}\nOmar: not riding to work, taking the 14 bus", kind=MemoryKind.SUMMARY)
    turn = Memory("t", NS, "my bike got stolen", role=Role.USER, session_id="s2", speaker_name="Omar")
    results = [RankedMemory(m, 0.5, ScoreBreakdown()) for m in (summary, turn)]
    truth = CurrentTruth(index=None)  # type: ignore[arg-type]  # asks_what_holds reads no index
    assert truth.asks_what_holds(plan, results) is asks_what_holds


def test_a_replaced_statement_scores_below_the_statement_that_replaced_it() -> None:
    """However much better the old statement matched the question, once a newer one that words a
    change replaces it, it scores just below that one, and its currency says so."""

    def said(id_: str, text: str, at: float, score: float, relevance: float) -> RankedMemory:
        memory = Memory(id_, NS, text, role=Role.USER, session_id=id_, created_at=at, speaker_name="Luca")
        return RankedMemory(memory, score, ScoreBreakdown(relevance=relevance, currency=1.0))

    old = said("old", "Anything but horror films for me, I can't watch scary films.", 1.0, 0.9, 1.0)
    new = said("new", "Turns out I love horror films now, I've watched them all month.", 9e6, 0.3, 0.6)
    index = _Vectors({"old": np.array([1.0, 0.0], dtype=np.float32), "new": np.array([0.8, 0.6], dtype=np.float32)})
    principal = Principal("k", NS.tenant, NS.project, NS.environment, frozenset())
    query = "What kind of films do I enjoy?"
    plan = QueryPlan(principal, NS, query, 10, MemoryFilter(), 0.0, 0.0, "r", True, QueryInput(NS.user_id, query), True)
    out = asyncio.run(CurrentTruth(index=index).run(plan, [old, new], Deadline.after(5.0)))  # type: ignore[arg-type]
    assert [r.memory.id for r in out] == ["new", "old"]
    assert out[1].score < out[0].score and out[1].breakdown.currency < 0.5


@pytest.mark.parametrize(("with_assistant", "asks"), [(True, True), (False, False)])
def test_a_present_tense_question_asks_the_users_present_only_in_a_talk_with_an_assistant(
    with_assistant: bool, asks: bool
) -> None:
    principal = Principal("k", NS.tenant, NS.project, NS.environment, frozenset())
    query = "What food is Mila on?"
    plan = QueryPlan(principal, NS, query, 10, MemoryFilter(), 0.0, 0.0, "r", True, QueryInput(NS.user_id, query))
    said = Memory("t", NS, "Mila is on the salmon kibble now.", role=Role.USER, session_id="s", speaker_name="Ann")
    other = Memory(
        "a", NS, "Salmon suits cats well.", session_id="s", role=Role.ASSISTANT if with_assistant else Role.USER
    )
    results = [RankedMemory(m, 0.5, ScoreBreakdown()) for m in (said, other)]
    assert CurrentTruth._asks_the_users_present(plan, results) is asks
    # Either way the newest of its answers comes first (`asks_what_holds`).
    assert CurrentTruth(index=None).asks_what_holds(plan, results)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("told", "said"),
    [
        ("Ahmed wants to start cooking.", "I want to start cooking."),
        ("Nadia is a pharmacist and Nadia has 12 hr shifts.", "I am a pharmacist and I have 12 hr shifts."),
        ("Ahmed no longer eats meat.", "I no longer eat meat."),
        ("Aisha sold Aisha's Civic.", "I sold my Civic."),
        ("She has more patience than Margaret.", "She has more patience than I."),
    ],
)
def test_a_memory_told_of_the_user_is_read_as_they_said_it(told: str, said: str) -> None:
    assert _first_person(told, frozenset({"Ahmed", "Nadia", "Aisha", "Margaret"})) == said
