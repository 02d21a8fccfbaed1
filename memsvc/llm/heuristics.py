"""Offline stand-ins for every LLM decision: query synthesis, variations, routing, sufficiency."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from lemminflect import getAllLemmas, getInflection

from memsvc.llm.text import (
    STOPWORDS,
    WEAK_WORDS,
    content_words,
    extract_keywords,
    normalise,
    salient_terms,
    stem,
    stems,
)

_TRIVIAL = re.compile(
    r"^\s*(?:hi|hey|hello|yo|hiya|thanks|thank you|thx|ty|ok|okay|k|cool|nice|great|awesome|sure|yes|yeah|yep|no|"
    r"nope|bye|goodbye|see you|good (?:morning|night|evening|afternoon)|lol|haha|got it|sounds good|perfect|"
    r"alright|all right|np|no problem|welcome|you too|me too|same)(?:\s+(?:there|so much|a lot|again|then|!))*"
    r"[\s!.?,:)(]*$",
    re.IGNORECASE,
)
_QUESTION_LEAD = re.compile(
    r"^\s*(?:(?:what|where|when|who|whom|which|why|how)(?:\s+(?:kind|type|sort)\s+of\s+\w+)?"
    r"(?:\s+(?:is|are|was|were|do|does|did|can|could|should|would|will|has|have|had|much|many|long|often))?|"
    r"(?:do|does|did|is|are|was|were|can|could|have|has|had)\s+(?:i|you|we)(?:\s+ever)?)\s+",
    re.IGNORECASE,
)
# A question about what was true before a change ("where did I live before I moved?", "what did
# I use to drink?", "which company was I at previously?"). "How old" asks an age.
_ABOUT_THE_PAST = re.compile(
    r"\b(?:before|used to|use to|previous(?:ly)?|former(?:ly)?|originally|at first|in the past|back when|"
    r"back then|(?<!how )old|older|earlier|prior|no longer|any ?more|last time|ex)\b",
    re.IGNORECASE,
)


def asks_about_the_past(query: str) -> bool:
    """Whether `query` asks what was true before a change rather than what is true now."""
    return bool(_ABOUT_THE_PAST.search(query))


_PRESENT_CUE = re.compile(
    r"\b(?:now|currently|these days|at the moment|nowadays|still|right now|at present|any more|anymore|"
    r"at this point|at this stage|as things stand|at the minute|presently)\b",
    re.I,
)
_PRESENT_VERB = re.compile(
    r"\b(?:is|are|am|do|does|don't|doesn't|have|has|can|should|must)\b|['\u2019](?:s|re|m)\b", re.IGNORECASE
)
_PAST_VERB = re.compile(r"\b(?:did|was|were|had|went|used)\b", re.IGNORECASE)
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|my|me|mine)\b", re.IGNORECASE)


def asks_about_the_present(query: str) -> bool:
    """Whether `query` asks what holds now: it says so ("What is Jon currently reading?", "...
    these days?"), or the user asks about their own state in the present tense ("Where do I
    live?", "What's my rent?"), as an assistant's queries do. Not what happened ("When did I
    move?"), what held before, or a third person's story told in the present tense."""
    if asks_about_the_past(query):
        return False
    if _PRESENT_CUE.search(query):
        return True
    return bool(_FIRST_PERSON.search(query)) and in_the_present_tense(query)


def in_the_present_tense(query: str) -> bool:
    """Whether `query` is asked in the present tense ("What food is Mila on?", "What music helps
    me focus?"), whoever it is about."""
    if _PAST_VERB.search(query) or asks_about_the_past(query):
        return False
    if _PRESENT_VERB.search(query):
        return True
    # No auxiliary: a verb in its third-person form, and none in the past ("What music helps
    # me focus?", not "Which song helps that I played?").
    words = re.findall(r"[a-z]+", query.lower())
    return any(_inflected_as(w, "VBZ") for w in words) and not any(_inflected_as(w, "VBD") for w in words)


def _inflected_as(word: str, tag: str) -> bool:
    """Whether `word` is a verb's `tag` form (Penn tags: "VBZ" helps, "VBD" helped) and not its lemma."""
    return any(word != lemma and word in getInflection(lemma, tag) for lemma in getAllLemmas(word).get("VERB", ()))


# Cues of a multi-hop question: an entity described by a relation to another one.
_CHAIN = re.compile(
    r"\b(?:the|a|that)\s+(?:\w+\s){0,2}?(?:person|one|guy|man|woman|friend|people|place|company|restaurant|"
    r"book|city|team|colleague|doctor|someone|somebody)\s+(?:who|that|which|whose|where|i|we|you)\s+\w+|"
    r"\b(?:who|whom)\s+(?:recommended|suggested|introduced|told|gave|sold|met|invited|hired)\b.*\?.*|"
    r"\b\w+'s\s+\w+'s\b|"
    r"\bthe\s+\w+\s+of\s+(?:the|my|his|her|their)\s+\w+\s+of\b|"
    r"\b(?:the|my)\s+\w+\s+of\s+(?:the|my)\s+(?:person|one|guy|woman|man)\b",
    re.IGNORECASE,
)
_CONJ_SPLIT = re.compile(
    r"\s*(?:;|\?\s+(?=\S)"
    r"|,?\s+and\s+(?:also\s+)?(?=(?:what|where|when|who|how|which|did|do|does|is|are|was|were)\b)"
    r"|,?\s+as well as\s+|,?\s+and also\s+)",
    re.IGNORECASE,
)
_ENTITY_AND = re.compile(r"\b([A-Z][\w'-]+)\s+(?:and|&)\s+([A-Z][\w'-]+)\b")


_REFERS_BACK = re.compile(r"\b(?:it|that|this|they|them|he|she|him|her|there|those|these)\b", re.IGNORECASE)


def is_trivial(message: str, has_context: bool = False) -> bool:
    """Greetings, acknowledgements and anything under 10 characters need no synthesis (seed 000).

    A message without content words is trivial too, unless recent turns can give it a subject.
    """
    text = message.strip()
    if len(text) < 10 or _TRIVIAL.match(text):
        return True
    return not content_words(text) and not has_context


def declarative(query: str) -> str:
    """The question without its question words, closer to how a memory states the fact."""
    text = _QUESTION_LEAD.sub("", query.strip(), count=1).rstrip(" ?.!")
    return text if len(text.split()) >= 2 else query.strip().rstrip("?")


def _topic(query: str) -> str:
    kw = extract_keywords(query)
    if kw.entities:
        return kw.entities[0]
    possessive = re.search(r"\b(my|our)\s+([a-z-]+)(?:\s+([a-z-]+))?", query, re.IGNORECASE)
    if possessive and normalise(possessive.group(2)) not in STOPWORDS:
        words = [possessive.group(1), possessive.group(2)]
        if possessive.group(3) and normalise(possessive.group(3)) not in STOPWORDS:
            words.append(possessive.group(3))
        return " ".join(words)
    return " ".join(kw.specific_terms[:2])


def synthesize_questions(message: str, recent_turns: Sequence[str], count: int) -> list[str]:
    """Auxiliary questions from the message and recent turns: keywords, topic, conversation context."""
    if count <= 0 or is_trivial(message, bool(recent_turns)):
        return []
    kw = extract_keywords(message)
    out: list[str] = []
    context_terms: list[str] = []
    if recent_turns:
        context_terms = salient_terms(list(reversed(recent_turns[-3:])), kw.terms, limit=3)
    keyword_query = kw.query()
    if context_terms and (len(kw.specific_terms) <= 1 or _REFERS_BACK.search(message)):
        # A short or pronoun-led message leans on the conversation for its subject.
        keyword_query = " ".join([keyword_query, *context_terms]).strip()
    if keyword_query:
        out.append(keyword_query)
    topic = _topic(message)
    if topic:
        out.append(f"What has the user said about {topic}?")
    if context_terms:
        out.append(f"What does the user know about {' '.join(context_terms)}?")
    statement = declarative(message)
    if statement.lower() != message.strip().lower().rstrip("?"):
        out.append(statement)
    return _distinct(out, [message])[:count]


def variations(query: str) -> list[str]:
    """Seed 001 offline: keyword extraction, statement rephrase, scope shift; none if already specific."""
    kw = extract_keywords(query)
    words = query.split()
    filler = sum(1 for w in words if normalise(w.strip("?,.!")) in STOPWORDS)
    if not kw.specific_terms and not kw.entities:
        return []
    if len(words) <= 4 and filler <= 1:
        return []  # already specific and well-formed
    out = [kw.query(), declarative(query)]
    broader = " ".join(
        [*kw.entities[:1], *[t for t in kw.specific_terms if t not in {normalise(e) for e in kw.entities}][:2]]
    )
    out.append(broader)
    return _distinct(out, [query])[:3]


def _distinct(candidates: Sequence[str], existing: Sequence[str]) -> list[str]:
    """Candidates that differ, as normalised text, from each other and from `existing`."""
    seen = {_norm_text(e) for e in existing}
    out: list[str] = []
    for c in candidates:
        c = c.strip()
        key = _norm_text(c)
        if not key or key in seen:
            continue
        seen.add(key)
        out.append(c)
    return out


def _norm_text(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9']+", text.lower()))


def route(query: str) -> tuple[str, str]:
    """Pick an agent tool (seed 003): chain_of_query, split_query or direct, with the reason."""
    m = _CHAIN.search(query)
    if m:
        return "chain_of_query", f"relation chain {m.group(0).strip()!r}"
    parts = split_query(query)
    if len(parts) > 1:
        return "split_query", f"{len(parts)} independent parts"
    return "direct", "a single fact"


def split_query(query: str) -> list[str]:
    """Independent sub-queries: separate questions, clauses joined by `and`, or `A and B` subjects."""
    parts = [p.strip(" ,") for p in _CONJ_SPLIT.split(query) if p and p.strip(" ,?")]
    parts = [p for p in parts if len([w for w in content_words(p) if w not in WEAK_WORDS]) >= 1]
    if len(parts) > 1:
        return parts[:4]
    m = _ENTITY_AND.search(query)
    if m and all(normalise(g) not in STOPWORDS for g in m.groups()):
        return [query[: m.start()] + name + query[m.end() :] for name in m.groups()]
    return [query]


def key_terms(query: str) -> list[str]:
    """Stems a complete answer should mention: named entities and specific content words."""
    kw = extract_keywords(query)
    return list(dict.fromkeys(stem(t) for t in kw.key_terms if t not in WEAK_WORDS))


@dataclass(frozen=True)
class Judgement:
    """A sufficiency check: whether the evidence answers the query, and what to ask next."""

    sufficient: bool
    confidence: float
    next_query: str
    missing: tuple[str, ...]


def judge_evidence(
    query: str, hops: Sequence[Sequence[str]], is_chain: bool, threshold: float, issued: Sequence[str]
) -> Judgement:
    """Do the top hits of each hop cover the query's key terms? If not, build the next hop.

    A later hop only counts when its memory mentions a bridge term found by an earlier hop
    (pseudo-relevance feedback), so a distractor that happens to share a word does not close a chain.
    """
    keys = key_terms(query)
    if not keys:
        return Judgement(True, 1.0, "", ())
    covered: set[str] = set()
    bridges: list[str] = []
    for hop, texts in enumerate(hops):
        hop_bridges: list[str] = []
        for text in texts[:3]:
            words = stems(text)
            if hop > 0 and bridges and not any(stem(b) in words or normalise(b) in text.lower() for b in bridges):
                continue
            hit = {k for k in keys if k in words}
            if hit or hop > 0:
                covered |= hit
        if texts:
            best = max(texts[:3], key=lambda t: len({k for k in keys if k in stems(t)}))
            hop_bridges = salient_terms([best], [*keys, *content_words(query)], limit=2)
        bridges.extend(b for b in hop_bridges if b not in bridges)
    confidence = len(covered) / len(keys)
    if is_chain and len(hops) < 2:
        # One hop rarely closes a relation chain: the bridging entity still has to be followed.
        confidence = min(confidence, 0.6)
    missing = tuple(k for k in keys if k not in covered)
    sufficient = confidence >= threshold
    next_query = ""
    if not sufficient:
        missing_words = [w for w in content_words(query) if stem(w) in missing] or list(missing)
        latest = bridges[-2:] if bridges else []
        candidate = " ".join([*latest, *missing_words]).strip()
        if is_chain and not missing_words:
            candidate = " ".join([*latest, *content_words(query)[-2:]])
        if candidate and candidate.lower() not in {q.lower() for q in issued}:
            next_query = candidate
    return Judgement(sufficient, round(confidence, 3), next_query, missing)
