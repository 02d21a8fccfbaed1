"""The direct query: the six stages in order, each under its own span."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from opentelemetry.trace import Tracer

from memsvc.deadline import Deadline
from memsvc.domain.models import Principal, RankedMemory
from memsvc.errors import Unavailable
from memsvc.llm.dates import named_time
from memsvc.llm.text import without_names
from memsvc.pipeline.context import QueryInput, QueryMode, QueryPlan, QueryReport, child_span, stage_span
from memsvc.pipeline.query.bookkeep import BookkeepStage
from memsvc.pipeline.query.current import CurrentTruth
from memsvc.pipeline.query.embed import EmbedStage
from memsvc.pipeline.query.fusion import reciprocal_rank_fusion
from memsvc.pipeline.query.hydrate import HydrateStage, opened
from memsvc.pipeline.query.lexical import Involvement, LexicalRecall
from memsvc.pipeline.query.rank import (
    Ranking,
    RankStage,
    Scored,
    explain,
    rankable_prefix,
    recency_reference,
    results,
    settled,
    unrepeated,
)
from memsvc.pipeline.query.recall import Candidate, RecallStage, named_depth_factor
from memsvc.pipeline.query.scope import ScopeStage
from memsvc.stores.caches.base import CachedResult, ResultCache
from memsvc.stores.vectors.base import Vector

# A question's named speakers in more conversations than this, or involved in more memories,
# are looked for by a deeper search, not by one within their conversations: its filter would
# name too many, their sessions take long to read, and past 5,000 rows the filtered search walks
# the graph too (milvus_lite.DEFAULT_EXACT_ROWS).
MAX_NAMED_SESSIONS = 512
MAX_NAMED_MEMORIES = 5_000


@dataclass(frozen=True)
class QueryOutcome:
    plan: QueryPlan
    memories: list[RankedMemory]
    explanation: str
    report: QueryReport
    context: str = ""


# A retrieval mode's own final ordering of the ranked candidates (all of them, best first) at `now`.
Rerank = Callable[[list[RankedMemory], float], Awaitable[Ranking]]


@dataclass(frozen=True)
class Gathered:
    """What a mode found for a plan: candidates best first, the queries that found each memory,
    and optionally the mode's own ordering of the ranked candidates before the limit."""

    candidates: list[Candidate]
    matched: Mapping[str, Sequence[str]] | None = None
    rerank: Rerank | None = None
    # Candidates below this absolute relevance are dropped (DIRECT's floor; modes that judge
    # relevance their own way leave it at 0).
    min_relevance: float = 0.0


# A mode's search for a validated plan (its queries, their fusion, its reranker).
Gather = Callable[[QueryPlan], Awaitable[Gathered]]


class QueryPipeline:
    def __init__(
        self,
        *,
        tracer: Tracer,
        scope: ScopeStage,
        embed: EmbedStage,
        recall: RecallStage,
        hydrate: HydrateStage,
        rank: RankStage,
        bookkeep: BookkeepStage,
        current: CurrentTruth,
        result_cache: ResultCache,
        rrf_k: int,
        queries_rrf_k: int,
        lexical: LexicalRecall | None = None,
        lexical_during_embedding: bool = True,
        named_depth_factor: int = 4,
        depth_grows: bool = True,
        elsewhere_weight: float = 0.5,
    ) -> None:
        """`lexical_during_embedding`: start the lexical search while the query is embedded. Right
        when embedding waits on a remote endpoint; wrong when a local model already keeps every
        core busy, where the search would slow the embedding by as much as it saves."""
        self.tracer = tracer
        self.scope = scope
        self.embed = embed
        self.recall = recall
        self.hydrate = hydrate
        self.rank = rank
        self.bookkeep = bookkeep
        self.current = current
        self._cache = result_cache
        self.lexical = lexical
        self.rrf_k = rrf_k
        # The fusion of a mode's several searches (retrieval/): a deeper k than the channels'.
        self.queries_rrf_k = queries_rrf_k
        self.lexical_during_embedding = lexical_during_embedding
        # How much deeper dense recall looks at most when the question names speakers (`_named_first`).
        self.named_depth_factor = named_depth_factor
        # Whether the channels' depth grows with the namespace's size (`_depth`).
        self.depth_grows = depth_grows
        # The share of its fused score a memory keeps when it is from a conversation that none
        # of the speakers a question names took part in (`_named_first`).
        self.elsewhere_weight = elsewhere_weight

    def plan(
        self, principal: Principal, request: QueryInput, report: QueryReport, default_limit: int | None = None
    ) -> QueryPlan:
        with stage_span(self.tracer, report, "scope") as span:
            plan = self.scope.run(principal, request, default_limit)
            span.set_attribute("memsvc.request_id", plan.request_id)
            span.set_attribute("memsvc.limit", plan.limit)
            return plan

    async def execute(
        self,
        principal: Principal,
        request: QueryInput,
        report: QueryReport,
        deadline: Deadline,
        gather: Gather,
        default_limit: int | None = None,
    ) -> QueryOutcome:
        """The frame every mode runs in: scope, the result cache, the mode's gathering, then
        hydrate, rank and bookkeep. A mode supplies only `gather`."""
        plan = self.plan(principal, request, report, default_limit)
        report.queries.append(plan.query)
        cached, slot = await self.cached(plan, report, deadline)
        if cached is not None:
            return cached
        got = await gather(plan)
        return await self.finish(
            plan,
            got.candidates,
            report,
            deadline,
            slot,
            matched=got.matched,
            rerank=got.rerank,
            min_relevance=got.min_relevance,
        )

    async def run(self, principal: Principal, request: QueryInput, deadline: Deadline) -> QueryOutcome:
        """DIRECT: the plan's query alone, dense and lexical fused."""
        report = QueryReport(mode=QueryMode.DIRECT)

        async def gather(plan: QueryPlan) -> Gathered:
            candidates = await self.search(plan, plan.query, report, deadline)
            return Gathered(candidates, min_relevance=plan.min_relevance)

        return await self.execute(principal, request, report, deadline, gather)

    async def search(
        self,
        plan: QueryPlan,
        text: str,
        report: QueryReport,
        deadline: Deadline,
        k: int | None = None,
        *,
        dense: bool = True,
        speakers: Sequence[str] | None = None,
    ) -> list[Candidate]:
        """Stages 2-3 for one query text within the plan's namespace and filters.

        Dense and lexical recall run concurrently and are fused by Reciprocal Rank Fusion, best
        first; the lexical half needs no embedding, so it may start before it (see __init__).
        Retrieval modes call this once per generated query, then `finish` on the merged list;
        `dense=False` searches the words alone (a mode's keyword queries), neither embedded nor
        searched by meaning, where the lexical channel exists. The names of the namespace's
        speakers are not embedded (`meaning_of`) and, in a long history, find nothing by their
        words alone: `speakers`, the text's names that are speakers', when the caller looked
        them up already (`speakers_in`; empty: search every name), else looked up here; both
        channels put what involves them first, and what comes from other people's
        conversations counts for less (`_named_first`).
        """
        if not dense and self.lexical is not None:
            return await self._words_only(plan, text, report, deadline, k or await self._depth(plan, deadline))
        # The namespace's size sets the depth: looked up while the query is embedded.
        depth = asyncio.ensure_future(self._depth(plan, deadline)) if k is None else None
        lexical: asyncio.Future[list[Candidate]] | None = None
        reach: asyncio.Future[tuple[int, frozenset[str]]] | None = None
        try:
            if speakers is None:
                speakers = (await self.speakers_in(plan, [text], deadline))[0]
            named = bool(speakers) and self.lexical is not None and self.named_depth_factor > 1
            # How much deeper dense recall looks for them, or in which conversations, known while
            # the query is embedded.
            if named:
                reach = asyncio.ensure_future(self._named_reach(plan, speakers, deadline))
            # Who is named is matched by involvement (`_named_first`): in a long history their names
            # only weigh what the question's other words find, and in any history holding one
            # does not make a memory relevant (LexicalRecall.run).
            names = speakers if named else ()
            if self.lexical is not None and self.lexical_during_embedding:
                if depth is not None:
                    k = await depth
                lexical = asyncio.ensure_future(self._lexical(plan, text, deadline, k, names))
            meaning = self.meaning_of(text, speakers, report)
            with stage_span(self.tracer, report, "embed") as span:
                qv = await self.embed.run(meaning, deadline)
                span.set_attribute("memsvc.embedding.cache_hit", qv.cache_hit)
                if text == plan.query:
                    report.embedding_cache_hit = qv.cache_hit
            if depth is not None:
                k = await depth  # done by now, unless the lookup is slower than the embedding
            if self.lexical is not None and lexical is None:
                lexical = asyncio.ensure_future(self._lexical(plan, text, deadline, k, names))
            with stage_span(self.tracer, report, "recall") as span:
                depth_k = k or self.recall.depth(plan)
                deeper, sessions = await reach if reach is not None else (1, frozenset[str]())
                if sessions:
                    note = f"recall: searched by meaning within the conversations of {', '.join(speakers)}"
                    if note not in report.notes:
                        report.notes.append(note)
                dense_call = (
                    self._dense_within(plan, qv.vector, deadline, depth_k, sessions)
                    if sessions
                    else self.recall.run(plan, qv.vector, deadline, depth_k * deeper)
                )
                if lexical is None:
                    candidates = (await dense_call)[:depth_k]
                else:
                    dense_hits, lexical_hits = await asyncio.gather(dense_call, lexical, return_exceptions=True)
                    elsewhere: frozenset[str] = frozenset()
                    if named:
                        dense_hits, lexical_hits, elsewhere = await self._named_first(
                            plan, dense_hits, lexical_hits, speakers, depth_k, deadline
                        )
                    candidates = self._fuse(dense_hits, lexical_hits, report)
                    if elsewhere:
                        candidates = _discounted(candidates, elsewhere, self.elsewhere_weight)
                    span.set_attribute("memsvc.candidates.dense", sum(1 for c in candidates if c.dense_rank))
                    span.set_attribute("memsvc.candidates.lexical", sum(1 for c in candidates if c.lexical_rank))
                report.searches += 1
                report.candidates_recalled += len(candidates)
                span.set_attribute("memsvc.candidates.recalled", len(candidates))
            return candidates
        finally:
            for pending in (depth, lexical, reach):
                if pending is not None and not pending.done():
                    pending.cancel()

    async def _named_reach(
        self, plan: QueryPlan, speakers: Sequence[str], deadline: Deadline
    ) -> tuple[int, frozenset[str]]:
        """How many times deeper dense recall looks for a question naming `speakers`
        (`named_depth_factor`: the configured most while the lexical index is down), and, where
        what involves them is under half the namespace's memories and a few thousand at most,
        the sessions of their conversations (`_dense_within`; none: look deeper instead)."""
        assert self.lexical is not None
        try:
            share = await self.lexical.share_involving(plan, speakers, deadline)
        except Unavailable:
            return self.named_depth_factor, frozenset()
        factor = named_depth_factor(share, self.named_depth_factor)
        try:
            if factor <= 2 or share * await self.lexical.memories(plan, deadline) > MAX_NAMED_MEMORIES:
                return factor, frozenset()
            sessions = await self.lexical.sessions_involving(plan, speakers, deadline)
        except Unavailable:
            return factor, frozenset()
        return factor, sessions if len(sessions) <= MAX_NAMED_SESSIONS else frozenset()

    async def _dense_within(
        self, plan: QueryPlan, vector: Vector, deadline: Deadline, depth: int, sessions: frozenset[str]
    ) -> list[Candidate]:
        """The dense list of a question naming speakers who are in a few of the namespace's
        conversations: the nearest `depth` of their conversations' memories (and of memories of
        no conversation), what `_named_first` puts first of a deeper list; where those are fewer,
        all of them and then the nearest of the rest. Among a few conversations the search is
        exact and short, where a deeper one walks the whole graph (an own history of 10,000
        turns: 1.2 against 4.3 ms at four times the depth)."""
        within = replace(plan, memory_filter=replace(plan.memory_filter, session_ids=("", *sorted(sessions))))
        hits = await self.recall.run(within, vector, deadline, depth)
        if len(hits) >= depth:
            return hits
        theirs = {c.memory_id for c in hits}
        rest = [c for c in await self.recall.run(plan, vector, deadline, depth) if c.memory_id not in theirs]
        return [c._replace(dense_rank=i) for i, c in enumerate([*hits, *rest], start=1)]

    async def _depth(self, plan: QueryPlan, deadline: Deadline) -> int | None:
        """Each channel's depth for the namespace's size (`candidate_depth`), known from the
        lexical statistics; None (the configured depth) without them or while they are down."""
        if self.lexical is None or not self.depth_grows:
            return None
        try:
            return self.recall.depth(plan, await self.lexical.memories(plan, deadline))
        except Unavailable:
            return None

    async def _named_first(
        self,
        plan: QueryPlan,
        dense: list[Candidate] | BaseException,
        lexical: list[Candidate] | BaseException,
        speakers: Sequence[str],
        depth: int,
        deadline: Deadline,
    ) -> tuple[list[Candidate] | BaseException, list[Candidate] | BaseException, frozenset[str]]:
        """Both channels' lists for a question that names speakers, what involves them first,
        and the ids of the candidates from conversations that none of them took part in.

        The names are left out of what is embedded (`meaning_of`) and, in a long history, find
        nothing by their words alone, so by either channel another person's chat about books
        ranks level with the named person's: among a deeper dense list, what involves a named
        speaker (said by, to or about them) comes first, then the rest of their conversations,
        then everything else, each group in its order; in the lexical list, what comes from a
        conversation with a named speaker comes first. Where every memory is from a chat with
        them (two people's only conversation) only the dense list's first group moves; in a long
        history of other chats theirs come first in both, and the rest counts for less once
        fused (`search`). A conversation is known as theirs by a candidate of it that involves
        them."""
        assert self.lexical is not None
        found = [hits for hits in (dense, lexical) if not isinstance(hits, BaseException)]
        ids = list(dict.fromkeys(c.memory_id for hits in found for c in hits))
        try:
            involved: Involvement | None = await self.lexical.involving(plan, ids, speakers, deadline)
        except Unavailable:
            involved = None
        if not isinstance(dense, BaseException):
            kept = dense if involved is None else _first(_first(dense, involved.conversation), involved.named)
            dense = [c._replace(dense_rank=i) for i, c in enumerate(kept[:depth], start=1)]
        if not isinstance(lexical, BaseException) and involved is not None:
            kept = _first(lexical, involved.conversation)
            lexical = [c._replace(lexical_rank=i) for i, c in enumerate(kept, start=1)]
        return dense, lexical, frozenset() if involved is None else involved.elsewhere

    async def speakers_in(self, plan: QueryPlan, texts: Sequence[str], deadline: Deadline) -> list[list[str]]:
        """For each of `texts`, its names that the namespace's speakers go by, in one lookup of
        the lexical index; none without it, or while it is down (the search itself reports that)."""
        if self.lexical is not None:
            try:
                return await self.lexical.speakers_named(plan, texts, deadline)
            except Unavailable:
                pass
        return [[] for _ in texts]

    @staticmethod
    def meaning_of(text: str, speakers: Sequence[str], report: QueryReport) -> str:
        """What of `text` is searched by meaning: all of it but `speakers`, its speakers' names.

        A speaker's own turns never carry their name, while the other side's turns address them
        by it ("Thanks, Melanie!"), so a name in a short question pulls its embedding towards what
        was said *to* that person rather than what they said. Who is named is matched by who
        took part instead (`_named_first`). LoCoMo dev, DIRECT R@7 0.657 -> 0.716, multi-hop
        0.359 -> 0.399 (docs/retrieval.md).
        """
        meaning = without_names(text, speakers)
        if meaning != text:
            note = f"recall: searched by meaning without the speaker name(s) {', '.join(speakers)}"
            if note not in report.notes:
                report.notes.append(note)
        return meaning

    async def _words_only(
        self, plan: QueryPlan, text: str, report: QueryReport, deadline: Deadline, k: int | None
    ) -> list[Candidate]:
        with stage_span(self.tracer, report, "recall") as span:
            try:
                hits = await self._lexical(plan, text, deadline, k)
            except Unavailable:
                report.degraded = True
                report.notes.append("recall: the lexical channel is unavailable for a keyword query")
                hits = []
            candidates = reciprocal_rank_fusion([], hits, self.rrf_k)
            report.searches += 1
            report.candidates_recalled += len(candidates)
            span.set_attribute("memsvc.candidates.recalled", len(candidates))
        return candidates

    async def _lexical(
        self, plan: QueryPlan, text: str, deadline: Deadline, k: int | None, names: Sequence[str] = ()
    ) -> list[Candidate]:
        assert self.lexical is not None
        with child_span(self.tracer, "memsvc.recall.lexical") as span:
            hits = await self.lexical.run(plan, text, deadline, k, names)
            span.set_attribute("memsvc.candidates.lexical", len(hits))
            return hits

    def _fuse(
        self,
        dense: list[Candidate] | BaseException,
        lexical: list[Candidate] | BaseException,
        report: QueryReport,
    ) -> list[Candidate]:
        """RRF of both channels; when one is unavailable the other answers and the report says so."""
        if isinstance(dense, BaseException) and isinstance(lexical, BaseException):
            raise dense
        for failed, channel in ((dense, "dense"), (lexical, "lexical")):
            if isinstance(failed, BaseException):
                if not isinstance(failed, Unavailable):
                    raise failed
                report.degraded = True
                report.notes.append(f"recall: the {channel} channel is unavailable, answered from the other")
        return reciprocal_rank_fusion(
            [] if isinstance(dense, BaseException) else dense,
            [] if isinstance(lexical, BaseException) else lexical,
            self.rrf_k,
        )

    async def cached(
        self, plan: QueryPlan, report: QueryReport, deadline: Deadline
    ) -> tuple[QueryOutcome | None, str | None]:
        """The cached outcome of an identical request, or None and the slot to store a fresh one in."""
        if plan.skip_cache:
            return None, None
        hit, slot = await self._cache.lookup(plan.namespace, plan.request_key)
        if hit is None:
            return None, slot
        return await self._from_cache(plan, hit, report, deadline), None

    async def finish(
        self,
        plan: QueryPlan,
        candidates: list[Candidate],
        report: QueryReport,
        deadline: Deadline,
        slot: str | None,
        matched: Mapping[str, Sequence[str]] | None = None,
        rerank: Rerank | None = None,
        min_relevance: float = 0.0,
    ) -> QueryOutcome:
        """Stages 4-6 for a candidate list (shared by every retrieval mode).

        `matched` names the queries that found each memory id; `rerank` lets a mode order all
        ranked candidates its own way before the limit, bookkeeping and the cache apply.
        """
        # Without a mode's rerank (which reads every candidate's content), only the memories
        # ranking keeps are decrypted: the rank stage reads plaintext columns alone.
        decrypt_all = rerank is not None
        now = time.time()
        # A mode's rerank orders every candidate its own way; without one, only the candidates
        # that can still reach the results are hydrated and ranked (`rankable_prefix`).
        if rerank is None:
            ordered = sorted(candidates, key=_by_fused)
            n = rankable_prefix(ordered, plan.limit, self.rank.prior_factor_floor())
        else:
            ordered, n = candidates, len(candidates)
        with stage_span(self.tracer, report, "hydrate") as span:
            # Recency counts from the user's newest memory (`recency_reference`), read meanwhile.
            hydrated, newest = await asyncio.gather(
                self.hydrate.run(plan, ordered[:n], deadline, decrypt=decrypt_all), self.hydrate.newest(plan, deadline)
            )
            span.set_attribute("memsvc.candidates.hydrated", len(hydrated))
        since = recency_reference(newest, now)
        # A time the query names ("in June", "the week before 16 November") is read in the
        # user's own time, as recency is.
        named = named_time(plan.query, since)
        with stage_span(self.tracer, report, "rank") as span:
            # Every candidate is ordered, so that what one result already says can give way below.
            ordering = self.rank.order(
                hydrated, plan.min_importance, since, plan.about_the_present, plan.about_the_past, named
            )
            if not settled(ordering.scored, hydrated, ordered, n, plan.limit, min_relevance):
                # The filters or the relevance floor took too many of the first: rank them all.
                with child_span(self.tracer, "memsvc.hydrate.rest") as rest:
                    hydrated += await self.hydrate.run(plan, ordered[n:], deadline, decrypt=decrypt_all)
                    rest.set_attribute("memsvc.candidates.hydrated", len(hydrated))
                ordering = self.rank.order(
                    hydrated, plan.min_importance, since, plan.about_the_present, plan.about_the_past, named
                )
            kept: list[Scored] = []  # the results still to open (without a rerank)
            reranked_all: list[RankedMemory] = []  # every candidate as a mode reordered them
            lead = ""  # a mode's own account of its first result
            if rerank is None:
                kept, report.dropped_below_relevance = results(ordering.scored, min_relevance, plan.limit)
                span.set_attribute("memsvc.results", len(kept))
            else:
                # Every candidate is open already (decrypt_all): the mode orders them all.
                reranked = await rerank(await self._opened(ordering.scored, plan, matched), now)
                once = unrepeated(reranked.memories)
                memories, report.dropped_below_relevance = results(once, min_relevance, plan.limit)
                reranked_all = reranked.memories
                if memories and reranked.memories and memories[0] is reranked.memories[0]:
                    lead = reranked.explanation
                span.set_attribute("memsvc.results", len(memories))
            span.set_attribute("memsvc.candidates.dropped_below_relevance", report.dropped_below_relevance)
            report.dropped_by_importance = ordering.dropped_by_importance
            span.set_attribute("memsvc.candidates.dropped_by_importance", ordering.dropped_by_importance)
        if rerank is None:
            # Only the results are decrypted: ranking read the sealed rows' plaintext columns.
            started = time.perf_counter()
            with child_span(self.tracer, "memsvc.hydrate.open") as span:
                memories = await self._opened_once(kept, ordering.scored, plan, matched, min_relevance)
                span.set_attribute("memsvc.results", len(memories))
            report.add_time("hydrate", time.perf_counter() - started)  # decryption is hydration
        # Part of ranking (the newest of statements that answer alike wins), once the results are open.
        started = time.perf_counter()
        with child_span(self.tracer, "memsvc.rank.current") as span:
            first = memories[0] if memories else None
            later: list[RankedMemory] = []  # statements below the results that may replace one
            if self.current.asks_what_holds(plan, memories):
                shown = {m.memory.id for m in memories}
                if rerank is None:
                    below = [s for s in ordering.scored if s.memory.id not in shown]
                    later = await self._opened(self.current.followers(memories, below), plan, matched)
                else:
                    later = self.current.followers(memories, [m for m in reranked_all if m.memory.id not in shown])
            memories = await self.current.run(plan, memories, deadline, later)
            span.set_attribute("memsvc.results.reordered", bool(memories) and memories[0] is not first)
        report.add_time("rank", time.perf_counter() - started)
        # The explanation describes the first result returned, after every change of order.
        explanation = lead if lead and memories and memories[0] is first else explain(memories, now)
        if report.degraded:
            slot = None  # a degraded answer is not cached: the full one comes back with the index
        with stage_span(self.tracer, report, "bookkeep") as span:
            await self.bookkeep.run(
                plan,
                memories,
                now,
                slot,
                explanation,
                report.candidates_recalled,
                ordering.dropped_by_importance,
            )
            span.set_attribute("memsvc.result_cache.stored", slot is not None)
        return QueryOutcome(plan, memories, explanation, report)

    async def _opened_once(
        self,
        kept: Sequence[Scored],
        scored: Sequence[Scored],
        plan: QueryPlan,
        matched: Mapping[str, Sequence[str]] | None,
        min_relevance: float,
    ) -> list[RankedMemory]:
        """The results `kept` (the first of `scored` that `results` keeps) opened, each sentence
        once (`unrepeated`): a result that repeats a higher one word for word gives its place to
        the next of `scored`, opened in turn. Whether two say the same is known only once open."""
        memories = await self._opened(kept, plan, matched)
        once = unrepeated(memories)
        if len(once) == len(memories):
            return memories
        rest = results(scored, min_relevance, len(scored))[0][len(kept) :]
        while len(once) < plan.limit and rest:
            more = await self._opened(rest[: plan.limit - len(once)], plan, matched)
            rest = rest[len(more) :]
            once = unrepeated([*once, *more])
        return once

    async def _opened(
        self, scored: Sequence[Scored], plan: QueryPlan, matched: Mapping[str, Sequence[str]] | None
    ) -> list[RankedMemory]:
        """The scored candidates as results: each row opened (the sealed ones decrypted), with
        the queries that found it."""
        memories = await self.hydrate.open([s.memory for s in scored])
        default = (plan.query,) if plan.query else ()
        return [
            RankedMemory(m, s.score, s.breakdown, tuple(matched.get(m.id, ())) if matched else default)
            for s, m in zip(scored, memories, strict=True)
        ]

    async def _from_cache(
        self, plan: QueryPlan, cached: CachedResult, report: QueryReport, deadline: Deadline
    ) -> QueryOutcome:
        report.cache_hit = True
        report.candidates_recalled = cached.candidates_recalled
        report.dropped_by_importance = cached.dropped_by_importance
        with stage_span(self.tracer, report, "hydrate") as span:
            span.set_attribute("memsvc.result_cache.hit", True)
            rows = await self.hydrate.fetch(
                plan.namespace, [Candidate(memory_id=h.memory_id) for h in cached.hits], deadline
            )
            span.set_attribute("memsvc.candidates.hydrated", len(rows))
        by_id = {m.id: m for m in opened(rows)}
        ranked = [
            RankedMemory(by_id[h.memory_id], h.score, h.breakdown, h.matched_queries)
            for h in cached.hits
            if h.memory_id in by_id
        ]
        now = time.time()
        with stage_span(self.tracer, report, "bookkeep"):
            await self.bookkeep.run(
                plan, ranked, now, None, cached.explanation, cached.candidates_recalled, cached.dropped_by_importance
            )
        return QueryOutcome(plan, ranked, cached.explanation, replace(report))


def _discounted(candidates: list[Candidate], ids: frozenset[str], weight: float) -> list[Candidate]:
    """`candidates` (best fused first) with the fused score of `ids` times `weight`, reordered."""
    if weight >= 1.0:
        return candidates
    return sorted((c.with_fused(c.fused * weight) if c.memory_id in ids else c for c in candidates), key=_by_fused)


def _first(hits: list[Candidate], involved: frozenset[str]) -> list[Candidate]:
    """`hits` with those in `involved` first, each group in its order."""
    return [c for c in hits if c.memory_id in involved] + [c for c in hits if c.memory_id not in involved]


def _by_fused(c: Candidate) -> tuple[float, float, float, str]:
    return (-c.fused, -c.similarity, -c.lexical_score, c.memory_id)
