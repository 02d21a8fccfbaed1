"""Statements that something of the speaker's changed: the offline rules behind "the newest wins".

"We moved to Manchester", "I don't eat meat anymore", "my rent went up to $1,950", "I've
switched to matcha", "my lesson is on Thursdays now": a statement in which the speaker (or a
thing of theirs) is the subject and whose wording says that what held before no longer does.
What only looks like one is told apart by its wording too:

- someone else's news ("my sister moved to Denver", "Tom got a new job"): another subject;
- an addition ("we also got a kitten", "another hobby", "as well"): both hold;
- a one-off ("for once", "tonight", "last night", "this time"): the habit stands;
- a hypothetical or a plan ("if I ever move", "I might switch", "thinking of quitting");
- the past retold ("back when I lived in Oslo", "I used to"): older than what holds now.
"""

from __future__ import annotations

import re

from lemminflect import getAllLemmas

from memsvc.llm.text import sentences

# How long one has been without something ("3 weeks today without the vape", "a year sober").
_TIME_WITHOUT = r"(?:days?|weeks?|months?|years?)\s+(?:(?:today|now|straight|in)\s+)?(?:without|off|clean|sober)"
# Wording that says what held before no longer does.
_CHANGE = re.compile(
    r"\b(?:now|nowadays|these days|any ?more|no longer|not \w+ing|from now on|instead|actually|turns out|"
    # What holds from now over a span to come ("no soccer for me the rest of the year").
    r"the rest of the (?:year|season|summer|winter|spring|fall|autumn)|for the foreseeable(?: future)?|"
    r"until further notice|"
    r"switch(?:ed|ing)?|chang(?:ed|ing)|mov(?:ed|ing)|relocat(?:ed|ing)|transferr?(?:ed|ing)|"
    r"start(?:ed|ing)?|began|quit|gave up|given up|giving up|stopp(?:ed|ing)|dropp(?:ed|ing)|cancell?(?:ed|ing)|"
    r"replac(?:ed|ing)|ditch(?:ed|ing)?|swapp?(?:ed|ing)?|upgrad(?:ed|ing)|downgrad(?:ed|ing)|promot(?:ed|ion)|resign(?:ed|ing)|retir(?:ed|ing)|"
    r"left|broke up|split up|got (?:married|engaged|divorced|a new)|became|become|turned|sold|got rid of|traded in|"
    r"(?:go|goes|going|went|gone) (?:up|down)|rais(?:ed|ing)|increas(?:ed|ing)|decreas(?:ed|ing)|rose|risen|fell|"
    r"bump(?:ed)?|hik(?:ed|ing)|cut|reschedul(?:ed|ing)|pushed|shift(?:ed|ing)|new|"
    # What is measured against the one it replaced ("handles the hills better than the old Honda").
    r"than (?:the|my|our) (?:old|previous|last|former)|(?:the|my|our) (?:previous|former)|"
    rf"{_TIME_WITHOUT})\b",
    re.IGNORECASE,
)
# The speaker, or a thing of the speaker's, is what the sentence is about.
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|we|we're|we've|my|our|me|us)\b", re.IGNORECASE)
# People: a sentence whose subject is one of them is their news, not the speaker's.
_PERSON = (
    r"(?:sister|brother|mom|mum|mother|dad|father|parents?|son|daughter|kids?|child(?:ren)?|wife|husband|"
    r"partner|boyfriend|girlfriend|fianc[eé]e?|friends?|best friend|boss|manager|colleague|coworker|co-worker|"
    r"neighbou?r|roommate|flatmate|cousin|aunt|uncle|niece|nephew|"
    r"grand(?:ma|pa|mother|father|parents|daughter|son|kids?|child(?:ren)?)|"
    r"in-laws?|team ?mate|mate|buddy|pal)"
)
_OTHERS_NEWS = re.compile(
    rf"^(?:\w+\s+){{0,3}}?(?:my|our)\s+(?:\w+\s+)?{_PERSON}(?:'s)?\b(?!'s\s+(?:place|house))|"
    rf"^(?:\w+\s+){{0,2}}?(?:he|she|they|he's|she's|they're|they've)\b",
    re.IGNORECASE,
)
_ADDITION = re.compile(
    # "too" adds at a clause's end ("we got a cat too"), not before what it measures ("too much").
    r"\b(?:also|too(?=\s*(?:[,.;:!?)]|$))|as well|another|a second|second|added|adding|in addition|on top of|plus|"
    r"both|extra)\b",
    re.IGNORECASE,
)
_ONE_OFF = re.compile(
    # "this time" after "again" names the newest of repeated changes ("changed majors again,
    # public health this time"), not an occasion.
    r"^(?![^.!?]*\bagain\b)[^.!?]*\bthis time\b|"
    r"\b(?:for once|just this once|one[- ]off|on a whim|on a dare|for a change|special occasion|once|"
    # A stay or a loan that ends: where one is or what one has for a while is no new home or car.
    r"all (?:week|weekend)|for the (?:week|weekend)|for a (?:few|couple of) (?:days|nights|weeks)|"
    r"for (?:a|the) (?:conference|work trip|business trip|wedding|visit)|on (?:vacation|holiday|a trip|business)|"
    r"borrow(?:ed|ing)|loaner|rental car)\b",
    re.IGNORECASE,
)
# When something happened ("tonight", "yesterday"): an occasion, unless what happened lasts (a
# change worded, something acquired: "picked up a used RAV4 yesterday", "quit today").
_OCCASION = re.compile(
    # "today" after a time that ran up to it is a count ("3 weeks today without the vape").
    r"\b(?:tonight|(?<!days )(?<!weeks )(?<!months )(?<!years )today|this morning|this evening|this afternoon|"
    r"yesterday|last night)\b",
    re.IGNORECASE,
)
_ACQUIRED = re.compile(
    r"\b(?:bought|purchased|picked up|got|adopted|leased|signed)\s+(?:a|an|the|my|our)\b", re.IGNORECASE
)


def _one_off(text: str) -> bool:
    """Whether `text` tells a one-off: in words that say so ("for once", "for the weekend"), or
    an occasion ("tonight") where nothing of it words a change or an acquisition that lasts."""
    if _ONE_OFF.search(text):
        return True
    if not _OCCASION.search(text):
        return False
    return not (_CHANGE.search(_DENIED_CHANGE.sub(" ", text)) or _ACQUIRED.search(text))


# "may" the modal ("I may switch"), not the month people write in lower case too ("ditched coffee
# in may", "since may 3").
_MAY = (
    r"(?<!in )(?<!since )(?<!by )(?<!until )(?<!till )(?<!from )(?<!of )(?<!last )(?<!next )(?<!this )"
    r"(?-i:may)(?!\s*\d)"
)
_HYPOTHETICAL = re.compile(
    rf"\b(?:if|would|might|could|{_MAY}|maybe|perhaps|thinking (?:of|about)|considering|planning|plan to|hope|"
    # "going to" a place is no plan ("been going to the 6:30pm classes").
    r"hoping|wish|someday|one day|dream|going to(?! (?:the|a|an|my|our|his|her|their|bed|work|school|class)\b)|"
    r"gonna|want to|wanna|should I|will|I'll|we'll|need|needs|"
    # Searching among options is not having one ("now I'm looking at a couple of flats").
    r"looking (?:for|at|into)|shopping (?:for|around)|browsing|hunting for|(?:house|flat|apartment|job)[- ]hunting)\b",
    re.IGNORECASE,
)
# What makes a whole sentence hypothetical, not only its clause.
# "if" after a verb of asking or knowing opens a question ("wondering if I need new tyres", "idk if
# his heat mat even works"), no condition.
_CONDITIONAL = re.compile(
    r"\b(?:(?<!wondering )(?<!wonder )(?<!know )(?<!sure )(?<!see )(?<!ask )(?<!asking )(?<!check )"
    r"(?<!idk )(?<!dunno )(?<!idea )(?<!curious )(?<!unsure )if|"
    rf"unless|would|might|could|{_MAY}|maybe|perhaps|someday|one day|thinking (?:of|about)|considering|"
    r"planning|plan to|hope|hoping|wish|dream)\b",
    re.IGNORECASE,
)
_PAST_RETOLD = re.compile(
    r"\b(?:back when|used to|years ago|when I was|as a kid|growing up|in my (?:teens|twenties|thirties)|"
    r"back in (?:the day|\d{4})|at the time|previously|originally)\b",
    re.IGNORECASE,
)


# Where a sentence's clauses part: each is judged on its own ("That's going to be my life now,
# I was made store manager last week": the plan in the first does not undo the second); not
# inside a time ("6:30pm").
_CLAUSE_BREAK = re.compile(
    r"\s*(?:[,;()\u2013\u2014]|:(?!\d)|\s-\s|\b(?:and|but|so|because|though|although|while)\b)\s*", re.IGNORECASE
)
# A clause with a subject of its own that is not the speaker ("Noor swims at 9 now").
_THIRD_PERSON_SUBJECT = re.compile(r"^(?:the\s+\w+|[A-Z][a-z]+|he|she|they|it|this|that|there)\b")
# A clause about someone of the speaker's, or someone named: whose news it is.
_PERSON_SUBJECT = re.compile(
    rf"^(?:\w+\s+){{0,3}}?(?i:my|our)\s+(?:\w+\s+)?(?P<person>(?i:{_PERSON}))(?:'s)?\b|"
    r"^(?:\w+\s+)?(?P<pronoun>(?i:he|she|they|he's|she's|they're|they've))\b|"
    r"^(?P<name>[A-Z][a-z]+)(?:['\u2019]s)?\s+(?!is\b)",
)


# Something of the speaker's changed by someone else: "they raised it to £38", "she moved my
# lesson to Thursday", "the landlord put up the rent", "they put our crew on four tens"; or a
# role given them: "they made me shift supervisor", "I was made store manager" (not "she made me
# a cake", "made me laugh", "was made aware").
_GIVEN_A_ROLE = r"(?:made|named|appointed|promoted|elected)"
_NOT_A_ROLE = (
    r"(?!\s+(?:a|an|the|some|my|our|his|her|their|this|that|it|feel|laugh|cry|think|want|smile|realise|realize|"
    r"wonder|go|do|sick|so|really|very|aware|clear|from|of|with|by|to|in|into|up|for)\b)"
)
_CHANGED_FOR_THEM = re.compile(
    r"\b(?:they|he|she|it)\s+(?:\w+\s+)?(?:(?:raised|increased|hiked|upped|bumped|put up|cut|lowered|reduced|changed|"
    r"moved|switched|cancell?ed|rescheduled|pushed)\s+(?:my|our|it|me|us)\b|put\s+(?:my|our|me|us)\s+(?:\w+\s+){0,2}on\b|"
    rf"{_GIVEN_A_ROLE}\s+(?:me|us)\b{_NOT_A_ROLE})|"
    rf"\b(?:I|we)\s+(?:was|were|got|'ve been|have been|'m|am|are|'re)\s+(?:just\s+)?{_GIVEN_A_ROLE}\b{_NOT_A_ROLE}",
    re.IGNORECASE,
)


# A change denied ("I'm not changing", "we never moved", "haven't switched"): what held still does.
_DENIED_CHANGE = re.compile(
    r"(?:\bnot|\bnever|n't)\s+(?:\w+\s+)?(?:chang|mov|switch|quit|stopp|start|leav|relocat|replac)\w*", re.IGNORECASE
)


# A clause whose subject is left out, saying what it no longer does ("not riding to work these
# days", "no longer eating meat"): written so, the subject is the writer. "not" alone denies
# anything ("something cheerful but not showing off"); with a time it tells a change.
_DENIES_WITHOUT_SUBJECT = re.compile(
    r"^(?:no longer\s+\w+ing\b|not\s+\w+ing\b.*\b(?:these days|any ?more|nowadays|lately|since)\b|"
    # ... or what it has been doing ("been going to the 6:30pm classes instead"): a change only
    # where the clause words one.
    r"(?:just\s+|really\s+)?been\s+\w+ing\b|"
    # ... or how long it has been without something ("3 weeks today without the vape", "two
    # months off sugar", "a year sober").
    rf"(?:\w+\s+)?{_TIME_WITHOUT}\b)",
    re.IGNORECASE,
)


def _changes(clause: str, about_the_speaker: bool) -> bool:
    if _CHANGED_FOR_THEM.search(clause):
        return not any(p.search(clause) for p in (_HYPOTHETICAL, _PAST_RETOLD))
    if not _CHANGE.search(_DENIED_CHANGE.sub(" ", clause)):
        return False
    if not (_FIRST_PERSON.search(clause) or about_the_speaker):
        return False
    excluded = (_OTHERS_NEWS, _ADDITION, _HYPOTHETICAL, _PAST_RETOLD)
    return not (_one_off(clause) or any(p.search(clause) for p in excluded))


# A thing of the speaker's called old, previous or former ("the old Honda", "my previous landlord"):
# the one it names was replaced.
_CALLED_OLD = re.compile(
    r"\b(?:the|my|our) (?:old|previous|former) (?!(?:one|ones|days|times)\b)(\w{3,})", re.IGNORECASE
)


def called_old(text: str) -> frozenset[str]:
    """The words (lower case) that `text` names a thing of the past by ("the old Honda": honda)."""
    return frozenset(m.group(1).lower() for m in _CALLED_OLD.finditer(text))


# Capitalised words that are times, not someone ("Thursdays now", "March was hard").
_CALENDAR = frozenset(
    """
    monday tuesday wednesday thursday friday saturday sunday january february march april may june july
    august september october november december
    """.split()  # noqa: SIM905 - a word list reads better as text
)


def _subject_of_its_own(clause: str) -> bool:
    """Whether `clause` opens with a subject that is not the speaker ("the company's gone
    hybrid", "Noor swims at 9"); a day or a month left over from a list ("Tuesdays and Thursdays
    now") is none."""
    m = _THIRD_PERSON_SUBJECT.match(clause)
    if m is None:
        return False
    word = m.group(0)
    return not (word[:1].isupper() and word.lower().removesuffix("s") in _CALENDAR)


def speaks_of_themselves(text: str) -> bool:
    """Whether `text` names its speaker ("I", "my", "we", "us", ...)."""
    return bool(_FIRST_PERSON.search(text))


def states_a_change(text: str) -> bool:
    """Whether `text` says that something of its speaker's no longer holds as it did: a clause
    of one of its statements (not a question) is about the speaker, words a change, and is
    neither someone else's news, an addition, a one-off, a hypothetical nor the past retold."""
    for sentence in filter(None, map(_stated_part, sentences(text))):
        # A sentence that names the speaker anywhere makes its subjectless clauses theirs
        # ("Weighed in this morning at 79.2, so the plan's working!").
        speaker_sentence = bool(_FIRST_PERSON.search(sentence))
        for clause in _CLAUSE_BREAK.split(sentence):
            own = (speaker_sentence and not _subject_of_its_own(clause)) or bool(_DENIES_WITHOUT_SUBJECT.match(clause))
            if clause and _changes(clause, own):
                return True
    return False


# Capitalised words that open a clause without naming anyone.
_NOT_NAMES = frozenset(
    """
    i we you he she they it this that there these those my our your the a an so and but oh ok okay yes no well
    also just now then today
    """.split()  # noqa: SIM905 - a word list reads better as text
)


def _name(word: str) -> str:
    """`word`, a capitalised word that opens a clause, if it can be a name: not a word that is
    a verb, an adverb or an adjective ("Feeling great", "Honestly, ..."), nor a function word."""
    readings = getAllLemmas(word.lower())
    if word.lower() in _NOT_NAMES or {"VERB", "AUX", "ADV", "ADJ"} & set(readings):
        return ""
    return word


# A sentence this short says too little to hold a fact ("Miso!", "So hard.").
_MIN_STATEMENT_WORDS = 3
# A question typed without its question mark ("how cold is the lake in summer though").
_ASKS = re.compile(
    # After a word that only opens the sentence ("so what ...", "ok how ..."), not "back when ...".
    r"^(?:(?:so|and|but|well|ok|okay|oh|hey|hi|hmm|also|then|anyway|btw|quick),?\s+)?(?:what|whats|which|who|whom|where|when|why|how|hows|can|could|would|will|should|shall|is|are|do|does|did|"
    r"any|anything|anywhere)\b(?!\s+but\b)",  # "anything but horror" states a taste
    re.IGNORECASE,
)


# How a statement about the speaker or a thing of theirs opens ("I ...", "my insurance ...").
_STATEMENT_OPENING = re.compile(
    r"^(?:(?:so|and|but|well|ok|okay|oh|also|honestly|btw),?\s+)?(?:i|i'm|i've|my|we|we're|we've|our)\b", re.IGNORECASE
)


def _stated_part(sentence: str) -> str:
    """What `sentence` states: nothing of a question, all of a statement. One that ends on a
    question mark states what it opens with as a statement ("my insurance renewed at 171 a month
    and i didnt even get a ticket??", "I started running, is that bad?"), or the clauses before
    the one that asks ("The RAV4 handles the hills better than the old Honda did, but do I need
    snow tires?")."""
    if _ASKS.match(sentence):
        return ""
    if not sentence.endswith("?") or _STATEMENT_OPENING.match(sentence):
        return sentence
    for between in _CLAUSE_BREAK.finditer(sentence):
        if between.start() > 0 and _ASKS.match(sentence[between.end() :]):
            return sentence[: between.start()]
    return ""


def _stated_sentences(text: str) -> list[str]:
    """What the sentences of `text` state (`_stated_part`), each of a few words at least."""
    return [part for part in map(_stated_part, sentences(text)) if len(part.split()) >= _MIN_STATEMENT_WORDS]


def states_something(text: str) -> bool:
    """Whether `text` has a sentence that states something (not a question, not a word or two)."""
    return bool(_stated_sentences(text))


def tells_the_past(text: str) -> bool:
    """Whether all `text` states is told as the past ("back when I lived in Oslo I swam every
    morning", "I used to smoke"): history, not what holds now."""
    stated = _stated_sentences(text)
    return bool(stated) and all(_PAST_RETOLD.search(s) for s in stated)


def tells_a_one_off(text: str) -> bool:
    """Whether all `text` states is worded as a one-off ("borrowing my brother's Tesla for the
    weekend", "for once I ran"): once a later conversation has come, it has run its course. An
    occasion alone is not ("Weighed in this morning at 79.2" holds until the next weigh-in)."""
    stated = _stated_sentences(text)
    return bool(stated) and all(_ONE_OFF.search(_without_relatives(s)) for s in stated)


_RELATIVE = re.compile(r"(?:which|who|whom|whose|what|how)(?:['\u2019]?s)?\b", re.IGNORECASE)


def _without_relatives(sentence: str) -> str:
    """`sentence` without its relative clauses: what they say of the thing before them ("...,
    which me from a year ago would find hilarious") makes no condition of the rest."""
    return " , ".join(c for c in _CLAUSE_BREAK.split(sentence) if not _RELATIVE.match(c))


def _says_anything(clause: str) -> bool:
    """Whether `clause` can state something: words of it ("vegan now", "only Disney+ from now
    on"), or one that names the speaker or can be a verb ("Married!"); "Anyway", "lol" or a
    place in a list ("Chorlton") state nothing of their own."""
    return (
        len(clause.split()) > 1
        or bool(_FIRST_PERSON.search(clause))
        or any({"VERB", "AUX"} & set(getAllLemmas(word.lower().strip("\"'(!.?"))) for word in clause.split())
    )


def _opens_with_verb(clause: str) -> bool:
    """Whether `clause` opens with a verb, its subject left to the clause before."""
    first = clause.split(maxsplit=1)[:1]
    return bool(first) and bool({"VERB", "AUX"} & set(getAllLemmas(first[0].lower().strip("\"'("))))


def not_current(text: str) -> bool:
    """Whether `text` tells what is no current state of its speaker's: a sentence of it is an
    addition, a one-off, a condition or the past retold ("we also got a kitten", "for once I
    ran"); a request or a plan is not ("can you help me email my manager")."""
    return any(_no_current_state(sentence) for sentence in _stated_sentences(text))


def _no_current_state(sentence: str) -> bool:
    """Whether `sentence` as a whole is a condition, an addition, a one-off or the past retold;
    its relative clauses aside ("..., which me from a year ago would find hilarious")."""
    rest = _without_relatives(sentence)
    return _one_off(rest) or any(p.search(rest) for p in (_CONDITIONAL, _ADDITION, _PAST_RETOLD))


def replaces_what_held(text: str, question: str = "") -> bool:
    """Whether `text`, said later than another statement that answers `question` alike, can be
    the one that holds now: a clause of one of its sentences states something plainly (not a
    one-off, a hypothetical, an addition or the past retold), about the speaker or about whoever the
    question names ("Noor swims on Sundays now" answers "When is Noor's swim class?", while
    "my sister moved to Denver" does not answer "Where do I live?")."""
    asked = question.lower()
    for sentence in _stated_sentences(text):
        # A condition, a one-off, an addition or the past retold holds its whole sentence ("for
        # once I ran, so hard"); a request or a plan holds its clause: a statement made inside a
        # request ("need shoe advice, I climb three times a week now") still states it.
        if _no_current_state(sentence):
            continue
        # A clause that opens with its verb goes on about whoever the one before was about ("my
        # granddaughter started drums and wants to practise here").
        others = False
        for clause in _CLAUSE_BREAK.split(sentence):
            others = others and _opens_with_verb(clause)
            # A relative clause tells of what the clause before named, and a question asks ("...,
            # which is better for a girl on a budget", "whats a good gift"): nothing of theirs.
            if _HYPOTHETICAL.search(clause) or _RELATIVE.match(clause):
                continue
            person = _PERSON_SUBJECT.search(clause.strip())
            named = "" if person is None else (person.group("person") or _name(person.group("name") or "")).lower()
            if person is not None and person.group("pronoun"):
                others = True
                continue  # somebody else, unnamed: whose news it is, the question cannot tell
            if named and named not in asked:
                others = True
                continue
            if _says_anything(clause) and not others:
                return True
    return False


def tells_anothers_change(text: str, question: str = "") -> bool:
    """Whether `text` tells of a change of someone else's that `question` does not ask about ("my
    sister just moved to Denver" for "What city do I live in?"), and nothing of it can hold now
    for its speaker: no answer to a question about the speaker's present."""
    asked = {w.removesuffix("'s") for w in re.findall(r"[\w']+", question.lower())}
    for sentence in _stated_sentences(text):
        for clause in map(str.strip, _CLAUSE_BREAK.split(sentence)):
            person = _PERSON_SUBJECT.search(clause)
            if person is None or _CHANGED_FOR_THEM.search(clause):
                continue
            # Whom it names: the person, and a name after them ("my fiancé Jake").
            who = (person.group("person") or _name(person.group("name") or "")).lower()
            named = {who, *(clause[person.end() :].lower().split()[:1] if person.group("person") else ())}
            theirs = bool(person.group("pronoun")) or bool(who and not named & asked)
            if theirs and _CHANGE.search(_DENIED_CHANGE.sub(" ", clause)):
                return not replaces_what_held(text, question)
    return False
