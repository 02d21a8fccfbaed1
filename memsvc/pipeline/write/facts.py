"""Offline fact heuristics: (subject, attribute, value) claims, contradictions and duplicates.

A claim is what one sentence states about one subject: "I moved to Berlin" is
(user, residence, berlin); "my favourite colour is green" is (user, favourite colour, green);
"I hate olives" is (user, opinion of olives, negative). Two claims about the same subject and
attribute with different values contradict each other; the later one is the current truth.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

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
            rf"\b{_SUBJECT} ?(?:am|'m|is|'s|turned|just turned) {_NOW}(?P<value>\d{{1,3}})(?: years? old)?\b",
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
    for sentence in _sentences(text):
        claims.extend(_sentence_claims(sentence))
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


def _sentence_claims(sentence: str) -> Iterable[Claim]:
    lowered = sentence.lower() if sentence.isascii() else None
    for rule in _RULES:
        for m in rule.pattern.finditer(sentence, lowered):
            if rule.proper and not m.group("value")[:1].isupper():
                continue
            value = rule.value or _clean_value(m.group("value"), 1 if rule.attribute == "age" else 4)
            if not value or value in _NOT_A_VALUE.get(rule.attribute, ()):
                continue
            negated = bool(m.groupdict().get("neg")) or rule.negative
            yield Claim(_normalise_subject(m.group("subject")), rule.attribute, value, negated)
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
    {"residence", "employer", "occupation", "name", "age", "marital status", "partner", "diet", "preference"}
)


def category(attribute: str) -> str:
    """The attribute's kind without words of the content ("opinion of olives" -> "opinion").

    Reasons and version descriptions are stored unencrypted, so they must not quote the memory.
    """
    if attribute in _FIXED_ATTRIBUTES:
        return attribute
    for prefix, kind in (("favourite ", "favourite"), ("opinion of ", "opinion"), ("name of ", "name")):
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
            if o.subject != n.subject or o.attribute != n.attribute:
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
