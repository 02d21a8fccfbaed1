"""First-person sentences told of their speaker: "I only drink green tea now" -> "Ann only drinks ...".

A memory extracted from a turn must stay true when read outside its session, so the speaker's
"I" becomes their name and the verb agrees with it. Which word after "I" is the verb, and its
third person, come from `lemminflect`'s English lexicon (shipped in its package): words before
the verb that cannot be verbs ("only", "kinda", "really") are kept as they are, as are verbs in
the past ("moved") or modals ("will"). A verb whose past is its present ("quit", "put", "read")
is taken as past when the sentence says so ("last week", "yesterday", "ago", "just").
"""

from __future__ import annotations

import re
from functools import lru_cache

from lemminflect import getAllLemmas, getInflection

_SUBJECT = re.compile(r"\bI\b(?:(?P<apostrophe>['\u2019])(?P<contraction>m|ve|ll|d)\b)?")
_NEXT_WORD = re.compile(r"(?P<space>\s+)(?P<word>[A-Za-z][A-Za-z'\u2019-]*)")
_CONTRACTIONS = {"m": "is", "ve": "has", "ll": "will", "d": "would"}
# Negated auxiliaries, which lemminflect does not know: their third person.
_NEGATED = {"don't": "doesn't", "dont": "doesn't", "haven't": "hasn't", "havent": "hasn't", "am": "is"}
_MODALS = frozenset(
    [
        "will",
        "would",
        "can",
        "could",
        "should",
        "might",
        "must",
        "shall",
        "may",
        "can't",
        "cannot",
        "couldn't",
        "won't",
        "wouldn't",
        "shouldn't",
        "mustn't",
        "didn't",
        "wasn't",
        "weren't",
    ]
)
_PAST_SAID = re.compile(
    r"\b(?:yesterday|ago|last|earlier|previously|already|just|finally|recently|back in|in (?:19|20)\d\d)\b", re.I
)
# How many words after "I" are looked at for the verb ("I kind of only really like ...").
_MAX_MODIFIERS = 4


@lru_cache(maxsize=4096)
def _readings(word: str) -> dict[str, tuple[str, ...]]:
    return dict(getAllLemmas(word.lower()))


def _verb_lemma(word: str) -> str | None:
    readings = _readings(word)
    lemmas = readings.get("VERB") or readings.get("AUX")
    return lemmas[0] if lemmas else None


def _is_modifier(word: str, following: str | None) -> bool:
    """A word between "I" and the verb: not a verb at all ("only", "kinda"), or an adverb that
    could be one, followed by a verb ("still drink", "even ran")."""
    low = word.lower().replace("\u2019", "'")
    if low in _NEGATED or low in _MODALS:
        return False
    if _verb_lemma(word) is None:
        return True
    return "ADV" in _readings(word) and following is not None and _verb_lemma(following) is not None


def _third_person(verb: str, past_said: bool) -> str:
    low = verb.lower().replace("\u2019", "'")
    if low in _NEGATED:
        return _NEGATED[low]
    lemma = _verb_lemma(low)
    if low in _MODALS or lemma is None:
        return verb
    if low != lemma:
        return verb  # already inflected: "moved", "went", "been"
    past = getInflection(lemma, "VBD")
    if past and low in past and past_said:
        return verb  # "quit" said of last week
    present = getInflection(lemma, "VBZ")
    return present[0] if present else verb


def _told(sentence: str, name: str) -> str:
    past_said = bool(_PAST_SAID.search(sentence))
    out: list[str] = []
    at = 0
    for m in _SUBJECT.finditer(sentence):
        out.append(sentence[at : m.start()])
        at = m.end()
        if m.group("contraction"):
            out.append(f"{name} {_CONTRACTIONS[m.group('contraction')]}")
            continue
        words = []
        cursor = at
        for _ in range(_MAX_MODIFIERS + 1):
            nxt = _NEXT_WORD.match(sentence, cursor)
            if nxt is None:
                break
            words.append(nxt)
            cursor = nxt.end()
        out.append(name)
        for k, w in enumerate(words):
            following = words[k + 1].group("word") if k + 1 < len(words) else None
            if k < _MAX_MODIFIERS and _is_modifier(w.group("word"), following):
                continue
            out.append(sentence[at : w.start("word")])
            out.append(_third_person(w.group("word"), past_said))
            at = w.end()
            break
    out.append(sentence[at:])
    return "".join(out)


def as_said_by(sentence: str, name: str) -> str:
    """A first-person sentence told of `name`: "I love my cats" -> "Melanie loves Melanie's cats"."""
    sentence = _told(sentence, name)
    sentence = re.sub(r"\b(?:my|mine)\b", f"{name}'s", sentence, flags=re.IGNORECASE)
    return re.sub(r"\b(?:me|myself)\b", name, sentence)
