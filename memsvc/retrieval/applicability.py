"""APPLICABILITY (seed 002): need detection, a fused candidate pool, and "does this matter now?" scoring."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from memsvc.deadline import Deadline
from memsvc.domain.models import MemoryKind, RankedMemory, RetentionStatus, Role, utc_from_s
from memsvc.llm.client import Llm
from memsvc.llm.dates import TimeWindow, named_time
from memsvc.llm.heuristics import declarative, split_query
from memsvc.llm.needs import NEEDS, NeedReport, detect_needs
from memsvc.llm.parse import MalformedReply, string_list, unit_float
from memsvc.llm.text import WEAK_WORDS, extract_keywords, normalise, salient_terms, statements, tokens
from memsvc.pipeline.context import QueryInput, QueryMode, QueryPlan, QueryReport, stage_span
from memsvc.pipeline.query.fusion import fuse_lists
from memsvc.pipeline.query.pipeline import Gathered, QueryPipeline
from memsvc.pipeline.query.rank import Ranking, recency_reference
from memsvc.pipeline.query.recall import Candidate
from memsvc.retrieval.base import Evidence, distinct_queries, query_key, recent_block, recent_texts, search_all
from memsvc.stores.lexical.analysis import Analyzer

# Seed 002's final score: applicability dominates, retrieval only corroborates.
W_APPLICABILITY = 0.65
W_RETRIEVAL = 0.15
W_VITALITY = 0.10
W_CONFIRMATION = 0.10
_MAX_QUERIES = 8


@dataclass(frozen=True)
class TermMatcher:
    """Which words of a question a memory contains, matched as the lexical index matches them
    (Snowball stems: "running" is "run"), with hyphenated compounds also joined ("de-stress"
    matches "destress"). The offline estimate used a lighter suffix stripper before, which
    missed irregular stems and compounds the index itself would have matched."""

    analyzer: Analyzer = field(default_factory=Analyzer)

    def of(self, text: str) -> set[str]:
        found = set(self.analyzer.terms(text))
        if "-" in text:
            found.update(self.analyzer.terms(text.replace("-", "")))
        return found

    def one(self, word: str) -> str:
        terms = self.analyzer.terms(word.replace("-", ""))
        return terms[0] if terms else normalise(word)

    def keys(self, query: str) -> list[str]:
        """Stems a complete answer should mention: named entities and specific content words,
        each as the index holds the word it is part of (the keyword reader splits "18th" into
        "18" and "th", the index keeps "18th": no memory holds the parts as terms)."""
        whole = self.whole_words(query)
        return list(
            dict.fromkeys(
                whole.get(normalise(t)) or self.one(t) for t in extract_keywords(query).key_terms if t not in WEAK_WORDS
            )
        )

    def whole_words(self, query: str) -> dict[str, str]:
        """Each piece the keyword reader takes out of a word of `query` that the index keeps whole
        ("18" and "th" of "18th"), with the index's term for the word."""
        out: dict[str, str] = {}
        for word in self.analyzer.tokens(query):
            pieces = tokens(word)
            if pieces != [word]:
                term = self.one(word)
                out.update((p, term) for p in pieces)
        return out

    def compounds(self, query: str) -> dict[str, list[tuple[str, ...]]]:
        """Each key term with the ways a memory may hold it as a hyphenated compound, as parts.

        The lexical index holds "self-care" as "self" and "care"; the plaintext matcher (`of`)
        also joins them, so "selfcare" or "self-care" in a question matched it. A key written with
        a hyphen has its own parts; a single alphabetic word may be any split into two terms
        ("destress": "de" + "stress", "des" + "tress", ...), of which a memory holding both parts
        is taken to hold the compound.
        """
        out: dict[str, list[tuple[str, ...]]] = {}
        names = self.entities(query)  # a name is not a compound: "caro" + "line" is not "Caroline"
        for t in extract_keywords(query).key_terms:
            if t in WEAK_WORDS:
                continue
            ways: list[tuple[str, ...]] = []
            if "-" in t:
                parts = tuple(self.analyzer.terms(t))
                if len(parts) > 1:
                    ways.append(parts)
            elif t.isalpha() and self.one(t) not in names:
                for i in range(2, len(t) - 1):
                    head, tail = self.analyzer.terms(t[:i]), self.analyzer.terms(t[i:])
                    if len(head) == 1 and len(tail) == 1:
                        ways.append((head[0], tail[0]))
            if ways:
                out.setdefault(self.one(t), []).extend(ways)
        return out

    def entities(self, query: str) -> set[str]:
        return {self.one(w) for e in extract_keywords(query).entities for w in e.split()}


@dataclass(frozen=True)
class Hint:
    """A sparse lexical hint: a short phrase and the terms a matching memory must contain."""

    phrase: str
    must_keep: tuple[str, ...]


@dataclass(frozen=True)
class Analysis:
    """What the message needs, how to search for it, and when it happened."""

    needs: NeedReport
    sub_queries: tuple[str, ...]
    hints: tuple[Hint, ...]
    window: TimeWindow | None
    source: str


def analyse_offline(query: str, recent: Sequence[str], now: float) -> Analysis:
    needs = detect_needs(query, tuple(recent))
    parts = split_query(query)
    subs = [p for p in parts if p != query] if len(parts) > 1 else []
    statement = declarative(query)
    if statement.lower() != query.lower().rstrip("?"):
        subs.append(statement)
    kw = extract_keywords(query)
    hints = []
    if kw.key_terms:
        hints.append(Hint(kw.query(4), tuple(kw.key_terms[:3])))
    return Analysis(needs, tuple(subs[:3]), tuple(hints), named_time(query, now), "heuristics")


def lexical_levels(text: str, context_terms: Sequence[str]) -> list[str]:
    """Tight (every specific term), medium (the top two or three), broad (any term, plus context)."""
    kw = extract_keywords(text)
    terms = list(kw.key_terms)
    if not terms:
        return []
    tight = kw.query(12)
    medium = " ".join(terms[: 3 if kw.entities else 2])
    broad = " ".join(dict.fromkeys([*kw.terms, *context_terms]))
    return [tight, medium, broad]


def _needs_shape(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MalformedReply("expected a JSON object")
    needs = value.get("needs", [])
    if not isinstance(needs, list):
        raise MalformedReply("needs must be an array")
    subs = string_list(value, "sub_queries", 3) if value.get("sub_queries") else []
    hints = []
    for h in value.get("sparse_hints") or []:
        if isinstance(h, dict) and isinstance(h.get("phrase"), str) and h["phrase"].strip():
            keep = [t for t in h.get("must_keep_terms") or [] if isinstance(t, str) and t.strip()]
            hints.append(Hint(h["phrase"].strip(), tuple(keep)))
    return {
        "needs": [n for n in needs if n in NEEDS],
        "sub_queries": subs,
        "hints": hints[:3],
        "assistant": bool(value.get("assistant_turns", False)),
    }


def _scores_shape(value: Any) -> dict[int, float]:
    items = value.get("scores") if isinstance(value, dict) else value
    if not isinstance(items, list):
        raise MalformedReply("expected a scores array")
    out: dict[int, float] = {}
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("id"), int):
            out[item["id"]] = unit_float(item.get("score"))
    if not out:
        raise MalformedReply("no scores")
    return out


class Applicability:
    name = QueryMode.APPLICABILITY

    default_limit: int | None = None

    def __init__(self, pipeline: QueryPipeline, llm: Llm, *, pool: int = 100) -> None:
        self._pipeline = pipeline
        self._llm = llm
        self._pool = pool
        self._terms = TermMatcher()

    async def analyse(self, plan: QueryPlan, request: QueryInput, report: QueryReport, deadline: Deadline) -> Analysis:
        # A time the query names is read in the user's own time, as recency is (rank.py).
        now = recency_reference(await self._pipeline.hydrate.newest(plan, deadline), time.time())
        offline = analyse_offline(request.query, recent_texts(request), now)
        with stage_span(self._pipeline.tracer, report, "need_detection"):
            got = await self._llm.ask(
                "needs",
                report.llm,
                deadline,
                _needs_shape,
                max_tokens=300,
                message=request.query,
                recent=recent_block(request),
            )
        analysis = offline
        if got is not None:
            needs = NeedReport(
                needs={n: "llm" for n in got["needs"]},
                callback=got["assistant"] or offline.needs.callback,
                list_intent=offline.needs.list_intent,
            )
            analysis = Analysis(
                needs, tuple(got["sub_queries"]), tuple(got["hints"]) or offline.hints, offline.window, "llm"
            )
        if analysis.needs.needs:
            detail = ", ".join(f"{n} ({why!r})" for n, why in analysis.needs.needs.items())
            report.notes.append(f"applicability: needs {detail}")
        if analysis.needs.wants_assistant_turns:
            report.notes.append("applicability: looking for the assistant's own earlier turns")
        if analysis.window is not None:
            report.notes.append(f"applicability: time window {analysis.window.describe()}")
        return analysis

    async def gather(self, plan: QueryPlan, request: QueryInput, report: QueryReport, deadline: Deadline) -> Gathered:
        analysis = await self.analyse(plan, request, report, deadline)
        kw = extract_keywords(request.query)
        context_terms = salient_terms(list(reversed(recent_texts(request)[-3:])), kw.terms, limit=3)
        levels = lexical_levels(plan.query, context_terms)
        hints = [h.phrase for h in analysis.hints]
        queries = distinct_queries([plan.query, *analysis.sub_queries, *levels, *hints])[:_MAX_QUERIES]
        # The keyword levels are bags of the question's words: searched by meaning they find what
        # the question and its hints find, so only their words are searched (no embedding each).
        # The hints stay embedded: a callback's few content words ("suggested sleep help") find
        # the assistant's advice by meaning where it shares none of them.
        searched = {query_key(q) for q in (plan.query, *analysis.sub_queries, *hints)}
        words_only = {query_key(q) for q in levels} - searched
        # Rerank depth: the applicability estimate sorts a deeper pool better than the first-stage
        # fusion does (LoCoMo R@7 0.596 at 30, 0.632 at 60-150; docs/retrieval.md).
        pool = max(self._pool, 3 * plan.limit)
        # Speaker names stay in the searches by meaning here, unlike the other modes: the pool
        # finds more evidence without them (LoCoMo dev R@20 0.835 -> 0.849), but the estimate
        # below then puts less of it in the top 7 (0.763 -> 0.757, multi-hop 0.516 -> 0.503):
        # extracted memories, which name their subject, fall out of the top and session
        # summaries, less often useful, take their places (docs/retrieval.md). In a long history
        # other people's chats about the same things fill the pool, so there the question itself
        # matches a name by who took part, as in the other modes (`--haystack 10000`: own 0.710
        # -> 0.752, same 0.630 -> 0.642; every query so: 0.756 and 0.621, p50 x1.5-1.7).
        search = partial(search_all, self._pipeline, report=report, deadline=deadline, k=pool, speakers_by_words=False)
        lexical = self._pipeline.lexical
        if lexical is not None and await lexical.long_history(plan, deadline):
            first, rest = await asyncio.gather(
                search(plan, queries[:1], speakers_by_words=True), search(plan, queries[1:], words_only=words_only)
            )
            results = [*first, *rest]
        else:
            results = await search(plan, queries, words_only=words_only)
        evidence = Evidence(self._pipeline.queries_rrf_k)
        lists: list[Sequence[Candidate]] = []
        for q, found in zip(queries, results, strict=True):
            evidence.add(q, found)
            lists.append(found)
        window = analysis.window
        if (
            window is not None
            and plan.memory_filter.created_after is None
            and plan.memory_filter.created_before is None
        ):
            windowed = replace(
                plan, memory_filter=replace(plan.memory_filter, created_after=window.start, created_before=window.end)
            )
            found = (await search(windowed, [plan.query]))[0]
            evidence.add(plan.query, found)
            lists.append(found)
        fused = fuse_lists(lists, self._pipeline.queries_rrf_k)
        ranked_ids = sorted(fused, key=lambda i: -fused[i])[:pool]
        best = fused[ranked_ids[0]] if ranked_ids else 1.0
        retrieval = {i: fused[i] / best for i in ranked_ids}
        # The pool's own fusion is the relevance the rank stage sees for each candidate.
        candidates = [evidence.candidates[i].with_fused(fused[i]) for i in ranked_ids]

        async def rerank(ranked: list[RankedMemory], now: float) -> Ranking:
            return await self._score(plan, request, analysis, ranked, retrieval, report, deadline, context_terms)

        return Gathered(candidates, evidence.matched, rerank)

    async def _score(
        self,
        plan: QueryPlan,
        request: QueryInput,
        analysis: Analysis,
        ranked: list[RankedMemory],
        retrieval: dict[str, float],
        report: QueryReport,
        deadline: Deadline,
        context_terms: Sequence[str],
    ) -> Ranking:
        with stage_span(self._pipeline.tracer, report, "applicability"):
            judged = await self._llm_scores(request, analysis, ranked, report, deadline)
            scored: list[tuple[RankedMemory, float, float]] = []
            context_keys = [self._terms.one(t) for t in context_terms]
            words = await self._words(plan, ranked, [*self._terms.keys(plan.query), *context_keys], deadline)
            weights = pool_term_weights(plan.query, words, self._terms)
            subject = named_speaker(self._terms.entities(plan.query), ranked, self._terms)
            best_overlap = max((term_overlap(w, weights) for w in words), default=0.0)
            for i, (r, found) in enumerate(zip(ranked, words, strict=True), start=1):
                estimate = offline_applicability(r, found, analysis, context_keys, weights, best_overlap)
                app = judged.get(i, estimate) if judged else estimate
                final = combine(r, app, retrieval.get(r.memory.id, 0.0), analysis, subject)
                scored.append((replace(r, score=final), app, final))
            scored.sort(key=lambda s: (-s[2], s[0].memory.id))
        memories = [s[0] for s in scored]
        if not scored:
            return Ranking([], 0, "No memory matched the query and filters.")
        top, app, final = scored[0]
        how = "LLM" if judged else "offline estimate"
        explanation = (
            f"Top memory is a {top.memory.kind.value} judged most applicable now "
            f"(applicability {app:.2f} by {how}, retrieval {retrieval.get(top.memory.id, 0.0):.2f}, score {final:.2f})."
        )
        return Ranking(memories, 0, explanation)

    async def _words(
        self, plan: QueryPlan, ranked: Sequence[RankedMemory], wanted: Sequence[str], deadline: Deadline
    ) -> list[set[str]]:
        """Which of the `wanted` terms (the question's and the conversation's) each candidate holds.

        The lexical postings already hold every candidate's terms as the index analysed its
        lexical text (a turn with its speaker, the turn it answers and its date): one query over
        them replaces analysing each candidate's text again. Without a lexical channel, the
        plaintext is analysed with the same analyzer.
        """
        lexical = self._pipeline.lexical
        if lexical is None:
            return [self._terms.of(r.memory.lexical_text) & set(wanted) for r in ranked]
        # A hyphenated key is held as its parts ("self" and "care" for "self-care"), as the
        # plaintext matcher joins a memory's compounds.
        compounds = self._terms.compounds(plan.query)
        parts = [p for ways in compounds.values() for way in ways for p in way]
        held = await lexical.terms_held(plan, [r.memory.id for r in ranked], [*wanted, *parts], deadline)
        out = []
        for r in ranked:
            found = held.get(r.memory.id, set())
            found |= {k for k, ways in compounds.items() if any(all(p in found for p in way) for way in ways)}
            out.append(found)
        return out

    async def _llm_scores(
        self,
        request: QueryInput,
        analysis: Analysis,
        ranked: list[RankedMemory],
        report: QueryReport,
        deadline: Deadline,
    ) -> dict[int, float]:
        if not ranked or not self._llm.configured:
            return {}
        lines = []
        for i, r in enumerate(ranked, start=1):
            m = r.memory
            day = utc_from_s(m.created_at).strftime("%Y-%m-%d")
            lines.append(f"{i}. [{day} {m.role.value} {m.kind.value}] {m.content[:300]}")
        got = await self._llm.ask(
            "applicability",
            report.llm,
            deadline,
            _scores_shape,
            max_tokens=20 + 12 * len(ranked),
            message=request.query,
            recent=recent_block(request),
            needs=", ".join(analysis.needs.needs) or "none",
            candidates="\n".join(lines),
        )
        return got or {}


def named_speaker(query_entities: set[str], ranked: Sequence[RankedMemory], terms: TermMatcher) -> str | None:
    """The one speaker of the candidates' turns the question names by first name, if exactly one."""
    speakers = {r.memory.speaker_name for r in ranked if r.memory.speaker_name}
    named = [s for s in speakers if s.split() and terms.one(s.split()[0]) in query_entities]
    return named[0] if len(named) == 1 else None


def pool_term_weights(query: str, docs: Sequence[set[str]], terms: TermMatcher) -> dict[str, float]:
    """Each key term of the query weighted by how well it tells the candidates apart.

    An entity counts double, scaled like every term by its inverse document frequency within
    the candidate pool (`docs`: each candidate's terms): a name that occurs in most candidates
    (a speaker's own name, a user's recurring subject) says little about which of them answers.
    """
    keys = terms.keys(query)
    entity_keys = terms.entities(query)
    n = len(docs)
    out: dict[str, float] = {}
    for k in keys:
        df = sum(1 for d in docs if k in d)
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        out[k] = (2.0 if k in entity_keys else 1.0) * idf
    return out


def term_overlap(words: set[str], term_weights: Mapping[str, float]) -> float:
    """The share of the query's key-term weight that a memory's terms (`words`) hold."""
    weight = sum(term_weights.values())
    return sum(w for k, w in term_weights.items() if k in words) / weight if weight else 0.0


# A pool whose best candidate holds this share of the question's key terms has found its words.
_WORDS_FOUND = 0.5


def offline_applicability(
    r: RankedMemory,
    words: set[str],
    analysis: Analysis,
    context_keys: Sequence[str],
    term_weights: Mapping[str, float],
    best_overlap: float = 1.0,
) -> float:
    """Without an LLM: term overlap (`words`: the memory's terms) with the query's key terms (the
    keys of `term_weights`) and the conversation's (`context_keys`, stemmed), similarity, role,
    time fit, and how much the memory states (`substance`).

    Overlap (key terms weighted by pool IDF) outweighs similarity: every candidate of the pool
    was already recalled by similarity, so coverage of the question's distinctive terms is what
    still tells them apart; and among those, one that states something answers more often than
    one that reacts or asks back (LoCoMo dev R@7 0.742 -> 0.759, multi-hop 0.466 -> 0.503, every
    conversation better; docs/retrieval.md).

    Words tell candidates apart only where the pool holds them: `best_overlap` is the best
    candidate's, and below half of the key terms the weight of words passes to meaning in
    proportion, so that a memory asked for in other words ("how do I like to fly?" for "I
    prefer window seats") is judged by what it means (paraphrase set of memsvc/bench/data:
    top 3 in 0.863 -> see docs/retrieval.md).
    """
    m = r.memory
    overlap = term_overlap(words, term_weights)
    found = min(1.0, best_overlap / _WORDS_FOUND)
    context = sum(1 for t in context_keys if t in words) / len(context_keys) if context_keys else 0.0
    semantic = min(1.0, r.breakdown.semantic / 0.7)
    if m.session_id and m.kind is MemoryKind.EPISODE:
        semantic *= min(1.0, len(m.content.split()) / _MEANINGFUL_WORDS)
    if analysis.needs.wants_assistant_turns:
        role = 1.0 if m.role is Role.ASSISTANT or m.kind is MemoryKind.RECOMMENDATION else 0.2
    else:
        role = 0.5
    # With a named time the rank stage's recency is nearness to it (RankStage._recency).
    timing = 0.5 if analysis.window is None else r.breakdown.recency
    meaning = 0.10 + 0.45 * (1.0 - found)
    stated = substance(m.content)
    return 0.45 * found * overlap + meaning * semantic + 0.10 * context + 0.15 * role + 0.10 * timing + 0.10 * stated


# Words from which a conversation turn's similarity to a question counts in full: a turn of a
# few words ("ok day 4 then") means what the turn before it says, while alone it embeds near
# what every text shares and seems as close to any question as an answer. A note saved on its
# own ("dentist thurs 9:40") says what it means.
_MEANINGFUL_WORDS = 6
# Words stated at which a memory counts as saying enough to answer something.
_SUBSTANTIAL_WORDS = 25


def substance(content: str) -> float:
    """How much a memory states, in [0, 1]: its words outside questions, saturating.

    A turn that only reacts or asks ("Wow, love that painting! What inspired you?") matches a
    question's words and meaning as well as one that answers it, but tells nothing about
    anyone; what a person did or likes is stated at some length.
    """
    return min(1.0, len(statements(content).split()) / _SUBSTANTIAL_WORDS)


# A turn someone else said, when the question is about one named speaker: what a person did,
# likes or plans is mostly in their own words (97% of the multi-hop evidence turns of the LoCoMo
# dev files whose question names one speaker), while the other side of the conversation talks
# about the same things ("I love painting too!"). Among the multi-hop candidates there, 0.1%
# of the other speaker's turns were evidence against 5% of the named one's: at 0.10 they still
# took a place in the top 7 of 365 of the 679 questions naming one speaker; 0.20 moves them below.
OTHER_SPEAKER_PENALTY = 0.20


def combine(
    r: RankedMemory, applicability: float, retrieval: float, analysis: Analysis, subject: str | None = None
) -> float:
    """Seed 002's final score with its need boosts and penalties, clamped to [0, 1].

    `subject`: the speaker the question is about (`named_speaker`), if any.
    """
    m, b, needs = r.memory, r.breakdown, analysis.needs
    # Recency stays out of it: counted in the user's own time (`rank.recency_reference`) it
    # spreads the months of one conversation over up to 0.015 of the score, where the estimate
    # tells the evidence from its neighbours by less (LoCoMo 26+30 R@7 0.723 -> 0.711, multi-hop
    # 0.536 -> 0.484 with it).
    vitality = 0.3 * b.usage + 0.2 * b.decay
    confirmation = 0.6 * b.consistency + 0.4 * b.quality
    boost = 0.0
    from_assistant = m.role is Role.ASSISTANT or m.kind is MemoryKind.RECOMMENDATION
    if needs.has("follow_up_failure") and from_assistant:
        boost += 0.10  # the advice that did not work is what the user is talking about
    elif needs.callback and from_assistant:
        boost += 0.05
    if needs.has("contradiction") and m.kind in (MemoryKind.DECISION, MemoryKind.PREFERENCE, MemoryKind.FACT):
        boost += 0.05
    if needs.has("loop") and m.usage_count > 0:
        boost += 0.03
    if needs.has("high_stakes") and m.importance >= 0.7:
        boost += 0.05
    penalty = 0.10 * (1.0 - b.decay)
    if subject is not None and m.speaker_name and m.speaker_name != subject:
        penalty += OTHER_SPEAKER_PENALTY
    if m.retention_status is not RetentionStatus.ACTIVE:
        penalty += 0.10
    if analysis.window is not None:
        boost += 0.10 * b.recency - 0.05
    score = (
        W_APPLICABILITY * applicability
        + W_RETRIEVAL * retrieval
        + W_VITALITY * vitality
        + W_CONFIRMATION * confirmation
        + boost
        - penalty
    )
    # What a later memory replaced gives way to it, as in every mode (ScoreBreakdown.currency).
    return round(min(1.0, max(0.0, score)) * b.currency, 6)
