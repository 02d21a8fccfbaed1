"""The one typed settings object of memsvc, read from MEMSVC_* environment variables or a file."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from memsvc.domain.models import MemoryKind


class RankWeights(BaseSettings):
    """Weights of the seven ranking signals (DESIGN.md); they need not sum to 1."""

    model_config = SettingsConfigDict(env_prefix="MEMSVC_WEIGHT_", extra="ignore")

    # Not negative: a signal counts for a memory or not at all (the rank stage's bounds rely on it).
    semantic: float = Field(default=0.50, ge=0.0)
    recency: float = Field(default=0.20, ge=0.0)
    importance: float = Field(default=0.15, ge=0.0)
    usage: float = Field(default=0.05, ge=0.0)
    quality: float = Field(default=0.05, ge=0.0)
    consistency: float = Field(default=0.025, ge=0.0)
    decay: float = Field(default=0.025, ge=0.0)


# A Milvus URI with one of these is a server; anything else is a Milvus Lite data directory.
MILVUS_SERVER_SCHEMES = ("http://", "https://", "tcp://", "unix:")


def available_cpus() -> int:
    """CPUs this process may use: its affinity, capped by a cgroup v2 CPU quota (a container's
    limit, which os.cpu_count() does not see)."""
    cpus = len(os.sched_getaffinity(0))
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
    except (OSError, ValueError):
        return cpus
    if quota == "max":
        return cpus
    return max(1, min(cpus, math.ceil(int(quota) / int(period))))


class Settings(BaseSettings):
    """Every setting of the service. Durations carry their unit in the name."""

    model_config = SettingsConfigDict(env_prefix="MEMSVC_", extra="ignore", env_nested_delimiter="__")

    # Serving
    listen: str = "127.0.0.1:50051"
    data_dir: Path = Path(".memsvc")
    max_concurrent_rpcs: int = 256
    grace_period_s: float = 10.0
    max_message_bytes: int = 8 * 1024 * 1024
    keepalive_time_s: float = 60.0
    keepalive_timeout_s: float = 20.0
    default_deadline_s: float = 30.0
    # How often readiness re-checks the record store and the vector index.
    readiness_interval_s: float = 5.0
    # Server processes on the one port (SO_REUSEPORT). 0: one on the embedded default (a Milvus
    # Lite directory belongs to one process), else one per CPU this container may use.
    workers: int = Field(default=0, ge=0, le=256)

    # Stores. Empty means the embedded default under data_dir.
    record_store_url: str = ""
    record_store_pool_size: int = 10
    record_store_timeout_s: float = 5.0
    # How long a SQLite statement waits for another connection's lock before the store reports
    # UNAVAILABLE (with retry information).
    sqlite_busy_timeout_ms: int = 5000
    milvus_uri: str = ""
    milvus_token: SecretStr = SecretStr("")
    milvus_db_name: str = ""
    # A Milvus server over TLS (an https:// URI): the CA (or certificate) to trust and the name its
    # certificate carries; with a client certificate and key, mutual TLS (Milvus tlsMode 2).
    milvus_server_pem_path: str = ""
    milvus_server_name: str = ""
    milvus_client_pem_path: str = ""
    milvus_client_key_path: str = ""
    vector_placement: Literal["partition", "partition_key"] = "partition"
    # After Milvus turns unreachable, calls fail fast for this long, then a new client is built;
    # the wait doubles while the outage lasts, up to the maximum.
    milvus_reconnect_backoff_s: float = 1.0
    milvus_reconnect_backoff_max_s: float = 30.0
    # Longest a single Milvus call (and a connection attempt) may take: a hung Milvus fails the
    # call, marks the index unavailable and frees the worker instead of holding it.
    milvus_call_timeout_s: float = 10.0
    # On a Milvus server, searches run Bounded and a namespace's search waits for the timestamp of
    # its last acknowledged write (kept in the record store): read-your-writes across replicas
    # without Strong's wait for the next time tick. False leaves plain Bounded (tests show the race).
    milvus_read_your_writes: bool = True
    # On a Milvus server, a collection's growing segments are sealed (flushed) this long after a
    # write to it, at most one flush per collection in that time; 0 leaves sealing to the
    # server, which seals a user's small partition only after a day (see MilvusVectorIndex).
    milvus_seal_delay_s: float = Field(default=60.0, ge=0.0)
    # A user's vectors are searched through an HNSW graph (both engines; on Milvus Lite one per
    # segment, built by the engine when it seals or merges one), so a search does not follow the
    # user's memory count (docs/performance.md, "Scaling"). On Milvus Lite a segment of at most
    # `vector_exact_rows` rows the filter keeps is scored exactly instead: the newest memories
    # (small segments) and narrow filters. `vector_hnsw_ef` is the search breadth (raised to the
    # limit where that is larger): recall@50 against exact search 0.99 on this model's vectors.
    # M and efConstruction apply to collections created from then on.
    vector_hnsw_m: int = Field(default=16, ge=4, le=64)
    vector_hnsw_ef_construction: int = Field(default=100, ge=8)
    vector_hnsw_ef: int = Field(default=128, ge=1)
    vector_exact_rows: int = Field(default=5_000, ge=0)
    # Milvus caps partitions per collection at 1,024 (with `_default`); users spill into shards.
    partitions_per_collection: int = 1000
    partition_key_partitions: int = 64
    redis_url: str = ""
    # Prefixes every Redis key, so several deployments (or tests) can share one Redis.
    redis_key_prefix: str = "memsvc"
    redis_timeout_s: float = 0.5
    # Redis over TLS (a rediss:// URL): the CA that signed its certificate (empty: the system's
    # trust store; the host name is always checked) and a client certificate for tls-auth-clients.
    redis_ca_file: Path | None = None
    redis_cert_file: Path | None = None
    redis_key_file: Path | None = None

    # Embeddings
    embedding_provider: Literal["local", "openai"] = "local"
    embedding_model_path: str = ""
    embedding_model_name: str = "all-MiniLM-L6-v2"
    # The local model on ONNX Runtime with int8 weights (about 0.6x the CPU of fp32 per text,
    # LoCoMo recall within 0.002) or in fp32 (the torch model's vectors). int8 is an embedding
    # version of its own: a server that finds memories of another version re-embeds them (the
    # reconciler). docs/performance.md.
    embedding_runtime: Literal["onnx", "onnx-int8"] = "onnx-int8"
    # Where the model's ONNX graphs are cached (built once per model and runtime, shared by every
    # data directory of the machine); empty: $XDG_CACHE_HOME/memsvc/onnx, else ~/.cache/memsvc/onnx.
    # An image builds them in and points this at them (deploy/Containerfile).
    embedding_onnx_dir: Path | None = None
    # ONNX Runtime lanes: forward passes run one thread each, a batch's passes on this many
    # threads side by side; 0 uses every CPU this process may run on. Set it to the container's
    # CPU limit where the pod sees more cores than it may use.
    embedding_threads: int = 0
    embedding_dimension: int = 384
    embedding_batch_size: int = 64
    # How long a query on an idle model waits for companions; batches form anyway while it is busy.
    embedding_batch_wait_ms: float = 0.0
    embedding_base_url: str = ""
    embedding_api_key: SecretStr = SecretStr("")
    embedding_timeout_s: float = 10.0
    embedding_cache_entries: int = 20_000
    # How long a query vector stays in the shared (Redis) embedding cache.
    embedding_cache_ttl_s: float = 86_400.0

    # Caches and bookkeeping
    result_cache_ttl_s: float = 300.0
    result_cache_entries: int = 10_000
    # Recall events and usage counts are written in one transaction per interval. On SQLite each
    # write makes every other connection, in every worker, drop its page cache, so the reads after
    # it go back to the file. Once a second rather than every 50 ms: 20 times fewer commits, served
    # hits 0-6 % less CPU (docs/performance.md), usage signals at most that much behind the reply.
    bookkeeping_flush_interval_ms: float = 1000.0
    reconcile_interval_s: float = 30.0
    reconcile_min_age_s: float = 5.0
    index_flush_delay_s: float = 1.0

    # Encryption in transit (memsvc/tls.py). The server's certificate and key (PEM files, as a
    # Kubernetes secret or cert-manager mounts them) turn TLS on for the gRPC port, the metrics
    # endpoint and `memsvc mcp`'s HTTP transport; they are re-read when they change, so new
    # connections get a rotated certificate without a restart. With a client CA, every port
    # requires a client certificate it signed (mutual TLS); API keys still decide the tenant.
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    tls_client_ca_file: Path | None = None
    # host:port of a plaintext port that serves only grpc.health.v1, for Kubernetes gRPC probes
    # (which cannot speak TLS); empty: none. No API call and no key ever crosses it.
    probe_listen: str = ""
    # How memsvc's own clients (the CLI, `memsvc mcp`, `memsvc bench query --address`) reach a TLS
    # server: on with client_tls or any file below; the CA that signed the server's certificate
    # (empty: the system's trust store), a client certificate for mutual TLS, and the name the
    # server's certificate carries when the address does not (a port-forward to 127.0.0.1).
    client_tls: bool = False
    client_ca_file: Path | None = None
    client_cert_file: Path | None = None
    client_key_file: Path | None = None
    client_tls_server_name: str = ""

    # Security
    master_keys: SecretStr = SecretStr("")
    api_key_pepper: SecretStr = SecretStr("")
    bootstrap_dev_key: bool = True
    auth_cache_ttl_s: float = 2.0
    # Requests per tenant per second (token bucket; 0 disables). With MEMSVC_REDIS_URL the bucket is
    # shared by every replica; without it (or while Redis is down) each replica counts on its own.
    rate_limit_per_tenant_rps: float = 0.0
    # Requests a tenant may save up and spend at once; 0 means one second's worth.
    rate_limit_per_tenant_burst: int = 0

    # Ranking
    weights: RankWeights = Field(default_factory=RankWeights)
    importance_floor: float = 0.5
    # DIRECT drops a candidate whose absolute relevance (ScoreBreakdown.relevance) is below this;
    # QueryRequest.min_relevance overrides it per query, 0 turns it off. 0.1 is a cosine of 0.14:
    # a short memory asked for in other words scores more (the 5th percentile of the paraphrase
    # set is 0.17), most unrelated memories less (three quarters below 0.10).
    min_relevance: float = Field(default=0.1, ge=0.0, le=1.0)
    # Recency halves with every this many days a candidate is older than the query's newest
    # candidate (rank.recency_reference). A year: the newest of a user's chats stands out from
    # the years before it, while the months of one conversation stay near each other.
    recency_half_life_days: float = 365.0
    # A query that names a time ("in June 2023", "on 7 July"): recency is nearness to it instead,
    # halved this many days before or after it (rank.RankStage._recency).
    named_time_half_life_days: float = Field(default=14.0, ge=0.0)
    usage_saturation: float = 10.0
    recall_candidates: int = 50
    # A question that names speakers of the user's chats: dense recall looks up to this many
    # times deeper (less where most memories involve them: recall.named_depth_factor), or within
    # their conversations where they are in few of the memories (QueryPipeline._dense_within), and
    # both channels put what involves them first (QueryPipeline._named_first); 1 turns it off.
    named_recall_depth_factor: int = Field(default=4, ge=1)
    # ... and a candidate from a conversation none of them took part in keeps this share of its
    # fused score (a long history of other people's chats about the same things); 1 turns it off.
    named_elsewhere_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    # Each channel recalls more as a user's memories grow: the square root of their count when
    # that exceeds recall_candidates (recall.candidate_depth); False keeps recall_candidates.
    recall_depth_grows: bool = True
    # From this many memories in a namespace, a query term more than a fifth of them hold is not
    # scanned by the lexical channel, only weighed on the other terms' hits (LexicalRecall).
    lexical_common_terms_from: int = Field(default=2_000, ge=1)
    # Hybrid recall: the lexical channel (keyed-hash BM25) fused with dense recall by Reciprocal
    # Rank Fusion; k damps rank differences. The RRF paper's 60 was chosen for 1,000-deep runs;
    # our lists are about 50 deep and read from the top ten, so a smaller k keeps the difference
    # between a channel's first ranks (docs/retrieval.md).
    lexical_enabled: bool = True
    rrf_k: int = 20
    # The fusion of a mode's several queries (multi-query, fusion, applicability, agent) keeps
    # the RRF paper's 60: its lists are deeper (up to a 100-candidate pool per query).
    queries_rrf_k: int = 60
    bm25_k1: float = 1.2
    # Memories are short (a dialogue turn is about 14 terms), so full length normalisation
    # (0.75) over-rewards two-word memories that happen to hold a query term.
    bm25_b: float = 0.5
    # In a namespace of more than 5,000 memories a lexical search reads at most this many
    # postings of each query term, the newest, and scores its best candidates exactly over every
    # term: its cost no longer follows the longest posting lists (memsvc/stores/lexical/sql.py).
    lexical_term_postings: int = Field(default=500, ge=50)

    # Memory lifecycle: deduplication, contradictions, decay, tiers, expiry (the maintenance job)
    # How often the in-process scheduler runs maintenance; 0 disables it (a CronJob runs
    # `memsvc maintain` instead). Runs on several replicas are safe: they share a lease.
    maintenance_interval_s: float = 3600.0
    maintenance_lease_ttl_s: float = 300.0
    decay_half_life_days: float = 30.0
    tier_hot_idle_days: float = 7.0
    tier_cold_idle_days: float = 30.0
    tier_hot_importance: float = 0.9
    # Days after creation when memories of a kind are deleted, e.g. '{"episode": 365}'.
    retention_days_by_kind: dict[str, float] = Field(default_factory=dict)
    # Days a query's 'recall' events (one per result) are kept; 0 keeps them forever.
    recall_events_retention_days: float = Field(default=30.0, ge=0)
    # A new memory this similar (cosine) with the same content terms (and numbers, and no negation
    # flipped) confirms the old one instead of adding a row.
    duplicate_similarity: float = 0.92
    # Memories at least this similar are checked for contradictions with a new one.
    contradiction_similarity: float = 0.2
    contradiction_candidates: int = 8

    # Limits
    max_content_chars: int = 32_768
    max_batch_items: int = 256
    max_query_chars: int = 4_096
    max_results: int = 100
    default_results: int = 10
    max_tags: int = 32
    max_metadata_bytes: int = 16_384
    max_page_size: int = 500
    default_page_size: int = 50
    # The most memories one user may hold (0: no limit). A call whose new items would take the
    # user past it (AddMemories, AddConversation's turns, ImportMemories) is refused whole with
    # RESOURCE_EXHAUSTED naming the limit; the memories derived from accepted turns are still
    # written. Nothing is ever dropped from recall to make room (docs/performance.md).
    max_memories_per_user: int = Field(default=0, ge=0)

    # LLM (any OpenAI-compatible chat endpoint); empty base URL means offline heuristics only
    llm_base_url: str = ""
    llm_model: str = "gpt-4o-mini"
    llm_api_key: SecretStr = SecretStr("")
    llm_timeout_s: float = 5.0
    llm_temperature: float = 0.3
    # Conversation extraction: turns per LLM call, and the time one call may take (it reads a
    # whole batch, so it gets longer than a query-time decision).
    extraction_batch_turns: int = Field(default=40, ge=1, le=256)
    extraction_timeout_s: float = Field(default=30.0, gt=0)

    # Retrieval strategies (seeds 000-003)
    multi_query_questions: int = 2
    multi_query_results_per_query: int = 3
    multi_query_limit: int = 7
    # Candidates APPLICABILITY re-scores (at least 3x the limit).
    applicability_pool: int = 100
    agent_max_attempts: int = 3
    agent_confidence_threshold: float = 0.8
    default_token_budget: int = 1024
    max_token_budget: int = 32_768

    # Telemetry
    otlp_endpoint: str = ""
    # Share of the traces that start here sent to the OTLP endpoint; a caller's `traceparent`
    # decides for its own traces. Metrics count every call either way.
    trace_sample_ratio: float = Field(default=1.0, ge=0.0, le=1.0)
    # host:port of the Prometheus scrape endpoint (/metrics), e.g. 0.0.0.0:9464; empty turns it off.
    metrics_listen: str = ""
    index_lag_sample_interval_s: float = 5.0
    service_name: str = "memsvc"

    @model_validator(mode="after")
    def _check(self) -> Settings:
        if self.partitions_per_collection < 1 or self.partitions_per_collection > 1023:
            raise ValueError("partitions_per_collection must be within 1..1023")
        kinds = {m.value for m in MemoryKind}
        unknown = sorted(set(self.retention_days_by_kind) - kinds)
        if unknown:
            raise ValueError(f"retention_days_by_kind: unknown kinds {unknown}; use {sorted(kinds)}")
        if self.workers > 1 and self.is_embedded_milvus:
            raise ValueError(
                "workers > 1 needs a Milvus server (MEMSVC_MILVUS_URI=http://...): "
                "a Milvus Lite directory can be opened by one process only"
            )
        return self

    @property
    def sqlite_path(self) -> Path:
        url = self.record_store_url
        if not url:
            return self.data_dir / "memsvc.db"
        if url.startswith("sqlite:///"):
            return Path(url.removeprefix("sqlite:///"))
        raise ValueError(f"not a SQLite URL: {url}")

    @property
    def uses_postgres(self) -> bool:
        return self.record_store_url.startswith(("postgresql://", "postgres://"))

    @property
    def resolved_milvus_uri(self) -> str:
        return self.milvus_uri or str(self.data_dir / "milvus.db")

    @property
    def is_embedded_milvus(self) -> bool:
        return not self.milvus_uri.startswith(MILVUS_SERVER_SCHEMES)

    @property
    def resolved_workers(self) -> int:
        if self.workers:
            return self.workers
        return 1 if self.is_embedded_milvus else available_cpus()

    @property
    def resolved_onnx_dir(self) -> Path:
        if self.embedding_onnx_dir is not None:
            return self.embedding_onnx_dir
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(cache) / "memsvc" / "onnx"

    @property
    def dev_key_path(self) -> Path:
        return self.data_dir / "dev-api-key"

    @property
    def local_secrets_path(self) -> Path:
        return self.data_dir / "local-secrets.json"


def load_settings(env_file: str | Path | None = None) -> Settings:
    """Settings from the environment, overlaid on an optional dotenv-style file."""
    if env_file is None:
        return Settings()
    return Settings(_env_file=str(env_file))  # type: ignore[call-arg]
