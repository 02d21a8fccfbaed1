"""What a conversation's turns state, as memories: the extractor contract and the offline rules.

An extractor reads a batch of turns and proposes memories, each naming the turns it came from.
The rules extract only what they reliably can: first-person statements of preference, identity,
relation, plan and decision, and advice given to the other party. A named speaker's "I" becomes
the name ("Melanie loves pottery"), so a memory stays true when read outside its session, and
relative dates are resolved against the time the turn was said.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from memsvc.deadline import Deadline
from memsvc.domain.models import Memory, MemoryKind, Role, SpokenTurn
from memsvc.llm.dates import resolve_date_phrase
from memsvc.llm.text import EMOJI, sentences
from memsvc.pipeline.write.instructions import instruction_of
from memsvc.pipeline.write.third_person import as_said_by


@dataclass(frozen=True)
class StoredTurn:
    """A turn of the session as stored: its evidence memory's id and the time it was said."""

    memory_id: str
    turn: SpokenTurn
    at: float
    # The turn only acknowledges or reacts ("Splendid. I will look for one."): nothing to extract.
    acknowledgement: bool = False


@dataclass(frozen=True)
class ExtractedMemory:
    content: str
    kind: MemoryKind
    role: Role
    source_ids: tuple[str, ...]
    # What the extractor decided against the user's related memories (the LLM's decision; the
    # rules leave both empty and the write path's review decides): the id of the memory this
    # one replaces, or of the memory it only repeats.
    updates: str = ""
    repeats: str = ""


class ExtractorKind(StrEnum):
    LLM = "llm"
    RULES = "rules"
    RULES_AFTER_LLM_FAILURE = "rules_after_llm_failure"
    NONE = "none"


@dataclass(frozen=True)
class Extraction:
    memories: tuple[ExtractedMemory, ...]
    extractor: ExtractorKind
    reason: str = ""
    llm_tokens: int = 0


class TurnExtractor(Protocol):
    # Whether `extract` reads the user's related memories (the caller looks them up only then).
    reads_related: bool

    async def extract(
        self,
        turns: Sequence[StoredTurn],
        context: Sequence[StoredTurn],
        deadline: Deadline,
        related: Sequence[Memory] = (),
    ) -> Extraction:
        """Memories stated by `turns`; `context` holds the session's turns just before them,
        `related` the user's stored memories nearest to them (to update or repeat)."""
        ...


# -- the offline rules ------------------------------------------------------------------------

_LEAD = re.compile(
    r"^(?:(?:oh|ah|yeah|yes|yep|well|so|wow|haha|hey|hi|honestly|actually|btw|by the way|and|but|also|plus|"
    r"anyway|omg|ok|okay|sure|right|true|totally|exactly|definitely|thanks|thank you)\b[\s,!.:-]*)+",
    re.IGNORECASE,
)
_FEELING = r"(?:love|like|enjoy|prefer|adore|hate|dislike|can't stand|cannot stand)"
_ADVERBS = (
    r"(?:(?:really|absolutely|just|totally|also|still|truly|honestly|definitely|finally|recently|actually|"
    r"already|kind of|sort of|kinda|sorta|only|mostly|generally|usually|typically|normally|genuinely|seriously|"
    r"secretly|personally|especially|particularly|do|don't|do not|now|currently)\s+)*"
)
_RELATIONS = (
    r"name|wife|husband|partner|boyfriend|girlfriend|fianc[ée]e?|son|daughter|kids?|children|child|mom|mum|mother|"
    r"dad|father|sister|brother|siblings?|friend|best friend|dog|cat|puppy|kitten|pets?|family|parents|"
    r"grand(?:ma|mother|pa|father|parents)|job|boss|team|company|home|house|hometown|birthday|favou?rite \w+"
)
_RULES: tuple[tuple[re.Pattern[str], MemoryKind], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), kind)
    for pattern, kind in (
        (rf"^I\s+{_ADVERBS}{_FEELING}\b", MemoryKind.PREFERENCE),
        (
            r"^I(?:'m| am)\s+(?:a\s+)?(?:big\s+|huge\s+)?(?:fan of|into|passionate about|obsessed with)\b",
            MemoryKind.PREFERENCE,
        ),
        (r"^my\s+favou?rite\b", MemoryKind.PREFERENCE),
        (
            rf"^I(?:'ve| have)\s+{_ADVERBS}(?:decided|chosen|picked|opted)\b|"
            rf"^I\s+{_ADVERBS}(?:decided|chose|picked|opted)\b",
            MemoryKind.DECISION,
        ),
        (
            r"^I(?:'m| am)\s+(?:going|planning|hoping|about|thinking of|considering|looking forward)\b|"
            r"^I\s+(?:plan|intend|want|hope|promise|need)\s+to\b|^I(?:'ll| will)\b",
            MemoryKind.COMMITMENT,
        ),
        (
            r"^I(?:'m| am|'ve been| have been)\s+(?:an?\s+(?!bit\b|little\b|lot\b)\w+|from\b|\d+\s+years?\s+old|"
            r"married|single|engaged|pregnant|retired|vegan|vegetarian|allergic)|"
            # "we" is the speaker's household ("we moved to Otley", "we adopted a puppy").
            rf"^(?:I|we)\s+{_ADVERBS}(?:live|grew up|was born|work|study|studied|graduated|moved|adopted|joined|"
            r"started|quit|signed up|enrolled|volunteer|teach|own|run)\b|"
            r"^I(?:'ve| have)\s+(?:got\s+)?(?:an?|two|three|four|five|\d+)\s+\w+|^I(?:'ve| have)\s+been\s+\w+ing\b|"
            rf"^my\s+(?:{_RELATIONS})\b",
            MemoryKind.FACT,
        ),
    )
)
# "Try" and "consider" advise only as imperatives: "I'd love to try it" is no advice.
_ADVICE = re.compile(
    r"\b(?:I(?:'d| would)?\s+(?:recommend|suggest)|you\s+(?:should|could|might want to|may want to|ought to)|"
    r"(?:maybe|perhaps)\s+you\s+can|(?:why not|how about)\s+\w+)|^(?:(?:maybe|just)\s+)?(?:try|consider)\s+\w+",
    re.IGNORECASE,
)
# Promises that only manage the conversation ("I'll keep you posted"): nothing to remember.
_CONVERSATION_UPKEEP = re.compile(
    r"\b(?:keep (?:you|u) (?:posted|updated|in the loop)|let (?:you|u) know|reach out|get back to (?:you|u)|"
    r"talk (?:to (?:you|u) )?(?:soon|later)|catch up|see (?:you|u)|keep in touch|stay in touch)\b",
    re.IGNORECASE,
)
# A sentence ending on one of these lacks its object ("I love to.", "I love it!").
_DANGLING = frozenset(
    [
        "to",
        "the",
        "a",
        "an",
        "of",
        "with",
        "for",
        "about",
        "at",
        "on",
        "in",
        "it",
        "that",
        "this",
        "these",
        "those",
        "them",
        "so",
    ]
)
# Something the speaker did; extracted only when the sentence says when.
_EVENT = re.compile(
    r"^(?:I|we)\s+(?:\w+\s+)?(?:\w+ed|went|ran|got|took|made|saw|met|won|bought|had|did|gave|"
    r"wrote|found|read|began|came|left|lost|sold|flew|drove|built|taught|held)\b",
    re.IGNORECASE,
)
_MIN_WORDS = 3
_MAX_CHARS = 400


def _with_dates(text: str, said_at: float) -> str:
    resolved = resolve_date_phrase(text, said_at)
    if resolved is None:
        return text
    phrase, words = resolved
    if words.lower() in phrase.lower():
        return text  # already a date ("since 2015"): nothing to add
    return text.replace(phrase, f"{phrase} ({words})", 1)


# A like or dislike stated of anyone ("Prefers aisle seats", "Mom loves roses").
_LIKES = re.compile(
    r"\b(?:prefers|preferred|loves|likes|enjoys|adores|hates|dislikes|can't stand|cannot stand)\b|"
    r"\bfavou?rite\b",
    re.IGNORECASE,
)


def kind_of(content: str, role: Role) -> MemoryKind:
    """What a memory written without a kind holds, by the rules that extract from turns: an
    instruction to the assistant, a preference, a decision, a commitment, a recommendation the
    assistant gave, else a fact."""
    for sentence in _sentences(content):
        if role is not Role.ASSISTANT and instruction_of(sentence) is not None:
            return MemoryKind.INSTRUCTION
        kind = next((k for pattern, k in _RULES if pattern.search(sentence)), None)
        if kind is None and _LIKES.search(sentence):
            kind = MemoryKind.PREFERENCE
        if kind is None and role is Role.ASSISTANT and _ADVICE.search(sentence):
            kind = MemoryKind.RECOMMENDATION
        if kind is not None and kind is not MemoryKind.FACT:
            return kind
    return MemoryKind.FACT


# A short lead before the statement proper ("Big news, I moved to Manchester", "Quick update:
# my rent went up"): what follows it is what the rules read.
_CLAUSE_LEAD = re.compile(r"^(?:[\w'-]+\s+){0,3}?[\w'-]+[,:;\u2013\u2014-]\s+(?=(?:I|I'm|I've|my|My)\b)")


# A question typed after a statement without its question mark ("my sister just moved to
# denver, whats a good housewarming gift"): it is asked, not stated, so it is left out.
_ASKED_AFTER = re.compile(
    # Not "which", "who", "where" or "when": after a comma they go on about what was named
    # ("I moved to Leeds, where I work").
    r",\s+(?:(?:so|and|but|also)\s+)?(?:what|whats|what's|how|why|any|anything|"
    r"can you|could you|would you|should I|do I|do you|is it|is there|are there)\b.*$|"
    # ... or a yes/no question ("I'm allergic to penicillin, is amoxicillin ok?").
    r",\s+(?:(?:so|and|but|also)\s+)?(?:is|are|was|were|am|can|could|should|would|will|do|does|did)\s+\w.*\?\W*$",
    re.IGNORECASE,
)


# The pronoun as typed on a phone ("im a nurse", "i love it", "ive got two"), as written.
_TYPED_I = re.compile(r"(?<![\w'\u2019])(?:i|im|ive|Im|Ive|i'm|i've|i'll|i'd)(?![\w'\u2019])")
_WRITTEN_I = {"i": "I", "im": "I'm", "ive": "I've"}


def _written_i(match: re.Match[str]) -> str:
    typed = match.group().lower()
    return _WRITTEN_I.get(typed, "I" + typed[1:])


_TRAILING_EMOJI = re.compile(rf"(?:\s*{EMOJI})+$")


def _sentences(content: str) -> list[str]:
    out = []
    for raw in sentences(content):
        sentence = _LEAD.sub("", _TYPED_I.sub(_written_i, raw)).strip()
        sentence = _ASKED_AFTER.sub("", _CLAUSE_LEAD.sub("", sentence))
        sentence = _TRAILING_EMOJI.sub("", sentence)  # the mood it was typed in, no part of the fact
        if sentence and sentence[0].islower() and sentence[:2].lower() in {"i ", "i'", "my"}:
            sentence = sentence[0].upper() + sentence[1:]
        out.append(sentence)
    return out


def _statement(sentence: str) -> bool:
    """A sentence that can stand as a memory: not a question, long enough, and saying what it is about."""
    words = re.sub(r"(?:\s+(?:too|as well|also))+\W*$", "", sentence).split()
    last = re.sub(r"\W", "", words[-1]).lower() if words else ""
    return (
        not sentence.endswith("?")
        and len(sentence.split()) >= _MIN_WORDS
        and len(sentence) <= _MAX_CHARS
        and last not in _DANGLING
        and not _CONVERSATION_UPKEEP.search(sentence)
    )


def rule_memories(turn: StoredTurn, addressee: str) -> list[ExtractedMemory]:
    """What the rules find in one turn; `addressee` is who the turn answers (for advice): a
    named person, or "" for the assistant of a user talking to one."""
    speaker = turn.turn.speaker_name
    role = turn.turn.role
    out: list[ExtractedMemory] = []
    for sentence in _sentences(turn.turn.content):
        if role is Role.USER and not addressee and instruction_of(sentence) is not None:
            # Said to the assistant about its own conduct: kept in the user's words, the way
            # a context block states the contract.
            text = sentence if sentence.endswith((".", "!")) else sentence + "."
            out.append(ExtractedMemory(text[0].upper() + text[1:], MemoryKind.INSTRUCTION, role, (turn.memory_id,)))
            continue
        if not _statement(sentence):
            continue
        kind = next((k for pattern, k in _RULES if pattern.search(sentence)), None)
        if kind is None and _EVENT.search(sentence) and resolve_date_phrase(sentence, turn.at) is not None:
            kind = MemoryKind.EPISODE  # what happened when: worth it only with a date to resolve
        if kind is not None:
            text = sentence
            if speaker:  # "we" is the speaker and others: keep it, say who spoke
                text = (
                    f"{speaker} said: {sentence}"
                    if re.match(r"we\b", sentence, re.I)
                    else as_said_by(sentence, speaker)
                )
        elif _ADVICE.search(sentence) and (role is Role.ASSISTANT or addressee):
            kind = MemoryKind.RECOMMENDATION
            adviser = speaker or ("The assistant" if role is Role.ASSISTANT else "The user")
            text = f"{adviser} recommended{f' to {addressee}' if addressee else ''}: {sentence}"
        else:
            continue
        if not text.endswith((".", "!")):
            text += "."
        text = text[0].upper() + text[1:]  # past a lead left out ("honestly", "so")
        out.append(ExtractedMemory(_with_dates(text, turn.at), kind, role, (turn.memory_id,)))
    return out


class RuleExtractor:
    """The offline extractor: no network, the same answer every time. What updates or repeats a
    stored memory is the write path's review's to decide (claims, near-identical repeats)."""

    reads_related = False

    async def extract(
        self,
        turns: Sequence[StoredTurn],
        context: Sequence[StoredTurn],
        deadline: Deadline,
        related: Sequence[Memory] = (),
    ) -> Extraction:
        return Extraction(tuple(extract_by_rules(turns, context)), ExtractorKind.RULES)


def extract_by_rules(turns: Sequence[StoredTurn], context: Sequence[StoredTurn]) -> list[ExtractedMemory]:
    out: list[ExtractedMemory] = []
    previous = context[-1] if context else None
    for turn in turns:
        addressee = ""
        if previous is not None and previous.turn.speaker_name != turn.turn.speaker_name:
            addressee = previous.turn.speaker_name
        if not turn.acknowledgement:
            out += rule_memories(turn, addressee)
        previous = turn
    return out
