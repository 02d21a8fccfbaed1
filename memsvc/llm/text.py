"""Offline keyword extraction: content words, named entities, quoted phrases, numbers and dates."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# Function words and conversational filler: they carry no topic of their own.
STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are aren't as at be because been before being below
    between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each
    either else ever every few for from further get gets got had hadn't has hasn't have haven't having he he'd
    he'll he's her here here's hers herself him himself his how how's however i i'd i'll i'm i've if in into is
    isn't it it's its itself just let let's like may maybe me might mine more most much must mustn't my myself
    no nor not now of off on once one only or other ought our ours ourselves out over own please quite rather
    really same shall shan't she she'd she'll she's should shouldn't so some such than that that's the their
    theirs them themselves then there there's these they they'd they'll they're they've this those though
    through to too under until up upon us very was wasn't we we'd we'll we're we've were weren't what what's
    whatever when when's where where's whether which while who who's whom whose why why's will with won't would
    wouldn't yes yet you you'd you'll you're you've your yours yourself yourselves anything something everything
    nothing anyone someone everyone nobody somebody anybody ok okay oh hey hi hello thanks thank yeah yep nope
    sure well still even though already ago lot lots bit kind sort way ways thing things stuff tell told say
    said know knew think thought remember recall mention mentioned want wanted need needed go going gone went
    come came make made take took give gave see saw look looking many any etc am pm
    """.split()  # noqa: SIM905 - a word list reads better as text
)
# Words too generic to identify a memory; kept in queries but never required to match.
WEAK_WORDS = frozenset(
    """
    person people guy man woman one ones time times day days thing things place something someone user assistant
    name named type kind part lot new good great nice big little last first next recently currently usually talk
    talked talking love loves loved like likes liked feel feels felt try tried trying use used using really
    pretty always never often sometimes today yesterday tomorrow week month year
    """.split()  # noqa: SIM905 - a word list reads better as text
)
# Capitalised words that start sentences without naming anything.
_SENTENCE_STARTERS = frozenset(
    """
    tell remind show find give list recommend suggest help remember describe explain get let make try please
    thanks thank any anything did does do is are was were can could should would will what where when who why
    how which have has had yes no sure great good nice okay ok hi hello hey
    """.split()  # noqa: SIM905 - a word list reads better as text
)
MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_CALENDAR = frozenset(MONTHS) | frozenset(m[:3] for m in MONTHS) | frozenset(WEEKDAYS)

# A letter of any script ("vovó", "Zoë", "São Paulo"): a word character that is no digit.
_LETTER = r"[^\W\d_]"
_TOKEN = re.compile(rf"{_LETTER}(?:{_LETTER}|['\u2019\-])*{_LETTER}|{_LETTER}|\d+(?:[.,:/-]\d+)*")
# A word of two letters or more; named_entities keeps those that open on a capital.
_WORD = re.compile(rf"\b{_LETTER}(?:{_LETTER}|['\u2019\-])*{_LETTER}\b")
_QUOTED = re.compile(
    r"[\"\u201c\u201e]([^\"\u201c\u201d\u201e]{2,80})[\"\u201d]|(?:^|\s)'([^']{2,80})'(?=[\s.,!?;:]|$)"
)
_NUMBER_OR_DATE = re.compile(
    r"\b(?:\d{4}-\d{1,2}-\d{1,2}|\d{1,2}(?:st|nd|rd|th)?\s+(?:"
    + "|".join(MONTHS)
    + r")(?:\s+\d{4})?|(?:"
    + "|".join(MONTHS)
    + r")\s+\d{1,2}(?:st|nd|rd|th)?(?:,?\s+\d{4})?|\d+(?:[.,:]\d+)*%?)\b",
    re.IGNORECASE,
)


def normalise(token: str) -> str:
    """Lower case, straight apostrophes, no possessive suffix."""
    token = token.lower().replace("\u2019", "'")
    return token[:-2] if token.endswith("'s") else token


def tokens(text: str) -> list[str]:
    return [normalise(t) for t in _TOKEN.findall(text)]


def stem(word: str) -> str:
    """A light suffix stripper, enough to match `works`/`worked`/`working` and plurals."""
    w = normalise(word)
    for suffix, replacement in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3 and not w.endswith("ss"):
            w = w[: len(w) - len(suffix)] + replacement
            break
    return w


def content_words(text: str) -> list[str]:
    """Topic words in order of first appearance, without stopwords or duplicates."""
    seen: set[str] = set()
    out: list[str] = []
    for t in tokens(text):
        if t in STOPWORDS or len(t) < 2 or t in seen:
            continue
        seen.add(t)
        out.append(t)
    return out


def stems(text: str) -> set[str]:
    return {stem(t) for t in tokens(text) if t not in STOPWORDS}


def _sentence_start(text: str, index: int) -> bool:
    before = text[:index].rstrip()
    return not before or before[-1] in ".!?:\n\"'\u201c("


def named_entities(text: str) -> list[str]:
    """Capitalised names, adjacent ones joined ("Lisbon Aquarium"); sentence starters only if name-like."""
    found: list[tuple[int, int, str]] = []
    for m in _WORD.finditer(text):
        word = m.group(0)
        if not word[0].isupper():
            continue
        low = normalise(word)
        if low in STOPWORDS or low in _CALENDAR or low == "i":
            continue
        if _sentence_start(text, m.start()) and low in _SENTENCE_STARTERS:
            continue
        found.append((m.start(), m.end(), word.rstrip("'\u2019s") if word.endswith(("'s", "\u2019s")) else word))
    entities: list[str] = []
    i = 0
    while i < len(found):
        _, end, name = found[i]
        parts = [name]
        while i + 1 < len(found) and text[end : found[i + 1][0]] == " ":
            i += 1
            end = found[i][1]
            parts.append(found[i][2])
        entities.append(" ".join(parts))
        i += 1
    return _unique(entities)


def without_names(text: str, names: Iterable[str]) -> str:
    """The text with each of `names` (and its possessive) left out, or the text itself if nothing
    else would remain: "What is Caroline's job?" without Caroline is "What is job?"."""
    out = text
    for name in names:
        out = re.sub(rf"(?<!\w){re.escape(name)}(?:['\u2019]s)?(?!\w)", " ", out)
    out = " ".join(out.split())
    return out if out.strip(" ?!.,") else text


def quoted_phrases(text: str) -> list[str]:
    return _unique(next(g for g in m.groups() if g).strip() for m in _QUOTED.finditer(text))


def numbers_and_dates(text: str) -> list[str]:
    return _unique(m.group(0) for m in _NUMBER_OR_DATE.finditer(text))


def _unique(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = item.lower()
        if item and key not in seen:
            seen.add(key)
            out.append(item)
    return out


@dataclass(frozen=True)
class Keywords:
    """What a text is about, most identifying first."""

    entities: tuple[str, ...]
    phrases: tuple[str, ...]
    numbers: tuple[str, ...]
    terms: tuple[str, ...]

    @property
    def key_terms(self) -> tuple[str, ...]:
        """Terms a matching memory should contain (entity words, then non-generic content words)."""
        out = _unique([*(normalise(w) for e in self.entities for w in e.split()), *self.specific_terms])
        return tuple(out)

    @property
    def specific_terms(self) -> tuple[str, ...]:
        return tuple(t for t in self.terms if t not in WEAK_WORDS)

    def query(self, limit: int = 8) -> str:
        """A keyword query: phrases, entities, numbers, then the remaining content words."""
        parts = _unique([*self.phrases, *self.entities, *self.numbers])
        covered = {normalise(w) for p in parts for w in p.split()}
        rest = [t for t in self.specific_terms if t not in covered]
        return " ".join([*parts, *rest][:limit])

    def is_empty(self) -> bool:
        return not (self.entities or self.phrases or self.numbers or self.terms)


def extract_keywords(text: str) -> Keywords:
    return Keywords(
        entities=tuple(named_entities(text)),
        phrases=tuple(quoted_phrases(text)),
        numbers=tuple(numbers_and_dates(text)),
        terms=tuple(content_words(text)),
    )


# Emoji and pictographs, with the selector that asks for one ("❤️").
EMOJI = "[\U0001f300-\U0001faff\u2600-\u27bf\ufe0f]"
# Not after a title or an abbreviation that takes a full stop ("Dr. Okafor", "e.g. this"). An
# emoji ends a sentence as a full stop does in text typed on a phone ("... name change 😩 whats
# first?").
_SENTENCE_BREAK = re.compile(
    r"(?:(?<=[.!?])(?<!\bDr\.)(?<!\bMr\.)(?<!\bMs\.)(?<!\bMrs\.)(?<!\bSt\.)(?<!\bProf\.)(?<!\bJr\.)(?<!\bSr\.)"
    rf"(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bvs\.)|(?<={EMOJI}))\s+"
)


def sentences(text: str) -> list[str]:
    """The text's sentences, each ending on its own ".", "!" or "?", whitespace collapsed."""
    return [s for s in _SENTENCE_BREAK.split(" ".join(text.split())) if s]


# A question that opens on what the asker states of themselves ("I'm vegetarian, can you suggest
# a dinner?", "My dog is 5 and bored, any ideas?"): the clause before the ask is a statement.
_STATED_BEFORE_ASKING = re.compile(
    r"^(?P<stated>(?:(?:so|and|but|well|ok|okay|hi|hey)[\s,]+)*(?:I|I'm|I've|I'd|I'll|my|we|we're|we've|our)\b"
    r"[^?]*?)[,;:.\u2013\u2014-]\s+(?:\w+\s+){0,3}?(?:can|could|would|will|do|does|should|is|are|any|what|how|which|"
    r"where|when|who|why)\b",
    re.IGNORECASE,
)


def statements(text: str) -> str:
    """The text without its questions: what it states. "Wow! What did you paint?" states "Wow!";
    "I'm vegetarian, can you suggest a dinner?" states "I'm vegetarian"."""
    out = []
    for s in sentences(text):
        if not s.endswith("?"):
            out.append(s)
        elif (m := _STATED_BEFORE_ASKING.match(s)) is not None:
            out.append(m.group("stated"))
    return " ".join(out)


def without_questions_asked_back(text: str) -> str:
    """The text without the questions it ends on, when it states something before them:
    "We went camping last weekend. What did you get up to?" -> "We went camping last weekend."
    A text that is all questions, or asks first and states after, is returned as it is."""
    parts = sentences(text)
    end = len(parts)
    while end and parts[end - 1].endswith("?"):
        end -= 1
    return " ".join(parts[:end]) if 0 < end < len(parts) else text


def jaccard(a: set[str], b: set[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def estimate_tokens(text: str) -> int:
    """About 1.3 tokens per word for English with a BPE tokenizer."""
    return int(len(text.split()) * 1.3 + 0.999)


def salient_terms(texts: Sequence[str], exclude: Iterable[str], limit: int = 4) -> list[str]:
    """Pseudo-relevance feedback: names first, then frequent content words of `texts` not in `exclude`."""
    skip = {stem(w) for w in exclude} | {normalise(w) for w in exclude}
    counts: dict[str, float] = {}
    order: list[str] = []
    for rank, text in enumerate(texts):
        weight = 1.0 / (1 + rank)
        for entity in named_entities(text):
            if normalise(entity) in skip or stem(entity) in skip:
                continue
            if entity not in counts:
                order.append(entity)
            counts[entity] = counts.get(entity, 0.0) + 2.0 * weight
        for term in content_words(text):
            if term in WEAK_WORDS or stem(term) in skip or term in skip or len(term) < 3:
                continue
            if any(term == normalise(e) for e in counts if " " not in e):
                continue
            if term not in counts:
                order.append(term)
            counts[term] = counts.get(term, 0.0) + weight
    ranked = sorted(order, key=lambda t: (-counts[t], order.index(t)))
    out: list[str] = []
    for term in ranked:
        if any(normalise(term) in normalise(o).split() for o in out):
            continue
        out.append(term)
        if len(out) == limit:
            break
    return out
