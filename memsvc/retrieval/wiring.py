"""Builds the Retrieval facade and its LLM client from settings (called by the composition root)."""

from __future__ import annotations

from memsvc.config import Settings
from memsvc.llm.client import ChatModel, Llm, OpenAIChatModel
from memsvc.memories.codec import MemoryCodec
from memsvc.pipeline.context import QueryMode
from memsvc.pipeline.query.pipeline import QueryPipeline
from memsvc.retrieval.agent import Agent
from memsvc.retrieval.applicability import Applicability
from memsvc.retrieval.base import Strategy
from memsvc.retrieval.contract import ContractReader
from memsvc.retrieval.expand import ContextExpander
from memsvc.retrieval.fusion import Fusion
from memsvc.retrieval.multi_query import MultiQuery
from memsvc.retrieval.router import Retrieval
from memsvc.retrieval.sources import SourceAttacher
from memsvc.stores.records.base import MemoryRecords


def build_llm(settings: Settings) -> Llm:
    model: ChatModel | None = None
    if settings.llm_base_url:
        model = OpenAIChatModel(
            base_url=settings.llm_base_url,
            api_key=settings.llm_api_key.get_secret_value(),
            model=settings.llm_model,
            timeout_s=settings.llm_timeout_s,
            temperature=settings.llm_temperature,
        )
    return Llm(model, settings.llm_timeout_s)


def build_retrieval(settings: Settings, pipeline: QueryPipeline, store: MemoryRecords, codec: MemoryCodec) -> Retrieval:
    llm = build_llm(settings)
    strategies: dict[QueryMode, Strategy] = {
        QueryMode.MULTI_QUERY: MultiQuery(
            pipeline,
            llm,
            questions=settings.multi_query_questions,
            per_query=settings.multi_query_results_per_query,
            limit=settings.multi_query_limit,
        ),
        QueryMode.FUSION: Fusion(pipeline, llm),
        QueryMode.APPLICABILITY: Applicability(pipeline, llm, pool=settings.applicability_pool),
        QueryMode.AGENT: Agent(
            pipeline,
            llm,
            max_attempts=settings.agent_max_attempts,
            confidence_threshold=settings.agent_confidence_threshold,
        ),
    }
    return Retrieval(
        pipeline,
        strategies,
        ContextExpander(store, codec, pipeline.tracer),
        SourceAttacher(store, codec, pipeline.tracer),
        ContractReader(store, codec, pipeline.tracer),
        llm,
        max_query_chars=settings.max_query_chars,
        default_token_budget=settings.default_token_budget,
        max_token_budget=settings.max_token_budget,
    )
