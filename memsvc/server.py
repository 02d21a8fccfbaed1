"""The composition root: builds every adapter once, wires the pipeline, runs the server."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

from memsvc.api.ratelimit import build_rate_limiter
from memsvc.api.server import MemoryServer
from memsvc.api.servicers import QueryServicer, WriteServicer
from memsvc.bootstrap import bootstrap_dev_key, dev_key_banner, local_secrets
from memsvc.config import Settings
from memsvc.crypto.derivation import load_key_derivation
from memsvc.crypto.envelope import EnvelopeCipher
from memsvc.crypto.keyring import MasterKeyRing
from memsvc.domain.models import MemoryKind
from memsvc.embeddings.base import Embedder
from memsvc.keys import ApiKeys
from memsvc.memories.changes import NamespaceChanges
from memsvc.memories.codec import MemoryCodec
from memsvc.memories.indexer import Indexer, LexicalWriter
from memsvc.metrics import (
    MeteredEmbeddingCache,
    MeteredResultCache,
    MetricsEndpoint,
    build_metrics,
)
from memsvc.pipeline.history import HistoryService
from memsvc.pipeline.jobs.maintenance import Maintenance, MaintenancePolicy
from memsvc.pipeline.jobs.reconcile import Reconciler
from memsvc.pipeline.paging import PageTokens
from memsvc.pipeline.query.bookkeep import BookkeepStage, RecallRecorder
from memsvc.pipeline.query.current import CurrentTruth
from memsvc.pipeline.query.embed import EmbedStage
from memsvc.pipeline.query.hydrate import HydrateStage
from memsvc.pipeline.query.lexical import LexicalRecall
from memsvc.pipeline.query.pipeline import QueryPipeline
from memsvc.pipeline.query.rank import RankStage
from memsvc.pipeline.query.recall import RecallStage
from memsvc.pipeline.query.scope import ScopeStage
from memsvc.pipeline.query.usage import UsageNorms
from memsvc.pipeline.reads import MemoryReads
from memsvc.pipeline.validation import Limits
from memsvc.pipeline.write.conversation import ConversationPath
from memsvc.pipeline.write.extraction_llm import build_extractor
from memsvc.pipeline.write.path import WritePath
from memsvc.pipeline.write.review import ContradictionDetector, RuleDetector, WriteReview
from memsvc.pipeline.write.summary import ExtractiveSummarizer
from memsvc.retrieval.router import Retrieval
from memsvc.retrieval.wiring import build_retrieval
from memsvc.stores.caches.base import EmbeddingCache, ResultCache
from memsvc.stores.caches.memory import InMemoryEmbeddingCache, InMemoryResultCache, NoResultCache
from memsvc.stores.caches.sealed import SealedResultCache
from memsvc.stores.lexical.analysis import TermHasher
from memsvc.stores.lexical.base import Bm25
from memsvc.stores.lexical.postgres import PostgresLexicalIndex
from memsvc.stores.lexical.sqlite import SqliteLexicalIndex
from memsvc.stores.records.base import RecordStore
from memsvc.stores.records.factory import build_record_store
from memsvc.stores.vectors.milvus import Client, GraphIndex, MilvusVectorIndex, connect_milvus
from memsvc.telemetry import build_tracer_provider, tracer_of
from memsvc.tls import CertificateSource, describe_transport, server_certificates

if TYPE_CHECKING:
    from memsvc.embeddings.local import LocalEmbedder
    from memsvc.stores.caches.redis import RedisGuard

log = logging.getLogger(__name__)


def build_lexical_index(settings: Settings) -> SqliteLexicalIndex | PostgresLexicalIndex | None:
    """The lexical channel's postings live beside the rows (measured fastest, docs/retrieval.md)."""
    if not settings.lexical_enabled:
        return None
    bm25 = Bm25(settings.bm25_k1, settings.bm25_b)
    if settings.uses_postgres:
        return PostgresLexicalIndex(
            settings.record_store_url,
            bm25,
            timeout_s=settings.record_store_timeout_s,
            term_postings=settings.lexical_term_postings,
        )
    return SqliteLexicalIndex(
        settings.sqlite_path,
        bm25,
        busy_timeout_ms=settings.sqlite_busy_timeout_ms,
        term_postings=settings.lexical_term_postings,
    )


def build_embedder(settings: Settings) -> Embedder:
    if settings.embedding_provider == "openai":
        from memsvc.embeddings.openai_compat import OpenAIEmbedder

        return OpenAIEmbedder(
            base_url=settings.embedding_base_url,
            api_key=settings.embedding_api_key.get_secret_value(),
            model=settings.embedding_model_name,
            dimension=settings.embedding_dimension,
            timeout_s=settings.embedding_timeout_s,
        )
    return build_local_embedder(settings)


def build_local_embedder(settings: Settings) -> LocalEmbedder:
    """The bundled model on the configured runtime (also what tests and tools share)."""
    from memsvc.embeddings.local import LocalEmbedder

    return LocalEmbedder(
        settings.embedding_model_path,
        model_name=settings.embedding_model_name,
        runtime=settings.embedding_runtime,
        onnx_dir=settings.resolved_onnx_dir,
        threads=settings.embedding_threads,
        batch_size=settings.embedding_batch_size,
        batch_wait_ms=settings.embedding_batch_wait_ms,
    )


def build_caches(settings: Settings) -> tuple[ResultCache, EmbeddingCache, RedisGuard | None]:
    """Shared Redis caches when MEMSVC_REDIS_URL is set (many replicas), else in-process ones.

    Embeddings depend on the text alone, so a per-process cache never goes stale; results do, and
    several worker processes without Redis run with no result cache rather than a stale one.
    """
    if not settings.redis_url:
        results: ResultCache = (
            NoResultCache()
            if settings.workers > 1
            else InMemoryResultCache(settings.result_cache_entries, settings.result_cache_ttl_s)
        )
        return results, InMemoryEmbeddingCache(settings.embedding_cache_entries), None
    # Imported only with Redis configured: half a second of every start-up otherwise.
    from memsvc.stores.caches.redis import RedisEmbeddingCache, RedisGuard, RedisResultCache, connect_redis

    guard = RedisGuard(
        connect_redis(
            settings.redis_url,
            settings.redis_timeout_s,
            ca_file=settings.redis_ca_file,
            cert_file=settings.redis_cert_file,
            key_file=settings.redis_key_file,
        )
    )
    prefix = settings.redis_key_prefix
    return (
        RedisResultCache(guard, prefix, settings.result_cache_ttl_s),
        RedisEmbeddingCache(guard, prefix, settings.embedding_cache_ttl_s),
        guard,
    )


@dataclass
class Components:
    """Everything the server runs on, built once."""

    settings: Settings
    store: RecordStore
    index: MilvusVectorIndex
    embedder: Embedder
    cipher: EnvelopeCipher
    codec: MemoryCodec
    indexer: Indexer
    changes: NamespaceChanges
    keys: ApiKeys
    pipeline: QueryPipeline
    writes: WritePath
    conversations: ConversationPath
    reads: MemoryReads
    history: HistoryService
    maintenance: Maintenance
    retrieval: Retrieval
    reconciler: Reconciler
    recorder: RecallRecorder
    tracer_provider: TracerProvider
    owns_embedder: bool
    metrics: MetricsEndpoint
    redis: RedisGuard | None = None
    # The server's TLS certificate, shared by the gRPC port and the metrics endpoint.
    certificates: CertificateSource | None = None
    lexical_index: SqliteLexicalIndex | PostgresLexicalIndex | None = None

    def start_jobs(self) -> None:
        """Start the background jobs: recall bookkeeping, reconciliation and maintenance."""
        settings = self.settings
        self.recorder.start()
        self.reconciler.start(settings.reconcile_interval_s)
        if settings.maintenance_interval_s > 0:
            self.maintenance.start(settings.maintenance_interval_s)

    async def close(self) -> None:
        """Stop the jobs (each finishes the run under way), then close the adapters that they
        and the cut calls used; every store waits for its worker threads before closing."""
        await self.maintenance.stop()
        await self.reconciler.stop()
        await self.recorder.stop()
        await self.index.close()
        if self.lexical_index is not None:
            await self.lexical_index.close()
        await self.retrieval.close()
        await self.store.close()
        if self.redis is not None:
            await self.redis.close()
        if self.owns_embedder:
            await self.embedder.close()
        self.tracer_provider.shutdown()
        await self.metrics.close()


async def build_components(
    settings: Settings, *, embedder: Embedder | None = None, span_processor: SpanProcessor | None = None
) -> Components:
    # First: bad TLS files stop the start-up before anything is opened or loaded.
    certificates = server_certificates(settings)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    secrets = local_secrets(settings)
    ring = MasterKeyRing.parse(secrets.master_keys)
    store = build_record_store(settings)
    if settings.uses_postgres:
        await store.check_schema()
    else:
        await store.migrate()  # the embedded default migrates itself; servers use `memsvc migrate`
    owns_embedder = embedder is None
    embedder = embedder or build_embedder(settings)

    def milvus_client() -> Client:
        return connect_milvus(
            settings.resolved_milvus_uri,
            settings.milvus_token.get_secret_value(),
            settings.milvus_db_name,
            settings.milvus_server_pem_path,
            settings.milvus_server_name,
            timeout_s=settings.milvus_call_timeout_s,
            client_pem_path=settings.milvus_client_pem_path,
            client_key_path=settings.milvus_client_key_path,
            exact_rows=settings.vector_exact_rows,
        )

    milvus = milvus_client()
    index = MilvusVectorIndex(
        milvus,
        embedding_version=embedder.version,
        dimension=embedder.dimension,
        placement=settings.vector_placement,
        registry=store,
        partitions_per_collection=settings.partitions_per_collection,
        partition_key_partitions=settings.partition_key_partitions,
        embedded=settings.is_embedded_milvus,
        flush_delay_s=settings.index_flush_delay_s,
        seal_delay_s=settings.milvus_seal_delay_s or None,
        reconnect=milvus_client,
        reconnect_backoff_s=settings.milvus_reconnect_backoff_s,
        reconnect_backoff_max_s=settings.milvus_reconnect_backoff_max_s,
        call_timeout_s=settings.milvus_call_timeout_s,
        read_your_writes=settings.milvus_read_your_writes,
        graph=GraphIndex(settings.vector_hnsw_m, settings.vector_hnsw_ef_construction, settings.vector_hnsw_ef),
    )
    cipher = EnvelopeCipher(ring, store)
    codec = MemoryCodec(cipher)
    derivation = await load_key_derivation(store, ring)
    result_cache, embedding_cache, redis_guard = build_caches(settings)
    # Cached results carry the caller's query texts; they stay sealed in memory and in Redis.
    result_cache = SealedResultCache(result_cache, derivation.derive("result-cache"))
    metrics = build_metrics(
        settings.service_name,
        settings.metrics_listen,
        store.count_pending_index,
        settings.index_lag_sample_interval_s,
        https=certificates.https_context if certificates is not None else None,
    )
    result_cache = MeteredResultCache(result_cache, metrics.metrics)
    embedding_cache = MeteredEmbeddingCache(embedding_cache, metrics.metrics)
    provider = build_tracer_provider(settings, span_processor)
    tracer = tracer_of(provider)
    limits = Limits.from_settings(settings)
    recorder = RecallRecorder(store, settings.bookkeeping_flush_interval_ms / 1000)
    lexical_index = build_lexical_index(settings)
    hasher = TermHasher(derivation.derive)
    lexical_writer = LexicalWriter(hasher, lexical_index) if lexical_index is not None else None
    pipeline = QueryPipeline(
        tracer=tracer,
        scope=ScopeStage(limits, settings.default_results, settings.importance_floor, settings.min_relevance),
        embed=EmbedStage(embedder, embedding_cache),
        recall=RecallStage(index, settings.recall_candidates),
        hydrate=HydrateStage(store, codec),
        rank=RankStage(
            settings.weights,
            settings.recency_half_life_days,
            settings.usage_saturation,
            UsageNorms(store),
            named_time_half_life_days=settings.named_time_half_life_days,
        ),
        bookkeep=BookkeepStage(recorder, result_cache),
        current=CurrentTruth(index),
        result_cache=result_cache,
        lexical=(
            LexicalRecall(hasher, lexical_index, settings.recall_candidates, settings.lexical_common_terms_from)
            if lexical_index
            else None
        ),
        rrf_k=settings.rrf_k,
        queries_rrf_k=settings.queries_rrf_k,
        # A local model already embeds on every core (see QueryPipeline).
        lexical_during_embedding=settings.embedding_provider != "local",
        named_depth_factor=settings.named_recall_depth_factor,
        depth_grows=settings.recall_depth_grows,
        elsewhere_weight=settings.named_elsewhere_weight,
    )
    page_tokens = PageTokens(derivation.derive("page-token"))
    indexer = Indexer(store, index, embedder, lexical_writer)
    changes = NamespaceChanges(result_cache)
    writes = WritePath(
        store=store,
        embedder=embedder,
        codec=codec,
        indexer=indexer,
        changes=changes,
        limits=limits,
        review=WriteReview(
            store=store,
            index=index,
            codec=codec,
            detector=build_contradiction_detector(settings),
            duplicate_similarity=settings.duplicate_similarity,
            contradiction_similarity=settings.contradiction_similarity,
            candidates=settings.contradiction_candidates,
        ),
    )
    conversations = ConversationPath(
        writes=writes,
        store=store,
        codec=codec,
        extractor=build_extractor(settings),
        summarizer=ExtractiveSummarizer(),
        limits=limits,
        indexer=indexer,
    )
    reconciler = Reconciler(store, index, embedder, codec, indexer, settings.reconcile_min_age_s, conversations)
    return Components(
        settings=settings,
        store=store,
        index=index,
        embedder=embedder,
        cipher=cipher,
        codec=codec,
        indexer=indexer,
        changes=changes,
        keys=ApiKeys(store, secrets.pepper, settings.auth_cache_ttl_s),
        pipeline=pipeline,
        writes=writes,
        conversations=conversations,
        reads=MemoryReads(
            store=store,
            codec=codec,
            page_tokens=page_tokens,
            limits=limits,
            default_page_size=settings.default_page_size,
        ),
        reconciler=reconciler,
        recorder=recorder,
        tracer_provider=provider,
        owns_embedder=owns_embedder,
        metrics=metrics,
        retrieval=build_retrieval(settings, pipeline, store, codec),
        redis=redis_guard,
        lexical_index=lexical_index,
        certificates=certificates,
        history=HistoryService(
            store=store,
            codec=codec,
            embedder=embedder,
            indexer=indexer,
            changes=changes,
            page_tokens=page_tokens,
            limits=limits,
            default_page_size=settings.default_page_size,
        ),
        maintenance=Maintenance(
            store=store,
            writes=writes,
            codec=codec,
            indexer=indexer,
            changes=changes,
            policy=maintenance_policy(settings),
        ),
    )


def maintenance_policy(settings: Settings) -> MaintenancePolicy:
    return MaintenancePolicy(
        decay_half_life_days=settings.decay_half_life_days,
        hot_idle_days=settings.tier_hot_idle_days,
        cold_idle_days=settings.tier_cold_idle_days,
        hot_importance=settings.tier_hot_importance,
        retention_days_by_kind={MemoryKind(k): v for k, v in settings.retention_days_by_kind.items()},
        recall_events_days=settings.recall_events_retention_days,
        lease_ttl_s=settings.maintenance_lease_ttl_s,
    )


def build_contradiction_detector(settings: Settings) -> ContradictionDetector:
    """The LLM judges contradictions when an endpoint is configured; rules otherwise (and as fallback)."""
    if not settings.llm_base_url:
        return RuleDetector()
    from memsvc.pipeline.write.review_llm import llm_detector

    return llm_detector(settings)


class Service:
    """The running service: the gRPC server over the components, and their background jobs."""

    def __init__(self, components: Components) -> None:
        c = components
        self.components = c
        self.grpc = MemoryServer(
            c.settings,
            keys=c.keys,
            tracer=tracer_of(c.tracer_provider),
            metrics=c.metrics.metrics,
            limiter=build_rate_limiter(
                c.settings.rate_limit_per_tenant_rps,
                c.settings.rate_limit_per_tenant_burst,
                c.redis,
                c.settings.redis_key_prefix,
            ),
            writes=WriteServicer(c.writes, c.conversations, c.reads, c.history),
            queries=QueryServicer(c.retrieval, c.metrics.metrics),
            record_store=c.store,
            vector_index=c.index,
            certificates=c.certificates,
        )

    async def start(self, listen: str | None = None) -> int:
        """Serve on `listen` (default: the configured address); return the bound port."""
        port = await self.grpc.start(listen)
        self.components.start_jobs()
        await self.components.metrics.start()
        return port

    async def stop(self, grace_s: float | None = None) -> None:
        """Stop taking calls, drain in-flight ones within the grace period, then close."""
        await self.grpc.stop(self.components.settings.grace_period_s if grace_s is None else grace_s)
        await self.components.close()


async def run_server(settings: Settings, *, worker: int | None = None) -> None:
    """Serve until SIGTERM or SIGINT, then drain. A worker process (`worker` = its index) leaves
    the first-start work to its supervisor and also stops when the supervisor is gone."""
    components = await build_components(settings)
    service = Service(components)
    token = None if worker is not None else await bootstrap_dev_key(settings, components.store, components.keys)
    # What start-up built (the model, the clients, the key ring) lives as long as the process.
    # Frozen out of the collector's generations, it is no longer walked by every full collection
    # in the middle of a query (about 100 ms each on the benchmark store; docs/performance.md).
    # Collected before the port opens, so no first call waits for it.
    gc.collect()
    gc.freeze()
    port = await service.start()
    host = settings.listen.rsplit(":", 1)[0]
    if token:
        print(dev_key_banner(token, f"{host}:{port}", settings), flush=True)
    who = "memsvc" if worker is None else f"memsvc worker {worker} (pid {os.getpid()})"
    transport = describe_transport(components.certificates, settings.probe_listen)
    print(f"{who} serving on {host}:{port} ({transport}; data in {settings.data_dir})", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    orphan_watch = loop.create_task(_stop_when_orphaned(stop)) if worker is not None else None
    await stop.wait()
    print(f"{who} draining in-flight calls", file=sys.stderr, flush=True)
    await service.stop()
    if orphan_watch is not None:
        orphan_watch.cancel()


async def _stop_when_orphaned(stop: asyncio.Event, interval_s: float = 1.0) -> None:
    """A worker whose supervisor died (SIGKILL, OOM) drains and exits instead of serving on alone."""
    parent = os.getppid()
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), interval_s)
        except TimeoutError:
            if os.getppid() != parent:
                log.warning("the supervisor (pid %d) is gone: stopping", parent)
                stop.set()
