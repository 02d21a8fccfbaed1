"""How the user wants the assistant to behave (the interaction contract): the offline rules.

An instruction is a directive about the assistant's own conduct: what language it answers in,
what it calls the user, how long its replies are, its tone, format, units, emojis ("answer in
German", "call me Sam", "keep it short", "no emojis please"), or a standing rule stated with
"always", "never" or "from now on". Each names the aspect of conduct it sets and the value it
sets it to, so that a later instruction about the same aspect replaces it
(`facts.find_conflict`) while instructions about different aspects add up.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_LANGUAGES = (
    "english|german|spanish|french|italian|portuguese|dutch|swedish|norwegian|danish|finnish|polish|czech|"
    "greek|turkish|russian|ukrainian|arabic|hebrew|hindi|bengali|urdu|chinese|mandarin|cantonese|japanese|"
    "korean|vietnamese|thai|indonesian|malay|tagalog|swahili|catalan|basque|welsh|irish|romanian|hungarian|"
    "croatian|serbian|slovak|slovenian|bulgarian|persian|farsi|afrikaans|icelandic|estonian|latvian|lithuanian"
)
# A request, not a report: an imperative, a wish addressed to the assistant, or a standing rule.
_DIRECTIVE = re.compile(
    r"^(?:please\s+|pls\s+|plz\s+|kindly\s+|and\s+)*(?:always|never|don't|do not|dont|stop|quit|avoid|keep|use|"
    r"answer|reply|respond|write|talk|speak|call|address|refer|skip|drop|include|give|switch|stick|go|make|"
    r"let's|lets|no more|no|less|more|only)\b"
    r"|\b(?:from now on|going forward|moving forward|in future|in the future|from here on)\b"
    r"|\b(?:I(?:'d| would)\s+(?:like|prefer|rather|love)|I\s+(?:want|need|prefer|like|expect))\s+(?:it\s+if\s+)?"
    r"(?:\w+\s+){0,2}(?:you|your|replies|answers|responses|messages|explanations)\b"
    r"|\b(?:can|could|would|will)\s+you\s+(?:please\s+|always\s+|just\s+|maybe\s+)*"
    r"(?:answer|reply|respond|write|talk|speak|keep|use|stop|call|address|switch|stick|go|make|avoid|skip)\b"
    # A directive opening a clause after a lead-in ("quick thing: please always ...", "ok, call me Sam").
    r"|[:;,]\s*(?:please\s+|pls\s+)?(?:always|never|call|address|answer|reply|respond|write|talk|speak|use|keep)\b"
    # Lifting one ("you don't need to convert units anymore", "no need to be formal"), or allowing
    # one ("you can go with Chi", "Fahrenheit and miles are fine").
    r"|\byou\s+(?:don't|do not|dont|no longer)\s+(?:need|have)\s+to\b|\bno need to\b"
    r"|\byou\s+can\s+(?:just\s+)?(?:go with|use|call)\b"
    r"|\b(?:is|are|'s)\s+(?:fine|ok|okay|good)(?:\s+(?:by me|with me|for me|now))?\s*[.!]?$",
    re.IGNORECASE,
)
# What the assistant's conduct is about, each with the words that set it: the value is what
# the first named group captured (or the matched word), compared case-blind.
_ASPECTS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (aspect, re.compile(pattern, re.IGNORECASE))
    for aspect, pattern in (
        (
            "language",
            rf"\b(?:in|into|to|with)\s+(?P<value>{_LANGUAGES})\b|"
            rf"(?<!my )\b(?P<value2>{_LANGUAGES})\s+(?:is|'s)\s+(?:fine|ok|okay|good|preferred)\b|"
            rf"\b(?P<value3>{_LANGUAGES})\s+(?:please|only|from now on|again)\b",
        ),
        (
            "form of address",
            r"\b(?:calls?|address|refer to)\s+me\s+(?:as\s+)?(?P<value>(?:(?:Dr|Mr|Mrs|Ms|Prof)\.?\s+)?[A-Za-z][\w'-]*)"
            r"|\bcall me\b",
        ),
        ("emoji", r"\b(?P<value>emojis?|emoticons?|smileys?)\b"),
        (
            "length",
            r"\b(?P<value>short|shorter|brief|briefer|concise|succinct|long|longer|lengthy|detailed|in detail|"
            r"one[- ]liners?|to the point|wordy|verbose|tl;?dr)\b",
        ),
        (
            "tone",
            r"\b(?P<value>formal|informal|casual|friendly|professional|polite|blunt|direct|gentle|sarcas\w*|jokes?|"
            r"humou?r|swear\w*|profanity|cheerful|serious)\b",
        ),
        (
            "format",
            r"\b(?P<value>bullet(?:ed)?(?: points?| lists?)?|bullets|tables?|markdown|headings?|headers?|numbered|"
            r"plain text|code blocks?|paragraphs?)\b",
        ),
        (
            "units",
            r"\b(?P<value>metric|imperial|celsius|fahrenheit|centigrade|kilomet\w+|miles|kilos?|kg|pounds|lbs|"
            r"24[- ]hour|12[- ]hour|am/pm)\b",
        ),
    )
)
# A standing rule about anything else ("never suggest restaurants with loud music"); "don't" and
# "stop" only when said to the assistant ("don't forget the milk" is a reminder).
_STANDING = re.compile(
    r"^(?:please\s+)?(?:always|never|don't ever|do not ever)\b|\b(?:from now on|going forward|moving forward|"
    r"from here on)\b",
    re.IGNORECASE,
)
_STOP = re.compile(r"^(?:please\s+)?(?:don't|do not|dont|stop)\b", re.IGNORECASE)
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'll|I'd)\b")
_TO_ASSISTANT = re.compile(r"\b(?:you|your|reply|replies|answer|answers|response|responses|message|messages)\b", re.I)
_NEGATION = re.compile(
    r"\b(?:no|not|never|don't|dont|do not|stop|quit|avoid|skip|drop|without|less|fewer|no more|any ?more)\b", re.I
)
# Values of one aspect that say the same thing ("short" and "brief"; "kilos" and "kg").
_SAME = {
    "length": {
        "shorter": "short",
        "brief": "short",
        "briefer": "short",
        "concise": "short",
        "succinct": "short",
        "to the point": "short",
        "one-liner": "short",
        "one liner": "short",
        "one-liners": "short",
        "one liners": "short",
        "tldr": "short",
        "tl;dr": "short",
        "longer": "long",
        "lengthy": "long",
        "detailed": "long",
        "in detail": "long",
        "wordy": "long",
        "verbose": "long",
    },
    "emoji": {"emoji": "emoji", "emojis": "emoji", "emoticon": "emoji", "emoticons": "emoji", "smiley": "emoji"},
    "units": {
        "celsius": "metric",
        "centigrade": "metric",
        "kilo": "metric",
        "kilos": "metric",
        "kg": "metric",
        "fahrenheit": "imperial",
        "miles": "imperial",
        "pounds": "imperial",
        "lbs": "imperial",
    },
    "tone": {"informal": "casual", "friendly": "casual", "cheerful": "casual", "professional": "formal"},
    "language": {"mandarin": "chinese", "farsi": "persian"},
}


class Instruction(NamedTuple):
    """What an instruction sets: an aspect of the assistant's conduct, its value, and whether the
    instruction asks for it (False) or against it (True: "no emojis")."""

    aspect: str
    value: str
    negated: bool


def instruction_of(sentence: str) -> Instruction | None:
    """The instruction a sentence of the user's gives the assistant, if it gives one."""
    text = sentence.strip()
    if not text or (text.endswith("?") and not re.search(r"\b(?:can|could|would|will) you\b", text, re.I)):
        return None
    directive = bool(_DIRECTIVE.search(text))
    negated = bool(_NEGATION.search(text))
    for aspect, pattern in _ASPECTS:
        m = pattern.search(text)
        if m is None:
            continue
        if aspect == "language":
            # "in German" wants a directive ("answer in German"); "German is fine" is one.
            if m.group("value") and not directive:
                continue
            raw = next(g for g in m.groups() if g).lower()
            return Instruction(aspect, _SAME[aspect].get(raw, raw), False)
        if not directive:
            continue
        if aspect == "form of address":
            value = (m.group("value") or "").lower()
            return Instruction(aspect, value, False) if value else None
        raw = m.group("value").lower()
        value = _SAME.get(aspect, {}).get(raw, raw)
        if aspect == "units" and value not in {"metric", "imperial"}:
            value = raw
        if aspect == "length" and value not in {"short", "long"}:
            value = "short"
        return Instruction(aspect, value, negated if aspect in {"emoji", "format", "tone"} else False)
    said_to_assistant = bool(_TO_ASSISTANT.search(text))
    if _FIRST_PERSON.search(text) and not said_to_assistant:
        return None  # "from now on I'm vegan" states something of the user's
    if _STANDING.search(text) or (_STOP.search(text) and said_to_assistant):
        return Instruction("standing rule", " ".join(text.lower().split()), negated)
    return None
