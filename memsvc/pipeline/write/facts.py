"""Offline fact heuristics: (subject, attribute, value) claims, contradictions and duplicates.

A claim is what one sentence states about one subject: "I moved to Berlin" is
(user, residence, berlin); "my favourite colour is green" is (user, favourite colour, green);
"I hate olives" is (user, opinion of olives, negative). Two claims about the same subject and
attribute with different values contradict each other; the later one is the current truth.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from lemminflect import getAllLemmas

from memsvc.llm.changes import speaks_of_themselves
from memsvc.pipeline.write.instructions import instruction_of

# Words that end a value: clause breaks, time and manner adverbs.
_VALUE_STOP = frozenset(
    """
    and but because since for with when while now nowadays recently currently anymore any more these those this
    last next ago yesterday today tomorrow these days as of from until though although so which who where after
    before during in at on by years year months month weeks week days day
    """.split()  # noqa: SIM905 - a word list reads better as prose
)
_ARTICLES = frozenset({"a", "an", "the", "my", "our", "some"})
_STOP = frozenset(
    """
    a an the i me my mine we our you your he she it its they them their is am are was were be been being have has
    had do does did to of in on at for with and or but so that this these those as by from now really very also
    just still too again then there here not no never anymore any more much many lot quite rather i'm i've i'd i'll
    it's we're they're you're he's she's his her him hers definitely always truly totally absolutely pretty indeed
    honestly basically
    """.split()  # noqa: SIM905 - a word list reads better as prose
)
_NEGATIONS = frozenset({"not", "no", "never", "don't", "dont", "doesn't", "didn't", "isn't", "aren't", "won't"})
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
_WORD = re.compile(r"[a-z0-9][a-z0-9'+-]*")

# Subjects: the user ("i"), someone of the user's ("my sister"), or a named person.
_SUBJECT = r"(?P<subject>i|my (?:[a-z]+ ){0,1}[a-z]+|[A-Z][a-z]+)"
# Owners: "my name", "Ivy's favourite colour", "my sister's husband".
_OWNER = r"(?P<subject>my|[A-Za-z]+'s)"
_NOT = r"(?P<neg>(?:do not|don't|no longer|not|never|doesn't|does not|didn't|am not|'m not|isn't|is not) )?"
_NOW = r"(?:(?:now|currently|recently|just|finally|actually|still|also|really) )?"
_BE = r"(?:am|'m|is|'s|are|'re|was|were)"
_VALUE = r"(?P<value>[A-Za-z0-9][\w' .&+-]*)"


@dataclass(frozen=True)
class _Gated:
    """A case-blind claim pattern and the lower-case words every match of it contains.

    Each pattern may start at any word (a subject can be any capitalised name, and case is
    ignored), so the regex engine tries it at every position of a sentence: 22 patterns cost
    about 120 us a sentence. Most sentences hold none of a pattern's words (its verb or
    keyword), and checking for those first skips the pattern. tests/unit/test_facts.py checks,
    with strings generated from each pattern, that none matches without one of its words.
    """

    regex: re.Pattern[str]
    words: tuple[str, ...]

    def finditer(self, sentence: str, lowered: str | None) -> Iterator[re.Match[str]]:
        """Matches in `sentence`; `lowered` is its lower case, or None to run the pattern
        regardless (outside ASCII, case-blind matching pairs letters `lower()` does not)."""
        if lowered is not None:
            for word in self.words:  # a loop, not any(): the generator cost more than the lookups
                if word in lowered:
                    break
            else:
                return iter(())
        return self.regex.finditer(sentence)


def _rx(pattern: str, *words: str) -> _Gated:
    return _Gated(re.compile(pattern, re.IGNORECASE), words)


@dataclass(frozen=True)
class _Rule:
    attribute: str
    pattern: _Gated
    # A fixed value (e.g. "married") instead of the captured one.
    value: str = ""
    negative: bool = False
    # The value must be a name ("I joined Globex", not "I joined a gym").
    proper: bool = False


_RULES: tuple[_Rule, ...] = (
    _Rule(
        "residence",
        _rx(
            rf"\b{_SUBJECT} {_NOT}{_NOW}(?:live[sd]?|living|reside[sd]?|(?:{_BE} )?(?:based|living|staying)) "
            rf"(?:in|at) {_VALUE}",
            "liv",
            "resid",
            "based",
            "staying",
        ),
    ),
    _Rule(
        "residence",
        _rx(
            rf"\b{_SUBJECT} {_NOW}(?:ha(?:ve|s) )?(?:moved|relocated|emigrated|moving|relocating) "
            rf"(?:back )?to {_VALUE}",
            "mov",
            "relocat",
            "emigrat",
        ),
    ),
    _Rule("residence", _rx(rf"\b{_OWNER} home (?:is|town is) (?:in )?{_VALUE}", "home")),
    _Rule(
        "employer",
        _rx(rf"\b{_SUBJECT} {_NOT}{_NOW}(?:(?:{_BE} )?working|works?|worked) (?:at|for) {_VALUE}", "work"),
    ),
    _Rule(
        "employer",
        _rx(
            rf"\b{_SUBJECT} {_NOW}(?:joined|started (?:a new job |working )?at|got a job at|(?:ha(?:ve|s) )?joined) "
            rf"{_VALUE}",
            "joined",
            "started",
            "got a job",
        ),
        proper=True,
    ),
    _Rule("employer", _rx(rf"\b{_OWNER} employer is {_VALUE}", "employer")),
    _Rule("occupation", _rx(rf"\b{_SUBJECT} {_NOW}works? as (?:an? )?{_VALUE}", "work")),
    _Rule(
        "occupation",
        _rx(rf"\b{_OWNER} (?:job|profession|occupation) is (?:an? )?{_VALUE}", "job", "profession", "occupation"),
    ),
    _Rule("name", _rx(rf"\b{_OWNER} name is {_VALUE}", "name")),
    _Rule("name", _rx(r"\b(?P<subject>i)(?: am|'m) called (?P<value>[A-Za-z][\w'-]*)", "called")),
    _Rule("name", _rx(r"\bcall (?P<subject>me) (?P<value>[A-Za-z][\w'-]*)", "call")),
    _Rule(
        "age",
        _rx(
            # Not the first digits of an amount ("rent is 1,250").
            rf"\b{_SUBJECT} ?(?:am|'m|is|'s|turned|just turned) {_NOW}(?P<value>\d{{1,3}})(?![,.]\d)(?: years? old)?\b",
            *"0123456789",
        ),
    ),
    _Rule("age", _rx(rf"\b{_OWNER} age is (?P<value>\d{{1,3}})", "age")),
    _Rule(
        "marital status",
        _rx(
            rf"\b{_SUBJECT} ?{_BE} {_NOT}{_NOW}(?P<value>married|single|divorced|engaged|widowed|separated)\b",
            *("married", "single", "divorced", "engaged", "widowed", "separated"),
        ),
    ),
    _Rule(
        "marital status",
        _rx(rf"\b{_SUBJECT} {_NOW}(?:got )?(?P<value>married|divorced|engaged)\b", "married", "divorced", "engaged"),
    ),
    # Who the speaker calls their spouse or fiancé(e) tells their status ("my husband Arjun").
    _Rule(
        "marital status",
        _rx(r"\b(?P<subject>my) (?:husband|wife|spouse)\b", "husband", "wife", "spouse"),
        value="married",
    ),
    _Rule("marital status", _rx(r"\b(?P<subject>my) fianc[eé]e?\b", "fianc"), value="engaged"),
    _Rule(
        "partner",
        _rx(
            rf"\b{_OWNER} (?:wife|husband|partner|girlfriend|boyfriend|spouse|fianc[eé]e?)(?:'s name)? is {_VALUE}",
            *("wife", "husband", "partner", "girlfriend", "boyfriend", "spouse", "fianc"),
        ),
    ),
    _Rule("partner", _rx(rf"\b{_SUBJECT} ?{_BE} {_NOW}(?:married|engaged) to {_VALUE}", "married", "engaged")),
    _Rule(
        "diet",
        _rx(
            rf"\b{_SUBJECT} ?{_BE} {_NOT}{_NOW}(?:an? )?(?P<value>vegetarian|vegan|pescatarian|carnivore|omnivore)\b",
            *("vegetarian", "vegan", "pescatarian", "carnivore", "omnivore"),
        ),
    ),
)

# "my favourite colour is green", "my favorite food is now sushi"
_FAVOURITE = _rx(
    rf"\b{_OWNER} (?:new )?favou?rite (?P<thing>[a-z]+(?: [a-z]+)?) {_BE} {_NOW}{_VALUE}", "favourite", "favorite"
)
# "I prefer aisle seats", "I now prefer tea over coffee"
_PREFER = _rx(rf"\b{_SUBJECT} {_NOT}{_NOW}(?:prefers?|preferred|would rather(?: have)?) {_VALUE}", "prefer", "rather")
# "I love sushi", "I can't stand olives": an opinion of one object.
_OPINION = _rx(
    rf"\b{_SUBJECT} {_NOT}{_NOW}(?P<verb>like|likes|love|loves|enjoy|enjoys|adore|hate|hates|dislike|dislikes|"
    rf"detest|can't stand|cannot stand|can not stand) {_VALUE}",
    *("like", "love", "enjoy", "adore", "hate", "detest", "stand"),
)
# "my phone number is ...", "my dog is called ...": a generic attribute of the user.
_GENERIC = _rx(
    rf"\b{_OWNER} (?P<thing>[a-z]+(?: [a-z]+)?) (?:is|are) (?P<naming>called |named )?{_NOW}{_VALUE}", " is ", " are "
)
_NUMBER_VALUE = (
    r"(?P<value>[$£€]?\s?\d[\d,.]*\s?(?:k|%|kg|kilos?|lbs?|pounds|stone|minutes|mins|hours|hrs|mg|gb|mbps)?)"
)
# Words that name nothing of the speaker's before a number ("It's 5 miles away").
_NO_THING = frozenset(
    ["i", "we", "you", "it", "that", "this", "there", "here", "he", "she", "they", "what", "who", "which"]
)
# "my rent is $1,950", "my commute is now 50 minutes", "our mortgage went up to $1,350": a
# quantity of something of the speaker's has one value at a time. A sentence may open on the
# thing, its owner unsaid ("Rent's $1,700 for the one-bed").
_QUANTITY = _rx(
    rf"(?:\b(?P<subject>my|our|[A-Za-z]+'s) |^)(?P<thing>[a-z]+(?: [a-z]+)?)(?:'s| (?:is|are|was|costs?|comes to|"
    rf"(?:has |have )?(?:went|goes|go|gone|rose|risen|increased|jumped|dropped|fell|fallen|decreased) (?:up |down )?"
    rf"to)) (?:now |about |around |roughly |like )*{_NUMBER_VALUE}",
    *"0123456789",
)
# "they raised my rent to $1,950", "bumped me to 58k", "upped my dose to 100mg".
_RAISED = _rx(
    rf"\b(?:raised|increased|bumped|hiked|upped|cut|lowered|reduced|put up|dropped|changed) "
    rf"(?P<subject>my|me|our|us)(?: (?P<thing>[a-z]+(?: [a-z]+)?))? (?:up |down )?to {_NUMBER_VALUE}",
    "raised",
    "increased",
    "bumped",
    "hiked",
    "upped",
    "cut",
    "lowered",
    "reduced",
    "put up",
    "dropped",
    "changed",
)
# "I pay $1,700", "I earn 52k", "I weigh 82 kg", "I take 50mg".
_MEASURE = _rx(
    rf"\b{_SUBJECT} (?:now |currently |only )*(?P<verb>pay|pays|earn|earns|make|makes|weigh|weighs|take|takes|"
    rf"spend|spends) (?:about |around |roughly )?{_NUMBER_VALUE}",
    "pay",
    "earn",
    "make",
    "weigh",
    "take",
    "spend",
)
# "I pay Spectrum $55 a month", "they put me on a plan at $65/month": what the speaker pays or
# earns by the month (week, year, hour) has one value at a time for one thing, whatever the
# sentence names it by; the statements compared are about the same thing already (their vectors
# are close, and both answer the question).
_PERIODIC = _rx(
    r"(?P<value>[$£€]\s?\d[\d,.]*k?)\s?(?:(?:a|an|per|each|every|/)\s?(?P<period>month|mo|week|wk|year|yr|hour|hr)\b|"
    r"(?P<adverb>monthly|weekly|yearly|annually|hourly)\b)",
    "$",
    "£",
    "€",
)
_PERIODS = {
    "mo": "month",
    "wk": "week",
    "yr": "year",
    "hr": "hour",
    "monthly": "month",
    "weekly": "week",
    "yearly": "year",
    "annually": "year",
    "hourly": "hour",
}
_DAYS = r"(?:mon|tues|wednes|thurs|fri|satur|sun)days?|weekends?|weekdays?"
# "my piano lesson is on Thursdays now", "my yoga class moved to Saturday 9am".
_SCHEDULE = _rx(
    rf"\b{_OWNER} (?P<thing>[a-z]+(?: [a-z]+)?) (?:is|are|was|(?:got |has been |was )?(?:moved|changed|switched|"
    rf"pushed|shifted|rescheduled)) (?:to |on |at |now |every )*(?P<value>(?:{_DAYS})(?: (?:mornings?|evenings?|"
    rf"at \d{{1,2}}(?::\d\d)?\s?(?:am|pm)?))?|\d{{1,2}}(?::\d\d)?\s?(?:am|pm))\b",
    *("day", "weekend", "am", "pm"),
)
# A habit or use of something, which may hold of several things at once: "I drink coffee every
# morning", "I'm on losartan now", "I drive a Civic".
_HABIT = _rx(
    rf"\b{_SUBJECT} {_NOT}(?:(?:now|currently|usually|mostly|only|still|just|always|also|really) )*"
    rf"(?P<verb>drink|drinks|drank|eat|eats|ate|take|takes|use|uses|drive|drives|ride|rides|play|plays|"
    rf"watch|watches|read|reads|listen to|listens to|wear|wears|smoke|smokes|go to|goes to|shop at|shops at|"
    rf"see|sees|learn|learns|study|studies|run|runs|swim|swims|cycle|cycles|jog|jogs|walk|walks|do|does|cook|"
    rf"cooks|bake|bakes|paint|paints|practi[cs]e|practi[cs]es) {_VALUE}",
    *("drink", "drank", "eat", "ate", "take", "use", "drive", "ride", "play", "watch", "read", "listen", "wear"),
    *("smoke", "go to", "goes to", "shop", "see", "learn", "stud", "run", "swim", "cycle", "jog", "walk", "do"),
    *("cook", "bake", "paint", "practi"),
)
# "I'm on losartan now", "I'm eating fish again", "she's on a renal diet": what one is on or
# doing these days.
_ONGOING = _rx(
    rf"\b{_SUBJECT}(?:'m| am|'s| is|'re| are) {_NOT}(?:(?:now|currently|still|back|mostly|only|just) )*"
    rf"(?P<verb>on|eating|drinking|taking|using|driving|riding|playing|wearing|smoking|learning|studying|running|"
    rf"swimming|cycling|doing) {_VALUE}",
    "m ",
    "am ",
    "s ",
    "is ",
    "re ",
    "are ",
)
_MEASURED = {"earn": "pay", "make": "pay", "pay": "payment", "weigh": "weight", "take": "dose", "spend": "spending"}
# Giving something up: "I quit smoking", "I gave up coffee", "I stopped playing football",
# "I'm no longer with Acme", "I don't eat meat anymore" (the last by _HABIT's negation).
_STOPPED = _rx(
    rf"\b{_SUBJECT}\s?(?:have |'ve |had |'d )?(?:just |finally |recently |officially )*"
    rf"(?:quit|stopped|gave up|given up|dropped|cancell?ed|ditched|cut out|"
    rf"(?:am|'m) no longer (?:with|at|on|doing|into)|no longer (?:do|play|drink|eat|take|use|go to|see)) {_VALUE}",
    *("quit", "stopped", "gave up", "given up", "dropped", "cancel", "ditched", "cut out", "no longer"),
)
# Wording that says what held before no longer does (a habit's new value replaces the old).
_CHANGE_WORDS = re.compile(
    r"\b(?:now|nowadays|these days|any ?more|no longer|instead|switched|changed|since|from now on|moved|new)\b",
    re.IGNORECASE,
)

# "my X is Y" names a value only for attributes with one value at a time; "my dog is a labrador"
# and "my dog is called Biscuit" are both true, so descriptions are never compared with names.
_SINGLE_VALUED = frozenset(
    """
    number address email birthday size height weight colour color model plan provider doctor dentist bank
    school university team club language timezone
    """.split()  # noqa: SIM905 - a word list reads better as prose
)
# Words the patterns catch that say how, not what: "I work from home", "I work at night".
_NOT_A_VALUE = {
    "employer": frozenset({"home", "night", "nights", "weekends", "weekend", "remotely", "the moment", "a living"}),
    "residence": frozenset({"peace", "the moment", "hope", "fear"}),
}
_NEGATIVE_VERBS = frozenset({"hate", "hates", "dislike", "dislikes", "detest", "can't stand", "cannot stand"})


@dataclass(frozen=True)
class Claim:
    """One statement about one subject: `attribute` of `subject` is `value` (or is not, if negated)."""

    subject: str
    attribute: str
    value: str
    negated: bool = False
    # Preference claims compare values by overlap of their context words, not equality.
    fuzzy: bool = False
    # A relation that holds of several values at once ("I drink coffee", "I play tennis"): a new
    # value replaces an old one only when its sentence words a change ("now", "switched to").
    several: bool = False
    # The sentence words a change: "now", "no longer", "anymore", "switched", "quit", ... (how it
    # was said, not what: two claims that differ only here are the same claim).
    changed: bool = field(default=False, compare=False)


def content_terms(text: str) -> set[str]:
    """Lower-cased content words and numbers, with plural -s folded; the basis of duplicate checks."""
    out: set[str] = set()
    for word in _WORD.findall(text.lower()):
        if word in _STOP:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.add(word)
    return out


def _normalise_subject(raw: str) -> str:
    s = raw.strip().lower().removesuffix("'s")
    if s in {"i", "me", "my"}:
        return "user"
    if s.startswith("my "):
        return s.removeprefix("my ").strip()
    return s


def _clean_value(raw: str, max_words: int = 4) -> str:
    words: list[str] = []
    for token in re.split(r"\s+", raw.strip()):
        bare = token.strip(".,;:!?\"'()").lower()
        if not bare:
            break
        if words and bare in _VALUE_STOP:
            break
        if not words and bare in _ARTICLES:
            continue
        words.append(bare)
        if token.rstrip() and token.rstrip()[-1] in ".,;:!?":
            break
        if len(words) >= max_words:
            break
    return " ".join(words)


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?;])\s+|\n+", text) if s.strip()]


def extract_claims(text: str) -> list[Claim]:
    """Every claim the rules find in `text`, first-person and third-person alike."""
    claims: list[Claim] = []
    # A text in which the speaker speaks of themselves: its amounts by the period are theirs.
    own = speaks_of_themselves(text)
    for sentence in _sentences(text):
        claims.extend(_sentence_claims(sentence, own))
    return list(dict.fromkeys(claims))


class ClaimCache:
    """The claims of the texts one write call has read, so that it parses each text once.

    A write reads a new text's claims for its importance, for the repeat check against its
    nearest memories and for the contradiction check, and the nearest memories come back for
    every new text near them; parsing costs 10-20 us a sentence. One per call, dropped with
    it: texts and claims are plaintext, which no cache may hold beyond the request.
    """

    def __init__(self) -> None:
        self._claims: dict[str, tuple[Claim, ...]] = {}

    def __call__(self, text: str) -> tuple[Claim, ...]:
        found = self._claims.get(text)
        if found is None:
            found = self._claims[text] = tuple(extract_claims(text))
        return found


# The attribute of an instruction's claim: "instruction: language", "instruction: length", ...
INSTRUCTION_PREFIX = "instruction: "
# Standing rules ("never suggest ...") are each their own: they conflict only when one says the
# opposite of the other about the same things.
_STANDING_RULE = INSTRUCTION_PREFIX + "standing rule"


def _sentence_claims(sentence: str, own: bool) -> Iterable[Claim]:
    instruction = instruction_of(sentence)
    if instruction is not None:
        yield Claim("user", INSTRUCTION_PREFIX + instruction.aspect, instruction.value, instruction.negated)
        return
    lowered = sentence.lower() if sentence.isascii() else None
    for rule in _RULES:
        for m in rule.pattern.finditer(sentence, lowered):
            if rule.proper and not m.group("value")[:1].isupper():
                continue
            value = rule.value or _clean_value(m.group("value"), 1 if rule.attribute == "age" else 4)
            if not value or value in _NOT_A_VALUE.get(rule.attribute, ()):
                continue
            negated = bool(m.groupdict().get("neg")) or rule.negative
            changed = bool(_CHANGE_WORDS.search(sentence))
            yield Claim(_normalise_subject(m.group("subject")), rule.attribute, value, negated, changed=changed)
    for m in _FAVOURITE.finditer(sentence, lowered):
        value = _clean_value(m.group("value"))
        if value:
            yield Claim(_normalise_subject(m.group("subject")), f"favourite {m.group('thing').lower()}", value)
    for m in _PREFER.finditer(sentence, lowered):
        value = _clean_value(m.group("value"), 8)
        if value:
            yield Claim(_normalise_subject(m.group("subject")), "preference", value, bool(m.group("neg")), fuzzy=True)
    for m in _OPINION.finditer(sentence, lowered):
        thing = _clean_value(m.group("value"))
        if not thing:
            continue
        negative = m.group("verb").lower() in _NEGATIVE_VERBS
        if m.group("neg"):
            negative = not negative
        yield Claim(
            _normalise_subject(m.group("subject")), f"opinion of {thing}", "negative" if negative else "positive"
        )
    for m in _GENERIC.finditer(sentence, lowered):
        thing = m.group("thing").lower()
        if thing.startswith(("favourite", "favorite", "name", "wife", "husband", "partner", "home", "employer")):
            continue
        value = _clean_value(m.group("value"))
        if not value or len(thing.split()) > 2:
            continue
        if m.group("naming"):
            yield Claim(_normalise_subject(m.group("subject")), f"name of {thing}", value)
        elif thing.split()[-1] in _SINGLE_VALUED and not re.match(r"(?:an?|the) ", m.group("value"), re.I):
            yield Claim(_normalise_subject(m.group("subject")), thing, value)
    yield from _slot_claims(sentence, lowered, own)


def _number(raw: str) -> str:
    """A quantity as compared: "$1,950" and "1950" are one value, "58k" is 58000."""
    text = raw.lower().replace(",", "").replace(" ", "").strip("$£€")
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(k)?(.*)", text)
    if m is None:
        return text
    value = float(m.group(1)) * (1000 if m.group(2) else 1)
    return f"{value:g}{m.group(3)}"


def _slot_claims(sentence: str, lowered: str | None, own: bool) -> Iterable[Claim]:
    """Quantities, schedules, habits and what was given up: the values a later statement
    changes ("my rent is $1,950" after "$1,700"; "I quit smoking"; "I'm on losartan now")."""
    changed = bool(_CHANGE_WORDS.search(sentence))
    for m in _QUANTITY.finditer(sentence, lowered):
        if m.group("thing").lower() in _NO_THING:
            continue  # "It's 5 miles away", "That's 20 dollars": nothing of the speaker's named
        owner = (m.group("subject") or "my").lower()
        subject, value = _normalise_subject("my" if owner == "our" else owner), _number(m.group("value"))
        yield Claim(subject, f"amount of {_head(m.group('thing'))}", value)
    for m in _RAISED.finditer(sentence, lowered):
        thing = _head(m.group("thing") or "pay")
        yield Claim("user", f"amount of {thing}", _number(m.group("value")), changed=True)
    for m in _MEASURE.finditer(sentence, lowered):
        measured = _MEASURED.get(_lemma(m.group("verb")), "amount")
        yield Claim(_normalise_subject(m.group("subject")), f"amount of {measured}", _number(m.group("value")))
    if own:
        for m in _PERIODIC.finditer(sentence, lowered):
            period = m.group("period") or m.group("adverb")
            yield Claim("user", f"amount per {_PERIODS.get(period, period)}", _number(m.group("value")))
    for m in _SCHEDULE.finditer(sentence, lowered):
        subject, value = _normalise_subject(m.group("subject")), m.group("value").lower()
        yield Claim(subject, f"time of {_head(m.group('thing'))}", value)
    for pattern in (_HABIT, _ONGOING):
        for m in pattern.finditer(sentence, lowered):
            value = _clean_value(m.group("value"))
            if not value:
                continue
            verb = _lemma(m.group("verb"))
            negated = bool(m.group("neg"))
            subject = _normalise_subject(m.group("subject"))
            yield Claim(subject, f"habit {verb}", value, negated, several=True, changed=changed or negated)
    for m in _STOPPED.finditer(sentence, lowered):
        value = _clean_value(m.group("value"))
        if value:
            # What was given up, whatever it was done with: any habit holding it ends.
            yield Claim(_normalise_subject(m.group("subject")), GIVEN_UP, value, True, several=True, changed=True)


# The attribute of a claim that something was given up ("I quit smoking"): it ends any habit
# of the same subject that holds the same thing.
GIVEN_UP = "given up"


def _head(thing: str) -> str:
    """What a quantity or a schedule is of, by its last word: "piano lesson" is a "lesson"."""
    return thing.lower().split()[-1]


def _lemma(verb: str) -> str:
    word = verb.lower().split()[-1] if verb.lower().startswith(("am ", "'m ", "is ")) else verb.lower()
    if word == "on":
        return "on"
    first, _, rest = word.partition(" ")
    readings = getAllLemmas(first).get("VERB") or (first,)
    return f"{readings[0]} {rest}".strip()


@dataclass(frozen=True)
class Conflict:
    """Why a newer statement contradicts an older one."""

    subject: str
    attribute: str
    old_value: str
    new_value: str

    def describe(self) -> str:
        """A reason fit to store in plain text: it names the kind of attribute, never a value or name."""
        who = "the user" if self.subject == "user" else "another person"
        return f"same subject ({who}) and attribute ({category(self.attribute)}), a different value"


# Attribute names the rules produce from a fixed vocabulary; others carry words of the content.
_FIXED_ATTRIBUTES = frozenset(
    {"residence", "employer", "occupation", "name", "age", "marital status", "partner", "diet", "preference", GIVEN_UP}
)


def category(attribute: str) -> str:
    """The attribute's kind without words of the content ("opinion of olives" -> "opinion").

    Reasons and version descriptions are stored unencrypted, so they must not quote the memory.
    """
    if attribute in _FIXED_ATTRIBUTES:
        return attribute
    if attribute.startswith(INSTRUCTION_PREFIX):
        return "instruction"
    for prefix, kind in (
        ("favourite ", "favourite"),
        ("opinion of ", "opinion"),
        ("name of ", "name"),
        ("amount ", "amount"),
        ("time of ", "time"),
        ("habit ", "habit"),
    ):
        if attribute.startswith(prefix):
            return kind
    return "attribute"


def _fuzzy_conflict(old: Claim, new: Claim) -> bool:
    """Preferences conflict when they are about the same thing (shared context) but choose differently."""
    if old.negated != new.negated and content_terms(old.value) == content_terms(new.value):
        return True
    a, b = content_terms(old.value), content_terms(new.value)
    shared = a & b
    return bool(shared) and a != b and len(shared) / max(1, min(len(a), len(b))) >= 0.4


def find_conflict(older: Sequence[Claim], newer: Sequence[Claim]) -> Conflict | None:
    """The first pair of claims about the same subject and attribute that disagree."""
    for n in newer:
        for o in older:
            if o.subject != n.subject:
                continue
            if o.attribute != n.attribute and GIVEN_UP not in (o.attribute, n.attribute):
                continue
            if n.attribute == GIVEN_UP or o.attribute == GIVEN_UP:
                if _gives_up(o, n):
                    return Conflict(n.subject, n.attribute, o.value, n.value)
                continue
            if n.several or o.several:
                # Several values may hold at once: a new one replaces the old only when said so,
                # and only a value of other things ("matcha" for "coffee", not "coffee with oat milk").
                flipped = o.negated != n.negated and bool(content_terms(o.value) & content_terms(n.value))
                other = not (content_terms(o.value) & content_terms(n.value)) and not o.negated and not n.negated
                if n.changed and (flipped or other):
                    return Conflict(n.subject, n.attribute, o.value, n.value)
                continue
            if n.attribute == _STANDING_RULE:
                if o.negated != n.negated and _same_rule(o.value, n.value):
                    return Conflict(n.subject, n.attribute, o.value, n.value)
                continue
            if n.fuzzy or o.fuzzy:
                if _fuzzy_conflict(o, n):
                    return Conflict(n.subject, n.attribute, o.value, n.value)
                continue
            if o.value == n.value and o.negated != n.negated:
                return Conflict(n.subject, n.attribute, o.value, ("not " if n.negated else "") + n.value)
            if o.value != n.value and not o.negated and not n.negated:
                return Conflict(n.subject, n.attribute, o.value, n.value)
    return None


def _gives_up(old: Claim, new: Claim) -> bool:
    """A newer "I quit smoking" ends an older habit holding the thing given up ("I smoke"); an
    older "I gave up meat" is ended by a newer habit holding it again, said as a change."""
    if new.attribute == GIVEN_UP and not old.negated and old.attribute != GIVEN_UP:
        verb = old.attribute.removeprefix("habit ")
        given = content_terms(new.value) | {_lemma(w) for w in new.value.split()}
        return bool(given & (content_terms(old.value) | {verb}))
    if old.attribute == GIVEN_UP and new.attribute.startswith("habit ") and not new.negated and new.changed:
        return bool(content_terms(old.value) & content_terms(new.value))
    return False


def _same_rule(a: str, b: str) -> bool:
    """Two standing rules about the same things: their content words (negations aside) mostly shared."""
    ta, tb = content_terms(a) - _NEGATIONS - {"stop", "avoid"}, content_terms(b) - _NEGATIONS - {"stop", "avoid"}
    return bool(ta & tb) and len(ta & tb) / max(1, min(len(ta), len(tb))) >= 0.8


def is_duplicate(
    old_text: str,
    new_text: str,
    similarity: float,
    threshold: float = 0.92,
    claims: Callable[[str], Sequence[Claim]] = extract_claims,
) -> bool:
    """A repeated statement of the same fact: near-identical meaning and the same content terms.

    Numbers must match exactly and neither side may negate what the other states: "I am 34"
    and "I am 35" embed almost identically but are not the same fact.
    """
    if similarity < threshold:
        return False
    a, b = content_terms(old_text), content_terms(new_text)
    if not a or not b:
        return old_text.strip().lower() == new_text.strip().lower()
    if set(_NUMBER.findall(old_text)) != set(_NUMBER.findall(new_text)):
        return False
    if _negated(old_text) != _negated(new_text):
        return False
    if find_conflict(claims(old_text), claims(new_text)) is not None:
        return False
    # Any content word one side has and the other lacks is new information, not a repeat.
    return a == b


def _negated(text: str) -> bool:
    return any(w in _NEGATIONS for w in _WORD.findall(text.lower())) or "n't" in text.lower()
