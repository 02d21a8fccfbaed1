"""Rule-based need detection: the nine signals of seed 002 and what a message refers back to."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from memsvc.llm.text import WEAK_WORDS, content_words, named_entities

NEEDS = (
    "ambiguity",
    "contradiction",
    "follow_up_failure",
    "loop",
    "high_stakes",
    "mode_shift",
    "frustration",
    "sensitive_context",
    "under_specified",
)


def _rx(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(rf"(?:{p})" for p in patterns), re.IGNORECASE)


_RULES: dict[str, re.Pattern[str]] = {
    "ambiguity": _rx(
        r"\b(?:that|this|the)\s+(?:thing|one|stuff|place|guy|person|idea|issue)\b",
        r"\bwhich one\b",
        r"\bor (?:the )?other\b",
        r"\bnot sure (?:which|what|if)\b",
        r"\byou know (?:the|that|what)\b",
    ),
    "contradiction": _rx(
        r"\bbut (?:i|you) (?:thought|said)\b",
        r"\bthat'?s not (?:right|true|what)\b",
        r"(?:^|[.!?]\s*)actually,",
        r"\bno longer\b",
        r"\bnot anymore\b",
        r"\bchanged my mind\b",
        r"\binstead of\b",
        r"\bi was wrong\b",
        r"\bcontradict",
    ),
    "follow_up_failure": _rx(
        r"\b(?:did ?n[o']?t|does ?n[o']?t|do ?n[o']?t|won'?t|never) (?:work|help)",
        r"\bno luck\b",
        r"\bstill (?:not|can'?t|cannot|having|getting|struggling|the same)\b",
        r"\b(?:tried|followed|did) (?:that|it|your|what you)\b",
        r"\bdid (?:that|it|this) (?:\w+ )?(?:work|help)\b",
        r"\b(?:actually|really) work(?:ed)?\b",
        r"\bmade (?:it|things) worse\b",
    ),
    "loop": _rx(
        r"\bagain\b",
        r"\bkeep (?:having|getting|asking|coming|forgetting)\b",
        r"\bevery time\b",
        r"\bas i (?:said|mentioned)\b",
        r"\bsame (?:problem|issue|question|thing)\b",
        r"\bonce more\b",
        r"\bhow many times\b",
        r"\bback to\b",
    ),
    "high_stakes": _rx(
        r"\b(?:doctor|surgery|diagnos\w*|medication|dosage|dose|allerg\w*|symptom\w*|hospital|emergency)\b",
        r"\b(?:lawyer|lawsuit|court|contract|visa|immigration|custody)\b",
        r"\b(?:mortgage|invest\w*|loan|debt|tax(?:es)?|savings|retirement)\b",
        r"\b(?:urgent|deadline|interview|wedding|pregnan\w*|funeral|exam)\b",
        r"\b(?:really|very|extremely) important\b",
    ),
    "mode_shift": _rx(
        r"\bfrom now on\b",
        r"\bstop (?:doing|asking|saying|giving)\b",
        r"\bjust (?:give|tell|show) me\b",
        r"\bbe (?:more|less) (?:brief|concise|detailed|formal|casual)\b",
        r"\b(?:don'?t|do not) (?:ask|explain|remind)\b",
        r"\bswitch (?:to|topics?)\b",
        r"\blet'?s (?:talk about|change|switch|move on)\b",
        r"\bin (?:the )?future,? (?:please )?(?:always|never|don'?t)\b",
    ),
    "frustration": _rx(
        r"\b(?:ugh+|argh+|ffs|wtf)\b",
        r"\bfrustrat\w*",
        r"\bannoy\w*",
        r"\b(?:sick|tired) of\b",
        r"\bwhy (?:won'?t|can'?t|doesn'?t|isn'?t)\b",
        r"\b(?:useless|ridiculous|hopeless|pointless)\b",
        r"[!?]{2,}",
        r"\bfor the (?:last|third|fourth|hundredth) time\b",
    ),
    "sensitive_context": _rx(
        r"\b(?:therap\w*|depress\w*|anxiety|panic attack|trauma|suicid\w*|self[- ]harm|grief|griev\w*)\b",
        r"\b(?:salary|income|debt|bankrupt\w*|divorce|affair|abuse\w*)\b",
        r"\b(?:lgbtq?\+?|gay|lesbian|transgender|trans woman|trans man|queer|coming out|sexual\w*)\b",
        r"\b(?:religio\w*|church|mosque|synagogue|faith)\b",
        r"\b(?:password|social security|ssn|bank account|medical record)\b",
        r"\b(?:diagnos\w*|illness|cancer|hiv|disabilit\w*|pregnan\w*|miscarriage)\b",
    ),
    "under_specified": _rx(
        r"^\s*(?:any (?:ideas|suggestions|thoughts)|what should i do|help me|what do you think|thoughts)\W*$",
        r"\b(?:recommend|suggest) (?:something|anything)\b",
        r"\bsomething (?:good|fun|nice|new)\b",
    ),
}
# The user refers to something the assistant said: the memory sought is an assistant turn.
_CALLBACK = _rx(
    r"\byou (?:suggest|recommend|advis|propos|mention|said|told|gave|came up)\w*\b",
    r"\byour (?:suggestion|recommendation|advice|idea|tip|plan)\b",
    r"\bthat (?:thing|idea|tip|trick|plan) you\b",
)
_PRONOUN_ONLY = re.compile(r"\b(?:it|that|this|they|them|he|she|him|her|those|these)\b", re.IGNORECASE)
# A question whose answer gathers several things, often said at different times: "what has she
# painted?", "where has he camped?", "how many times...", "what events has she been to?".
_LIST_INTENT = _rx(
    # "each" and "every" gather, unless they say how often ("each week", "every morning").
    r"\b(?:list|all|everything)\b|\b(?:every|each)\b(?!\s+(?:day|week|month|year|morning|evening|night|"
    r"weekend|weekday|time|other|few)s?\b)",
    r"\bwhat (?:are|were) (?:some|the)\b",
    r"\bwhat (?:kinds?|types?|things|activities|hobbies|books|places)\b",
    r"\bwhich \w+s\b",
    r"\bhow many (?:times|\w+s)\b",
    r"\bin what ways\b",
    r"\b(?:what|where|which|who)\b(?:\s+\S+){0,5}?\s+(?:has|have)\s+\w+(?:\s+\w+)?\s+(?:\w+ed|been|gone|done|seen|read|made|taken|given|won|met)\b",
    r"\bwhat (?:\w+ )?\w+s (?:has|have|does|do|did)\b",
)


@dataclass(frozen=True)
class NeedReport:
    """Signals found in a message, with the words that triggered each."""

    needs: dict[str, str] = field(default_factory=dict)
    callback: bool = False
    list_intent: bool = False

    def has(self, need: str) -> bool:
        return need in self.needs

    @property
    def wants_assistant_turns(self) -> bool:
        """Whether the answer is likely something the assistant itself said or recommended."""
        return self.callback or self.has("follow_up_failure")


def detect_needs(message: str, recent_turns: tuple[str, ...] = ()) -> NeedReport:
    found: dict[str, str] = {}
    for need, pattern in _RULES.items():
        m = pattern.search(message)
        if m:
            found[need] = m.group(0).strip()
    specific = [w for w in content_words(message) if w not in WEAK_WORDS]
    if "under_specified" not in found and not specific and not named_entities(message):
        found["under_specified"] = f"{len(specific)} specific word(s)"
    if "ambiguity" not in found and not recent_turns and _PRONOUN_ONLY.search(message) and len(specific) <= 2:
        found["ambiguity"] = "refers back without context"
    callback = bool(_CALLBACK.search(message))
    return NeedReport(
        needs={n: found[n] for n in NEEDS if n in found},
        callback=callback,
        list_intent=bool(_LIST_INTENT.search(message)),
    )
