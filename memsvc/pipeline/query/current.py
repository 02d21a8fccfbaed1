"""Stage 5b, the current truth: of results that answer the same question about the present, the
newest statement wins.

A question about the present says so ("now", "these days"), or asks in the present tense about
the user or something of theirs ("Where do I live?", "What food is Mila on?"); one that names a
participant of the conversation ("What is Caroline's job?") tells a story instead.

A user says where they live, and months later that they moved. Asked where they live now, both
statements match the question; nothing in their words says which is current unless the write
path caught the change (Memory.outdated). So, for a question about the present, two of the
returned statements of one speaker "answer the same question" when their own vectors are close
(they say things about the same thing), and the older gives way: its currency
(ScoreBreakdown.currency) falls as an outdated memory's does, and the scores decide the order.
Unless the question asks for a list, the newer of answers that match it alike also comes first.
The newer one must be able to hold now: not a one-off, a hypothetical, an addition or the past
retold, nor someone else's news that the question does not ask about (`replaces_what_held`).
The assistant's replies that said again what a replaced statement said, in its conversation,
give way with it (`_echoes`).

A question about what held before a change ("What was my rent before the renewal?") turns the
last change round: the statement that holds now gives way to the one it replaced, which answers
it (`_before_the_change`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol, TypeVar

import numpy as np
from lemminflect import getLemma

from memsvc.deadline import Deadline
from memsvc.domain.models import Memory, MemoryKind, RankedMemory, Role, StoredMemory
from memsvc.embeddings.base import Vector
from memsvc.errors import MemsvcError
from memsvc.llm.changes import (
    called_old,
    not_current,
    replaces_what_held,
    states_a_change,
    states_something,
    tells_a_one_off,
    tells_anothers_change,
    tells_the_past,
)
from memsvc.llm.heuristics import in_the_present_tense
from memsvc.llm.needs import detect_needs
from memsvc.pipeline.context import QueryPlan
from memsvc.pipeline.query.rank import distinct
from memsvc.pipeline.write.facts import Claim, extract_claims, find_conflict
from memsvc.stores.vectors.base import VectorIndex

# Two statements of one speaker at least this close (cosine of their vectors) may say something
# about the same thing: on the update stories of memsvc/bench/data, the statement before a
# change and the one that changed it have a median cosine of 0.42 (a tenth of the pairs below
# 0.28), a statement and the speaker's other turns a median of 0.09. Loose, because the newer
# must also word a change or state another value of a claim of the older's.
SAME_THING_COSINE = 0.2
# Two statements of different conversations compete as answers, the newer ordered first, when
# at least this close: without a worded change, closer than SAME_THING_COSINE asks. Read off
# the update stories of memsvc/bench/data (0.2 let unrelated newer chat outrank what still
# holds: keep 0.853 in APPLICABILITY; 0.28 parted two summaries of a phone switch: DIRECT
# update win 0.894), so a value from the dev set, not a measured property.
COMPETING_COSINE = 0.25
# ... and the newer answers the question well enough (its relevance at least this share of the
# older's): a kitten adopted later does not answer "what breed is my dog?" as the dog's own
# mention does, though both are about pets; a change often leaves the subject unsaid ("I
# switched to her Saturday session" for "when is my yoga class?"). What the newer says is also
# judged through the older: one as close to it as this share answers what it answers, however
# little it shares with the question ("the commute from my new flat in Leeds is so much
# shorter. Question: ..." beside "still living at my parents' in Bradford").
AS_RELEVANT = 0.4
# The currency of a statement a newer one replaces: half, as the query alone judged it (the write
# path's marks, which saw the change stated, weigh more: rank.OUTDATED_CURRENCY).
REPLACED_CURRENCY = 0.5
# A statement that a shown one replaces scores this share of its replacement's score, at most.
GIVES_WAY = 0.98
# How much more the newest of the answers to a question about the present weighs than the
# oldest: answers that match it about as well are ordered newest first, while one that matches
# it clearly better keeps its place.
NEWER_BY = 0.3
# ... over this much time between them, or in proportion over less.
NEWER_OVER_S = 7 * 86_400.0


# How many candidates below the results `followers` offers: the few best, as the statement
# that replaced a result still shares its subject with the query.
MAX_FOLLOWERS = 16


class _Candidate(Protocol):
    """A scored candidate (rank.Scored) or a result: what `followers` reads."""

    @property
    def memory(self) -> Memory | StoredMemory: ...


C = TypeVar("C", bound=_Candidate)


def _statement(r: _Candidate | RankedMemory) -> bool:
    """What the user stated: a turn of theirs, a memory extracted from one, or a session summary
    (which quotes them)."""
    m = r.memory
    return (m.role is Role.USER or m.kind is MemoryKind.SUMMARY) and not m.acknowledgement


def _same_speaker(a: RankedMemory, b: RankedMemory) -> bool:
    """Whether two statements are one speaker's: a summary quotes whoever spoke in its session."""
    summary = MemoryKind.SUMMARY
    return a.memory.kind is summary or b.memory.kind is summary or a.memory.speaker_name == b.memory.speaker_name


def _named_speakers(question: str, results: Sequence[RankedMemory]) -> frozenset[str]:
    """The speakers of the results that `question` names (their first names, lower case): a
    question about a participant of a conversation ("What is Caroline's job?"), whose present
    tense tells a story, not a state, unless the participant is the user of an assistant."""
    words = {w.strip("?.,!'").lower().removesuffix("'s") for w in question.split()}
    return frozenset(name for name in map(_first_name, results) if name and name in words)


def _talk_to_an_assistant(named: frozenset[str], results: Sequence[RankedMemory]) -> bool:
    """Whether the `named` speakers talk to an assistant in the results' conversations: then they
    are its user ("What does Gloria pay for rent?" is "What do I pay?"), asked in the third person
    as an assistant's own queries often are, not people of a story told between two."""
    theirs = {r.memory.session_id for r in results if r.memory.session_id and _first_name(r) in named}
    if any(r.memory.role is Role.ASSISTANT and r.memory.session_id in theirs for r in results):
        return True
    # A session's summary names whoever spoke in it.
    return any(named & (spoke := _summarised_speakers(r)) and Role.ASSISTANT.value in spoke for r in results)


def _with_an_assistant(results: Sequence[RankedMemory]) -> bool:
    """Whether the results come from a user's talk with an assistant: a turn of the assistant's,
    or a summary of a session it spoke in."""
    return any(r.memory.role is Role.ASSISTANT or Role.ASSISTANT.value in _summarised_speakers(r) for r in results)


# A summary's heading (summary.py): "Conversation s1 on <its days> between Grace and assistant:".
_BETWEEN = re.compile(r" between (.+):$")


def _summarised_speakers(r: RankedMemory) -> frozenset[str]:
    """The first names (lower case) of who spoke in a summary's session, "assistant" for the
    assistant; none for any other memory."""
    if r.memory.kind is not MemoryKind.SUMMARY:
        return frozenset()
    heading = _BETWEEN.search(r.memory.content.split("\n", 1)[0])
    return frozenset(n.split()[0].lower() for n in heading.group(1).split(" and ") if n) if heading else frozenset()


def _first_name(r: RankedMemory) -> str:
    """The first name the memory's speaker goes by, lower case; "" when unnamed."""
    names = r.memory.speaker_name.split()
    return names[0].lower() if names else ""


def _said(r: RankedMemory, speakers: frozenset[str]) -> list[str]:
    """What a statement says: a turn or a memory as it is, a summary's quotes of the user's turns
    each on its own, without its heading and the speakers' names ("Jordan: My rent is $1,950.").

    A memory extracted from a user's turn names them ("Aisha sold the Civic"): said by one of
    `speakers` (the user's names among the results), it is read in the first person, as said."""
    m = r.memory
    if m.kind is not MemoryKind.SUMMARY:
        if m.role is Role.USER and speakers:
            return [_first_person(m.content, speakers)]
        return [m.content]
    quotes = [line.split(": ", 1) for line in m.content.splitlines()[1:]]
    return [said for who, said in (q for q in quotes if len(q) == 2) if who != Role.ASSISTANT.value] or [""]


# The verbs whose first person is no lemma of theirs.
_FIRST_PERSON_OF = {"is": "am", "has": "have", "does": "do"}


def _first_person(text: str, speakers: frozenset[str]) -> str:
    """`text` with each of `speakers` as "I", their possessive as "my", and the verb after them
    as "I" says it ("Ahmed wants to cook" -> "I want to cook", "Nadia is" -> "I am")."""
    names = "|".join(re.escape(n) for n in sorted(speakers))
    text = re.sub(rf"\b(?:{names})['\u2019]s\b", "my", text)
    text = re.sub(
        rf"\b(?:{names})(\s+(?:(?:really|still|also|just|now|only|no longer|never|always)\s+)*)(\w+)\b", _as_i, text
    )
    return re.sub(rf"\b(?:{names})\b", "I", text)  # where no word follows


def _as_i(match: re.Match[str]) -> str:
    """ "I" and the verb that followed the speaker's name, as said in the first person."""
    between, verb = match.group(1), match.group(2)
    if verb in _FIRST_PERSON_OF:
        return f"I{between}{_FIRST_PERSON_OF[verb]}"
    if verb.endswith("s") and not verb.endswith("ss"):
        base = getLemma(verb, upos="VERB")
        if base and base[0] != verb:
            return f"I{between}{base[0]}"
    return f"I{between}{verb}"


def _speakers(results: Sequence[RankedMemory]) -> frozenset[str]:
    """The first names the user's turns among `results` were said under."""
    return frozenset(
        r.memory.speaker_name.split()[0]
        for r in results
        if r.memory.role is Role.USER and r.memory.speaker_name.strip()
    )


def _as_newer(statements: Sequence[RankedMemory], ranked: Sequence[RankedMemory]) -> dict[str, float]:
    """How well each statement answers the question as the newer of a pair: its relevance; a
    summary's, the best of its own and that of each turn it quotes among `ranked` (the results
    and the statements below them). A summary's vector averages its quotes, so a session that
    also asked for something else ("any ideas for a packed lunch?") dilutes the quote that
    states the change. The older statement is held to what it showed itself: lifted by its
    quotes too, it raised the bar for what replaced it."""
    relevance = {r.memory.id: r.breakdown.relevance for r in ranked}
    out = {}
    for r in statements:
        quoted = r.memory.source_ids if r.memory.kind is MemoryKind.SUMMARY else ()
        out[r.memory.id] = max([r.breakdown.relevance, *(relevance.get(s, 0.0) for s in quoted)])
    return out


def _can_hold(r: RankedMemory, question: str, speakers: frozenset[str]) -> bool:
    """Whether `r` can be what holds now: a statement that can (`replaces_what_held`); a session
    summary when one of its quotes of the user's can and none tells what is no current state
    (an addition, a one-off, ...): a request quoted beside a change leaves the change standing."""
    stated = [said for said in _said(r, speakers) if states_something(said)]
    if r.memory.kind is not MemoryKind.SUMMARY:
        return bool(stated) and all(replaces_what_held(said, question) for said in stated)
    holding = [replaces_what_held(said, question) for said in stated]
    return any(holding) and not any(not held and not_current(said) for said, held in zip(stated, holding, strict=True))


def _stated(r: RankedMemory, speakers: frozenset[str]) -> str:
    """What a statement says as one text, a summary's quotes each a sentence of its own: typed
    without a full stop, a request quoted first ("can you give me a slow cooker recipe") made
    the change quoted after it part of its question."""
    return " ".join(said if said.rstrip().endswith((".", "!", "?")) else f"{said}." for said in _said(r, speakers))


def _best_quote(r: RankedMemory, by_id: dict[str, RankedMemory]) -> RankedMemory | None:
    """Of a session summary's quotes among `by_id`, the one that answers the question best: what
    the summary answered through; None for any other memory, or when none is there."""
    if r.memory.kind is not MemoryKind.SUMMARY:
        return None
    quotes = [by_id[i] for i in r.memory.source_ids if i in by_id]
    return max(quotes, key=lambda q: q.breakdown.relevance) if quotes else None


def _current_statements(results: Sequence[RankedMemory]) -> list[RankedMemory]:
    """The statements among `results` that nothing marked outdated yet."""
    return [r for r in results if _statement(r) and r.breakdown.currency == 1.0]


def _current_replies(results: Sequence[RankedMemory]) -> list[RankedMemory]:
    """The assistant's replies among `results` that nothing marked outdated yet."""
    return [r for r in results if r.memory.role is Role.ASSISTANT and r.breakdown.currency == 1.0]


def _talked_since(r: RankedMemory, pool: Sequence[RankedMemory]) -> bool:
    """Whether a statement of `pool` comes from a conversation later than `r`'s."""
    return any(p.memory.session_id != r.memory.session_id and p.memory.created_at > r.memory.created_at for p in pool)


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


class CurrentTruth:
    def __init__(
        self,
        index: VectorIndex,
        same_thing_cosine: float = SAME_THING_COSINE,
        replaced_currency: float = REPLACED_CURRENCY,
        newer_by: float = NEWER_BY,
    ) -> None:
        self._index = index
        self._newer_by = newer_by
        self._same_thing = same_thing_cosine
        self._replaced_currency = replaced_currency

    def asks_what_holds(self, plan: QueryPlan, results: Sequence[RankedMemory]) -> bool:
        """Whether the query asks what holds now, so that the newest statement wins: of the user
        (`_asks_the_users_present`), or in the present tense naming no speaker."""
        return self._asks_the_users_present(plan, results) or self._asks_the_present(plan, results)

    @staticmethod
    def _asks_the_present(plan: QueryPlan, results: Sequence[RankedMemory]) -> bool:
        """Whether the query is in the present tense and names no speaker."""
        return in_the_present_tense(plan.query) and not _named_speakers(plan.query, results)

    @staticmethod
    def _asks_the_users_present(plan: QueryPlan, results: Sequence[RankedMemory]) -> bool:
        """Whether the query asks what holds now of the user: in the first person or saying "now"
        (`about_the_present`), or in the present tense of the user of an assistant, named or not
        ("What food is Mila on?"); not of a story told between two ("What do Mel and her kids
        paint?")."""
        if plan.about_the_present:
            return True
        if not in_the_present_tense(plan.query):
            return False
        named = _named_speakers(plan.query, results)
        return _talk_to_an_assistant(named, results) if named else _with_an_assistant(results)

    def followers(self, results: Sequence[RankedMemory], later: Sequence[C]) -> list[C]:
        """Of `later` (candidates ranked below the results, best first), the statements said after
        the first of the results' that could replace one of them: what `run` weighs as `later`."""
        said = [r.memory.created_at for r in results if _statement(r)]
        if not said:
            return []
        first = min(said)
        seen = {r.memory.id for r in results}
        out: list[C] = []
        for c in later:
            if len(out) < MAX_FOLLOWERS and c.memory.id not in seen and _statement(c) and c.memory.created_at > first:
                seen.add(c.memory.id)
                out.append(c)
        return out

    async def run(
        self,
        plan: QueryPlan,
        results: list[RankedMemory],
        deadline: Deadline,
        later: Sequence[RankedMemory] = (),
    ) -> list[RankedMemory]:
        """`results` (best first), each older statement that a newer one replaces given way.

        `later`: statements ranked below the results (`followers`). One that replaces a result
        answers what that result answered, in newer words the query may not share ("I'm tutoring
        full time now" for "How do I earn my living?"): it joins the results with the score of
        the result it replaces, before that one gives way."""
        if plan.about_the_past:
            return await self._before_the_change(plan, results, deadline)
        # Read once: whether a replaced statement also gives way to its replacement (below).
        of_the_user = self._asks_the_users_present(plan, results)
        if not (of_the_user or self._asks_the_present(plan, results)):
            return results
        # A list gathers what holds side by side ("What kinds of films do I like?"): only what a
        # newer statement replaced gives way, the rest keeps its order.
        newer_by = 0.0 if detect_needs(plan.query).list_intent else self._newer_by
        statements = _current_statements(results)
        followers = [r for r in later if r.breakdown.currency == 1.0]
        pool = statements + followers
        if len({r.memory.created_at for r in pool}) < 2:
            return results
        replies = _current_replies(results)
        unit, pool, speakers, holds = await self._read(plan, pool, replies, deadline)
        # What is told as the past ("back when I lived in Oslo") is history, as an outdated memory;
        # so is a one-off ("borrowing my brother's Tesla for the weekend") once a later
        # conversation has come, and someone else's change that the question does not ask about
        # ("my sister just moved to Denver" for "What city do I live in?").
        history = {
            r.memory.id
            for r in pool
            if tells_the_past(told := _stated(r, speakers))
            or (tells_a_one_off(told) and _talked_since(r, pool))
            or tells_anothers_change(told, plan.query)
        }
        shown = {r.memory.id: r for r in results}
        # Statements that say something about the same thing as another one of a different time:
        # the answers that compete, of which the newer comes first.
        competing = self._competing(pool, unit)
        replaced: set[str] = set()
        lifted: dict[str, float] = {}  # follower id -> the score of the best result it replaces
        pairs = self._replacements(pool, unit, holds, speakers, _as_newer(pool, [*results, *later]))
        # A follower that a still newer statement replaces in turn is not what holds now: it
        # does not join (A -> B -> C: B does not take A's place).
        replaced_in_turn = {was.memory.id for was, _ in pairs}
        # The assistant's replies that say again what a replaced statement said, in its session
        # ("With 1,250 rent, maybe start with 200 a month"), are outdated with it.
        pairs = pairs + self._echoes(replies, pairs, unit)
        # The replies that answered what is history go with it ("Plug in at a Supercharger" after
        # the Tesla borrowed for a weekend).
        past = [r for r in pool if r.memory.id in history]
        history |= {r.memory.id for r in replies if any(self._echoes_one(r, was, unit) for was in past)}
        for was, now in pairs:
            if was.memory.id not in shown:
                continue
            replaced.add(was.memory.id)
            if now.memory.id not in shown and now.memory.id not in replaced_in_turn:
                lifted[now.memory.id] = max(lifted.get(now.memory.id, 0.0), was.score)
        joined = results + [
            RankedMemory(
                f.memory, max(f.score, lifted[f.memory.id]), f.breakdown, f.matched_queries, f.sources, f.context
            )
            for f in followers
            if f.memory.id in lifted
        ]
        oldest = min(r.memory.created_at for r in joined)
        # Statements a few days apart are one time; the full weight takes a week or more.
        span = max(max(r.memory.created_at for r in joined) - oldest, NEWER_OVER_S)
        # The newest of the answers weighs the most, the oldest up to 1 / (1 + NEWER_BY) as much;
        # what cannot hold now (a one-off, someone else's news, ...) or competes with no other
        # answer ("legs were like lead" beside "I run every morning") weighs as the oldest.
        newer = {
            r.memory.id: (r.memory.created_at - oldest) / span
            if holds.get(r.memory.id) and r.memory.id in competing
            else 0.0
            for r in joined
        }
        newest = 1 + newer_by * max(newer.values())
        out = []
        for r in joined:
            currency = (1 + newer_by * newer[r.memory.id]) / newest
            if r.memory.id in replaced or r.memory.id in history:
                currency *= self._replaced_currency
            currency *= r.breakdown.currency
            r = RankedMemory(
                r.memory,
                round(r.score * currency / r.breakdown.currency, 6),
                r.breakdown._replace(currency=round(currency, 6)),
                r.matched_queries,
                r.sources,
                r.context,
            )
            out.append(r)
        if of_the_user:
            out = self._give_way(out, [(was, now) for was, now in pairs if was.memory.id in replaced])
        # stable: ties keep their order; a joined statement and what it repeats are one result.
        return distinct(sorted(out, key=lambda r: -r.score))[: max(plan.limit, len(results))]

    async def _before_the_change(
        self, plan: QueryPlan, results: list[RankedMemory], deadline: Deadline
    ) -> list[RankedMemory]:
        """`results` for a question about what held before a change ("What was my rent before the
        renewal?"), of the user of an assistant: the statement that holds now gives way to the
        one it replaced, which answers the question (the mirror of `run`). Only the last change
        turns round: of A -> B -> C, C gives way to B, and A keeps its place."""
        named = _named_speakers(plan.query, results)
        if not (_talk_to_an_assistant(named, results) if named else _with_an_assistant(results)):
            return results  # a story told between two: what happened, not a change of the user's
        pool = _current_statements(results)
        if len({r.memory.created_at for r in pool}) < 2:
            return results
        replies = _current_replies(results)
        unit, pool, speakers, holds = await self._read(plan, pool, replies, deadline)
        pairs = self._replacements(pool, unit, holds, speakers, _as_newer(pool, results))
        # The change that turns round is the last: by a statement that nothing replaced and that
        # no later statement of another conversation says something about.
        replaced = {was.memory.id for was, _ in pairs}
        latest = [
            (now, was)
            for was, now in pairs
            if now.memory.id not in replaced
            and not any(
                r.memory.created_at > now.memory.created_at
                and r.memory.session_id != now.memory.session_id
                and float(unit[r.memory.id] @ unit[now.memory.id]) >= self._same_thing
                for r in pool
            )
        ]
        if not latest:
            return results
        # ... and the assistant's replies that said again what holds now, in its session.
        latest += [(r, was) for now, was in latest for r in replies if self._echoes_one(r, now, unit)]
        return distinct(sorted(self._give_way(results, latest), key=lambda r: -r.score))

    async def _read(
        self, plan: QueryPlan, pool: list[RankedMemory], replies: list[RankedMemory], deadline: Deadline
    ) -> tuple[dict[str, Vector], list[RankedMemory], frozenset[str], dict[str, bool]]:
        """The normalised vectors of `pool` and `replies`, the statements of `pool` that have one,
        the names the user's turns among them were said under, and whether each statement can
        be what holds now (not a one-off, someone else's news, ...; a summary only when a quote
        of the user's can and none tells what is no current state)."""
        vectors = await self._vectors(plan, [r.memory.id for r in [*pool, *replies]], deadline)
        unit = {i: v / (np.linalg.norm(v) or 1.0) for i, v in vectors.items()}
        pool = [r for r in pool if r.memory.id in unit]
        speakers = _speakers(pool)
        return unit, pool, speakers, {r.memory.id: _can_hold(r, plan.query, speakers) for r in pool}

    @staticmethod
    def _give_way(out: list[RankedMemory], pairs: Sequence[tuple[RankedMemory, RankedMemory]]) -> list[RankedMemory]:
        """`out` with each replaced statement scored just below the shown statement that replaces
        it (the newest replacement first, so a chain A -> B -> C keeps its order), its currency
        lowered to match: it stays findable as history but never outranks what holds now."""
        scored = {r.memory.id: r for r in out}
        for was, now in sorted(pairs, key=lambda p: -p[1].memory.created_at):
            old, new = scored.get(was.memory.id), scored.get(now.memory.id)
            if old is None or new is None or old.score < new.score * GIVES_WAY or old.breakdown.currency <= 0:
                continue
            factor = new.score * GIVES_WAY / old.score
            scored[old.memory.id] = replace(
                old,
                score=round(old.score * factor, 6),
                breakdown=old.breakdown._replace(currency=round(old.breakdown.currency * factor, 6)),
            )
        return [scored[r.memory.id] for r in out]

    def _competing(self, statements: Sequence[RankedMemory], unit: dict[str, Vector]) -> set[str]:
        """The ids of the statements that say something about the same thing as another one of
        the same speaker said at another time (in another conversation); `unit`: their vectors,
        normalised."""
        out: set[str] = set()
        for a, b in itertools.combinations(statements, 2):
            # One conversation's statements (and its summary) tell one time, not two.
            same_time = a.memory.created_at == b.memory.created_at or a.memory.session_id == b.memory.session_id
            if same_time or not _same_speaker(a, b):
                continue
            # Answers compete only when they answer alike: a newer remark about the same thing that
            # answers the question far less well than an older one does not outrank it by date.
            weaker, stronger = sorted((a.breakdown.relevance, b.breakdown.relevance))
            if weaker < AS_RELEVANT * stronger:
                continue
            if float(unit[a.memory.id] @ unit[b.memory.id]) >= COMPETING_COSINE:
                out |= {a.memory.id, b.memory.id}
        return out

    def _replacements(
        self,
        statements: Sequence[RankedMemory],
        unit: dict[str, Vector],
        holds: dict[str, bool],
        speakers: frozenset[str],
        as_newer: dict[str, float],
    ) -> list[tuple[RankedMemory, RankedMemory]]:
        """(older, newer) for each statement a newer one of the same speaker, which can hold now,
        replaces; `unit`: their vectors, normalised; `as_newer`: how well each answers the
        question as the newer of a pair (`_as_newer`)."""
        stated = {r.memory.id: _stated(r, speakers) for r in statements}
        # What each calls old ("better than the old Honda"): a statement that names that thing
        # is about what the newer replaced, however unlike the two are in their other words.
        old_things = {i: called_old(text) for i, text in stated.items()}
        changes: dict[str, bool] = {}  # read once per statement, however many pairs it is in
        claims: dict[str, list[Claim]] = {}
        pairs = []
        for a, b in itertools.combinations(statements, 2):
            older, newer = (a, b) if a.memory.created_at < b.memory.created_at else (b, a)
            if older.memory.created_at == newer.memory.created_at:
                continue
            if not _same_speaker(older, newer):
                continue
            alike = float(unit[older.memory.id] @ unit[newer.memory.id])
            if old_things[newer.memory.id] & _words(stated[older.memory.id]):
                alike = 1.0
            if alike < self._same_thing:
                continue
            # How well the newer answers: by its own relevance, or by the older's as far as it
            # is like the older.
            answers = max(as_newer[newer.memory.id], alike * older.breakdown.relevance)
            if answers < AS_RELEVANT * older.breakdown.relevance:
                continue
            if not holds[newer.memory.id]:
                continue
            # The newer one words a change, or states another value of what the older states.
            new, old = newer.memory.id, older.memory.id
            if new not in changes:
                changes[new] = states_a_change(stated[new])
            if not changes[new]:
                for i in (old, new):
                    if i not in claims:
                        claims[i] = extract_claims(stated[i])
            changed = changes[new] or find_conflict(claims[old], claims[new]) is not None
            if changed:
                pairs.append((older, newer))
        return pairs + self._quotes_replaced(statements, pairs) + self._summaries_replaced(statements, pairs)

    @staticmethod
    def _summaries_replaced(
        statements: Sequence[RankedMemory], pairs: Sequence[tuple[RankedMemory, RankedMemory]]
    ) -> list[tuple[RankedMemory, RankedMemory]]:
        """(summary, newer) for each session summary among `statements` whose quote that answers
        the question best a newer statement of another session replaced: the summary answered
        through it (`_quotes_replaced` the other way round)."""
        known = {(a.memory.id, b.memory.id) for a, b in pairs}
        replaced_by: dict[str, list[RankedMemory]] = {}
        for older, newer in pairs:
            replaced_by.setdefault(older.memory.id, []).append(newer)
        by_id = {r.memory.id: r for r in statements}
        out = []
        for summary in statements:
            best = _best_quote(summary, by_id)
            if best is None:
                continue
            for newer in replaced_by.get(best.memory.id, ()):
                pair = (summary.memory.id, newer.memory.id)
                if pair in known or newer.memory.session_id == summary.memory.session_id:
                    continue
                known.add(pair)
                out.append((summary, newer))
        return out

    def _echoes(
        self,
        replies: Sequence[RankedMemory],
        pairs: Sequence[tuple[RankedMemory, RankedMemory]],
        unit: dict[str, Vector],
    ) -> list[tuple[RankedMemory, RankedMemory]]:
        """(reply, newer) for each of the assistant's `replies` in the session of a statement
        that `newer`, of a later session, replaced, about the same thing as that statement."""
        out = []
        for reply in replies:
            for was, now in pairs:
                if was.memory.session_id != now.memory.session_id and self._echoes_one(reply, was, unit):
                    out.append((reply, now))
                    break
        return out

    def _echoes_one(self, reply: RankedMemory, statement: RankedMemory, unit: dict[str, Vector]) -> bool:
        """Whether the assistant's `reply` is of `statement`'s session and about the same thing."""
        return (
            reply.memory.session_id == statement.memory.session_id
            and reply.memory.id in unit
            and statement.memory.id in unit
            and float(unit[reply.memory.id] @ unit[statement.memory.id]) >= self._same_thing
        )

    @staticmethod
    def _quotes_replaced(
        statements: Sequence[RankedMemory], pairs: Sequence[tuple[RankedMemory, RankedMemory]]
    ) -> list[tuple[RankedMemory, RankedMemory]]:
        """(quote, newer) for each replaced session summary: the quote of it among `statements`
        that answers the question best is what the newer replaced, as the summary answered
        through it ("I pay Spectrum $55 a month" in the summary a later one replaces)."""
        by_id = {r.memory.id: r for r in statements}
        known = {(a.memory.id, b.memory.id) for a, b in pairs}
        out = []
        for older, newer in pairs:
            best = _best_quote(older, by_id)
            if best is None:
                continue
            if (best.memory.id, newer.memory.id) in known or best.memory.created_at >= newer.memory.created_at:
                continue
            known.add((best.memory.id, newer.memory.id))
            out.append((best, newer))
        return out

    async def _vectors(self, plan: QueryPlan, ids: Sequence[str], deadline: Deadline) -> dict[str, Vector]:
        try:
            return await deadline.run(self._index.vectors(plan.namespace, ids), "the vector index")
        except MemsvcError:
            return {}  # the index is down: the results stand as ranked
