"""Versioned schema migrations of the record stores, applied in order by `memsvc migrate`."""

from __future__ import annotations

Migration = tuple[int, tuple[str, ...]]

# Every query writes one memory_events row per returned memory: each index on the table is
# paid for on every query (about 0.09 ms of record-store CPU per index per query of 10
# results). No query reads events by memory id, and only feedback events are looked up by
# request, so recall rows go into the (ns, at) index alone.
_RECALL_EVENTS_INDEXES: Migration = (
    6,
    (
        "DROP INDEX IF EXISTS memory_events_memory",
        "DROP INDEX IF EXISTS memory_events_request",
        "CREATE INDEX memory_events_feedback ON memory_events (ns, request_id, memory_id) "
        "WHERE event IN ('used', 'unused')",
    ),
)


def _derivation_root(blob: str) -> Migration:
    """The secret the term-hash, page-token and result-cache keys derive from, wrapped by the
    master key ring like the data keys, so that retiring a master key does not change them."""
    return (
        7,
        (
            f"""CREATE TABLE derivation_root (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                master_version INTEGER NOT NULL,
                wrapped {blob} NOT NULL
            )""",
        ),
    )


# A lexical search joined every posting to its memory row only to drop inactive memories: two
# more B-tree descents per posting, about 40 % of the search (docs/performance.md). The lexical
# document carries the flag instead; a trigger keeps it in step with every status change,
# whatever statement makes it.
_ACTIVE_FLAG = "CASE WHEN NEW.retention_status = 'active' THEN 1 ELSE 0 END"
_LEXICAL_DOCS_ACTIVE_COLUMN = (
    "ALTER TABLE lexical_docs ADD COLUMN active INTEGER NOT NULL DEFAULT 1",
    "UPDATE lexical_docs SET active = 0 "
    "WHERE memory_id IN (SELECT id FROM memories WHERE retention_status <> 'active')",
)
_SQLITE_LEXICAL_DOCS_ACTIVE: Migration = (
    8,
    (
        *_LEXICAL_DOCS_ACTIVE_COLUMN,
        f"""CREATE TRIGGER memories_lexical_status AFTER UPDATE OF retention_status ON memories
            WHEN OLD.retention_status IS NOT NEW.retention_status BEGIN
                UPDATE lexical_docs SET active = {_ACTIVE_FLAG} WHERE memory_id = NEW.id;
            END""",
    ),
)
_POSTGRES_LEXICAL_DOCS_ACTIVE: Migration = (
    8,
    (
        *_LEXICAL_DOCS_ACTIVE_COLUMN,
        f"""CREATE FUNCTION memsvc_memory_status_lexical() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                UPDATE lexical_docs SET active = {_ACTIVE_FLAG} WHERE memory_id = NEW.id;
                RETURN NULL;
            END $$""",
        "CREATE TRIGGER memories_lexical_status AFTER UPDATE OF retention_status ON memories "
        "FOR EACH ROW WHEN (OLD.retention_status IS DISTINCT FROM NEW.retention_status) "
        "EXECUTE FUNCTION memsvc_memory_status_lexical()",
    ),
)

# A lexical search looks up every posting's document for its length and whether it is active:
# with both in an index on the memory id, that is one B-tree descent instead of two (the id's
# index, then the row). 9 % fewer instructions a search on SQLite (docs/performance.md).
_LEXICAL_DOCS_COVERING: Migration = (
    9,
    ("CREATE INDEX lexical_docs_search ON lexical_docs (memory_id, active, length)",),
)


# Conversation turns that only acknowledge or react: kept as context, never ranked as results.
_ACKNOWLEDGEMENTS: Migration = (
    10,
    ("ALTER TABLE memories ADD COLUMN acknowledgement INTEGER NOT NULL DEFAULT 0",),
)


# Each term's document frequency per namespace, kept by triggers on the postings: a search of a
# large namespace reads the IDF of its terms here instead of counting their postings, and reads
# only the newest postings of its most common terms (memsvc/stores/lexical/sql.py).
_LEXICAL_TERMS_TABLE = (
    "INSERT INTO lexical_terms (ns, term, df) SELECT ns, term, COUNT(*) FROM lexical_postings GROUP BY ns, term"
)
_SQLITE_LEXICAL_TERMS: Migration = (
    11,
    (
        """CREATE TABLE lexical_terms (
            ns TEXT NOT NULL,
            term INTEGER NOT NULL,
            df INTEGER NOT NULL,
            PRIMARY KEY (ns, term)
        ) WITHOUT ROWID""",
        _LEXICAL_TERMS_TABLE,
        """CREATE TRIGGER lexical_postings_inserted AFTER INSERT ON lexical_postings BEGIN
            INSERT INTO lexical_terms (ns, term, df) VALUES (NEW.ns, NEW.term, 1)
            ON CONFLICT (ns, term) DO UPDATE SET df = df + 1;
        END""",
        """CREATE TRIGGER lexical_postings_deleted AFTER DELETE ON lexical_postings BEGIN
            UPDATE lexical_terms SET df = df - 1 WHERE ns = OLD.ns AND term = OLD.term;
            DELETE FROM lexical_terms WHERE ns = OLD.ns AND term = OLD.term AND df <= 0;
        END""",
    ),
)
_POSTGRES_LEXICAL_TERMS: Migration = (
    11,
    (
        """CREATE TABLE lexical_terms (
            ns TEXT NOT NULL,
            term BIGINT NOT NULL,
            df BIGINT NOT NULL,
            PRIMARY KEY (ns, term)
        )""",
        _LEXICAL_TERMS_TABLE,
        """CREATE FUNCTION memsvc_lexical_posting_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO lexical_terms (ns, term, df) VALUES (NEW.ns, NEW.term, 1)
                ON CONFLICT (ns, term) DO UPDATE SET df = lexical_terms.df + 1;
                RETURN NULL;
            END $$""",
        "CREATE TRIGGER lexical_postings_inserted AFTER INSERT ON lexical_postings "
        "FOR EACH ROW EXECUTE FUNCTION memsvc_lexical_posting_inserted()",
        """CREATE FUNCTION memsvc_lexical_posting_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                UPDATE lexical_terms SET df = df - 1 WHERE ns = OLD.ns AND term = OLD.term;
                DELETE FROM lexical_terms WHERE ns = OLD.ns AND term = OLD.term AND df <= 0;
                RETURN NULL;
            END $$""",
        "CREATE TRIGGER lexical_postings_deleted AFTER DELETE ON lexical_postings "
        "FOR EACH ROW EXECUTE FUNCTION memsvc_lexical_posting_deleted()",
    ),
)


# A user's memories of one kind, newest first: the interaction contract reads the active
# instructions for every composed context, and by the namespace's time index alone it walked
# the whole namespace to find a handful (37 ms at 13,000 memories, 0.01 ms with this index).
_MEMORIES_BY_KIND: Migration = (
    12,
    ("CREATE INDEX memories_ns_kind_created ON memories (ns, kind, created_at DESC, id DESC)",),
)


# A user's memories of one conversation, in order: each AddConversation call reads its session's
# turns (for the summary) and every query's `context_window` the turns around its results. By
# the namespace's indexes alone both walked the user's whole history, so writing a session and
# attaching context took longer as the history grew.
_MEMORIES_BY_SESSION: Migration = (
    13,
    ("CREATE INDEX memories_ns_session_created ON memories (ns, session_id, created_at DESC, id DESC)",),
)

# The session of each of a query's candidates, for a question that names a speaker (which
# candidates are from a conversation with them): a few hundred ids, each read from this index
# alone rather than by primary key and then its row (2.5 against 4.1 ms for 570 ids of 13,000).
_MEMORIES_SESSION_OF: Migration = (
    14,
    ("CREATE INDEX memories_ns_id_session ON memories (ns, id, session_id)",),
)

SQLITE_MIGRATIONS: tuple[Migration, ...] = (
    (
        1,
        (
            """CREATE TABLE memories (
                id TEXT PRIMARY KEY,
                ns TEXT NOT NULL,
                tenant TEXT NOT NULL,
                project TEXT NOT NULL,
                environment TEXT NOT NULL,
                user_id TEXT NOT NULL,
                ciphertext BLOB NOT NULL,
                role TEXT NOT NULL,
                kind TEXT NOT NULL,
                tags TEXT NOT NULL,
                session_id TEXT NOT NULL,
                importance REAL NOT NULL,
                tier TEXT NOT NULL,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL,
                usage_count INTEGER NOT NULL DEFAULT 0,
                last_accessed_at REAL,
                quality REAL NOT NULL,
                consistency REAL NOT NULL,
                decay REAL NOT NULL,
                retention_status TEXT NOT NULL,
                embedding_version TEXT NOT NULL,
                superseded_by TEXT NOT NULL DEFAULT '',
                idempotency_key TEXT,
                indexed INTEGER NOT NULL DEFAULT 0,
                revision INTEGER NOT NULL DEFAULT 0
            )""",
            "CREATE INDEX memories_ns_created ON memories (ns, created_at DESC, id DESC)",
            "CREATE UNIQUE INDEX memories_ns_idempotency ON memories (ns, idempotency_key) "
            "WHERE idempotency_key IS NOT NULL",
            "CREATE INDEX memories_unindexed ON memories (updated_at) WHERE indexed = 0",
            """CREATE TABLE memory_events (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                memory_id TEXT NOT NULL,
                ns TEXT NOT NULL,
                event TEXT NOT NULL,
                request_id TEXT NOT NULL,
                score REAL,
                rank INTEGER,
                at REAL NOT NULL
            )""",
            "CREATE INDEX memory_events_ns_at ON memory_events (ns, at)",
            "CREATE INDEX memory_events_memory ON memory_events (memory_id)",
            """CREATE TABLE api_keys (
                key_id TEXT PRIMARY KEY,
                secret_hash BLOB NOT NULL,
                tenant TEXT NOT NULL,
                project TEXT NOT NULL,
                environment TEXT NOT NULL,
                permissions TEXT NOT NULL,
                created_at REAL NOT NULL,
                expires_at REAL,
                revoked_at REAL,
                description TEXT NOT NULL DEFAULT ''
            )""",
            """CREATE TABLE data_keys (
                ns TEXT NOT NULL,
                version INTEGER NOT NULL,
                master_version INTEGER NOT NULL,
                wrapped BLOB NOT NULL,
                created_at REAL NOT NULL,
                PRIMARY KEY (ns, version)
            )""",
            """CREATE TABLE vector_tombstones (
                memory_id TEXT PRIMARY KEY,
                ns TEXT NOT NULL,
                embedding_version TEXT NOT NULL,
                at REAL NOT NULL
            )""",
            """CREATE TABLE namespace_tombstones (
                ns TEXT PRIMARY KEY,
                tenant TEXT NOT NULL,
                project TEXT NOT NULL,
                environment TEXT NOT NULL,
                user_id TEXT NOT NULL,
                at REAL NOT NULL
            )""",
            """CREATE TABLE vector_placements (
                ns TEXT NOT NULL,
                prefix TEXT NOT NULL,
                shard INTEGER NOT NULL,
                collection TEXT NOT NULL,
                partition_name TEXT NOT NULL,
                PRIMARY KEY (ns, prefix)
            )""",
            "CREATE INDEX vector_placements_shard ON vector_placements (prefix, shard)",
        ),
    ),
    (
        2,
        (
            # The lexical channel: keyed-hash term ids only (see memsvc/stores/lexical). Per-memory
            # lengths and per-namespace totals feed BM25; triggers keep them in step, and deleting a
            # memory row (DeleteMemory, ForgetUser) drops its postings in the same transaction.
            """CREATE TABLE lexical_docs (
                memory_id TEXT PRIMARY KEY,
                ns TEXT NOT NULL,
                length INTEGER NOT NULL
            )""",
            """CREATE TABLE lexical_postings (
                ns TEXT NOT NULL,
                term INTEGER NOT NULL,
                memory_id TEXT NOT NULL,
                tf INTEGER NOT NULL,
                PRIMARY KEY (ns, term, memory_id)
            ) WITHOUT ROWID""",
            "CREATE INDEX lexical_postings_memory ON lexical_postings (memory_id)",
            """CREATE TABLE lexical_stats (
                ns TEXT PRIMARY KEY,
                docs INTEGER NOT NULL,
                total_length INTEGER NOT NULL
            )""",
            """CREATE TRIGGER lexical_docs_inserted AFTER INSERT ON lexical_docs BEGIN
                INSERT INTO lexical_stats (ns, docs, total_length) VALUES (NEW.ns, 1, NEW.length)
                ON CONFLICT (ns) DO UPDATE SET docs = docs + 1, total_length = total_length + NEW.length;
            END""",
            """CREATE TRIGGER lexical_docs_deleted AFTER DELETE ON lexical_docs BEGIN
                DELETE FROM lexical_postings WHERE memory_id = OLD.memory_id;
                UPDATE lexical_stats SET docs = docs - 1, total_length = total_length - OLD.length
                WHERE ns = OLD.ns;
                DELETE FROM lexical_stats WHERE ns = OLD.ns AND docs <= 0;
            END""",
            """CREATE TRIGGER memories_lexical_deleted AFTER DELETE ON memories BEGIN
                DELETE FROM lexical_docs WHERE memory_id = OLD.id;
            END""",
        ),
    ),
    (
        3,
        (
            # The memory lifecycle: expiry, confirmation, score reasons, vitality from
            # feedback; a version row per change (content sealed like the memory); the lease that
            # keeps two maintenance runs from overlapping; per-tenant usage percentiles.
            "ALTER TABLE memories ADD COLUMN expires_at REAL",
            "ALTER TABLE memories ADD COLUMN confirmation_count INTEGER NOT NULL DEFAULT 1",
            "ALTER TABLE memories ADD COLUMN score_reasons TEXT NOT NULL DEFAULT '{}'",
            "ALTER TABLE memories ADD COLUMN vitality REAL NOT NULL DEFAULT 1.0",
            "ALTER TABLE memories ADD COLUMN feedback_used INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE memories ADD COLUMN feedback_unused INTEGER NOT NULL DEFAULT 0",
            "CREATE INDEX memories_expires ON memories (expires_at) WHERE expires_at IS NOT NULL",
            "CREATE INDEX memories_superseded_by ON memories (ns, superseded_by) WHERE superseded_by <> ''",
            """CREATE TABLE memory_versions (
                id TEXT PRIMARY KEY,
                memory_id TEXT NOT NULL,
                ns TEXT NOT NULL,
                tenant TEXT NOT NULL,
                project TEXT NOT NULL,
                environment TEXT NOT NULL,
                user_id TEXT NOT NULL,
                version INTEGER NOT NULL,
                at REAL NOT NULL,
                actor TEXT NOT NULL,
                change TEXT NOT NULL,
                fields TEXT NOT NULL,
                description TEXT NOT NULL,
                tier TEXT NOT NULL,
                retention_status TEXT NOT NULL,
                importance REAL NOT NULL,
                ciphertext BLOB,
                UNIQUE (memory_id, version)
            )""",
            "CREATE INDEX memory_versions_ns ON memory_versions (ns)",
            "CREATE INDEX memory_events_request ON memory_events (ns, request_id, memory_id)",
            """CREATE TABLE maintenance_leases (
                name TEXT PRIMARY KEY,
                holder TEXT NOT NULL,
                expires_at REAL NOT NULL
            )""",
            """CREATE TABLE tenant_usage_stats (
                tenant TEXT PRIMARY KEY,
                p50 REAL NOT NULL,
                p90 REAL NOT NULL,
                p99 REAL NOT NULL,
                memories INTEGER NOT NULL,
                computed_at REAL NOT NULL
            )""",
        ),
    ),
    (
        4,
        (
            # The Milvus server timestamp of each namespace's last vector write, read by every
            # replica so a search can wait for exactly that write (read-your-writes, not Strong).
            """CREATE TABLE vector_write_clock (
                ns TEXT NOT NULL,
                prefix TEXT NOT NULL,
                ts INTEGER NOT NULL,
                PRIMARY KEY (ns, prefix)
            )""",
        ),
    ),
    (
        5,
        (
            # Conversations: what a memory was derived from, turns whose extraction and summary
            # are still to be written (an outbox, like `indexed`), and summaries gone stale.
            "ALTER TABLE memories ADD COLUMN source_ids TEXT NOT NULL DEFAULT '[]'",
            "ALTER TABLE memories ADD COLUMN extraction_pending INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE memories ADD COLUMN stale INTEGER NOT NULL DEFAULT 0",
            "CREATE INDEX memories_extraction_pending ON memories (updated_at) WHERE extraction_pending = 1",
        ),
    ),
    _RECALL_EVENTS_INDEXES,
    _derivation_root("BLOB"),
    _SQLITE_LEXICAL_DOCS_ACTIVE,
    _LEXICAL_DOCS_COVERING,
    _ACKNOWLEDGEMENTS,
    _SQLITE_LEXICAL_TERMS,
    _MEMORIES_BY_KIND,
    _MEMORIES_BY_SESSION,
    _MEMORIES_SESSION_OF,
)

# The same versions as SQLite, in PostgreSQL types: BYTEA ciphertext, JSONB tags (for `?|`),
# "C" collation on ids so keyset paging orders them bytewise, as SQLite does.
POSTGRES_MIGRATIONS: tuple[Migration, ...] = (
    (
        1,
        (
            """CREATE TABLE memories (
                id TEXT COLLATE "C" PRIMARY KEY,
                ns TEXT NOT NULL,
                tenant TEXT NOT NULL,
                project TEXT NOT NULL,
                environment TEXT NOT NULL,
                user_id TEXT NOT NULL,
                ciphertext BYTEA NOT NULL,
                role TEXT NOT NULL,
                kind TEXT NOT NULL,
                tags JSONB NOT NULL,
                session_id TEXT NOT NULL,
                importance DOUBLE PRECISION NOT NULL,
                tier TEXT NOT NULL,
                created_at DOUBLE PRECISION NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL,
                usage_count BIGINT NOT NULL DEFAULT 0,
                last_accessed_at DOUBLE PRECISION,
                quality DOUBLE PRECISION NOT NULL,
                consistency DOUBLE PRECISION NOT NULL,
                decay DOUBLE PRECISION NOT NULL,
                retention_status TEXT NOT NULL,
                embedding_version TEXT NOT NULL,
                superseded_by TEXT NOT NULL DEFAULT '',
                idempotency_key TEXT,
                indexed INTEGER NOT NULL DEFAULT 0,
                revision INTEGER NOT NULL DEFAULT 0
            )""",
            "CREATE INDEX memories_ns_created ON memories (ns, created_at DESC, id DESC)",
            "CREATE UNIQUE INDEX memories_ns_idempotency ON memories (ns, idempotency_key) "
            "WHERE idempotency_key IS NOT NULL",
            "CREATE INDEX memories_unindexed ON memories (updated_at) WHERE indexed = 0",
            """CREATE TABLE memory_events (
                id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                memory_id TEXT NOT NULL,
                ns TEXT NOT NULL,
                event TEXT NOT NULL,
                request_id TEXT NOT NULL,
                score DOUBLE PRECISION,
                rank INTEGER,
                at DOUBLE PRECISION NOT NULL
            )""",
            "CREATE INDEX memory_events_ns_at ON memory_events (ns, at)",
            "CREATE INDEX memory_events_memory ON memory_events (memory_id)",
            """CREATE TABLE api_keys (
                key_id TEXT PRIMARY KEY,
                secret_hash BYTEA NOT NULL,
                tenant TEXT NOT NULL,
                project TEXT NOT NULL,
                environment TEXT NOT NULL,
                permissions TEXT NOT NULL,
                created_at DOUBLE PRECISION NOT NULL,
                expires_at DOUBLE PRECISION,
                revoked_at DOUBLE PRECISION,
                description TEXT NOT NULL DEFAULT ''
            )""",
            """CREATE TABLE data_keys (
                ns TEXT NOT NULL,
                version INTEGER NOT NULL,
                master_version INTEGER NOT NULL,
                wrapped BYTEA NOT NULL,
                created_at DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (ns, version)
            )""",
            """CREATE TABLE vector_tombstones (
                memory_id TEXT PRIMARY KEY,
                ns TEXT NOT NULL,
                embedding_version TEXT NOT NULL,
                at DOUBLE PRECISION NOT NULL
            )""",
            "CREATE INDEX vector_tombstones_ns ON vector_tombstones (ns)",
            """CREATE TABLE namespace_tombstones (
                ns TEXT PRIMARY KEY,
                tenant TEXT NOT NULL,
                project TEXT NOT NULL,
                environment TEXT NOT NULL,
                user_id TEXT NOT NULL,
                at DOUBLE PRECISION NOT NULL
            )""",
            """CREATE TABLE vector_placements (
                ns TEXT NOT NULL,
                prefix TEXT NOT NULL,
                shard INTEGER NOT NULL,
                collection TEXT NOT NULL,
                partition_name TEXT NOT NULL,
                PRIMARY KEY (ns, prefix)
            )""",
            "CREATE INDEX vector_placements_shard ON vector_placements (prefix, shard)",
        ),
    ),
    (
        2,
        (
            # The lexical channel, as in SQLite: keyed-hash term ids only; triggers keep lengths
            # and per-namespace totals in step and drop postings with their memory row.
            """CREATE TABLE lexical_docs (
                memory_id TEXT COLLATE "C" PRIMARY KEY,
                ns TEXT NOT NULL,
                length INTEGER NOT NULL
            )""",
            """CREATE TABLE lexical_postings (
                ns TEXT NOT NULL,
                term BIGINT NOT NULL,
                memory_id TEXT NOT NULL,
                tf INTEGER NOT NULL,
                PRIMARY KEY (ns, term, memory_id)
            )""",
            "CREATE INDEX lexical_postings_memory ON lexical_postings (memory_id)",
            """CREATE TABLE lexical_stats (
                ns TEXT PRIMARY KEY,
                docs BIGINT NOT NULL,
                total_length BIGINT NOT NULL
            )""",
            """CREATE FUNCTION memsvc_lexical_doc_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO lexical_stats (ns, docs, total_length) VALUES (NEW.ns, 1, NEW.length)
                ON CONFLICT (ns) DO UPDATE SET docs = lexical_stats.docs + 1,
                    total_length = lexical_stats.total_length + NEW.length;
                RETURN NULL;
            END $$""",
            "CREATE TRIGGER lexical_docs_inserted AFTER INSERT ON lexical_docs "
            "FOR EACH ROW EXECUTE FUNCTION memsvc_lexical_doc_inserted()",
            """CREATE FUNCTION memsvc_lexical_doc_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                DELETE FROM lexical_postings WHERE memory_id = OLD.memory_id;
                UPDATE lexical_stats SET docs = docs - 1, total_length = total_length - OLD.length
                WHERE ns = OLD.ns;
                DELETE FROM lexical_stats WHERE ns = OLD.ns AND docs <= 0;
                RETURN NULL;
            END $$""",
            "CREATE TRIGGER lexical_docs_deleted AFTER DELETE ON lexical_docs "
            "FOR EACH ROW EXECUTE FUNCTION memsvc_lexical_doc_deleted()",
            """CREATE FUNCTION memsvc_memory_deleted_lexical() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                DELETE FROM lexical_docs WHERE memory_id = OLD.id;
                RETURN NULL;
            END $$""",
            "CREATE TRIGGER memories_lexical_deleted AFTER DELETE ON memories "
            "FOR EACH ROW EXECUTE FUNCTION memsvc_memory_deleted_lexical()",
        ),
    ),
    (
        3,
        (
            # The memory lifecycle: expiry, confirmation, score reasons, vitality from
            # feedback; a version row per change (content sealed like the memory); the lease that
            # keeps two maintenance runs from overlapping; per-tenant usage percentiles.
            "ALTER TABLE memories ADD COLUMN expires_at DOUBLE PRECISION",
            "ALTER TABLE memories ADD COLUMN confirmation_count INTEGER NOT NULL DEFAULT 1",
            "ALTER TABLE memories ADD COLUMN score_reasons TEXT NOT NULL DEFAULT '{}'",
            "ALTER TABLE memories ADD COLUMN vitality DOUBLE PRECISION NOT NULL DEFAULT 1.0",
            "ALTER TABLE memories ADD COLUMN feedback_used INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE memories ADD COLUMN feedback_unused INTEGER NOT NULL DEFAULT 0",
            "CREATE INDEX memories_expires ON memories (expires_at) WHERE expires_at IS NOT NULL",
            "CREATE INDEX memories_superseded_by ON memories (ns, superseded_by) WHERE superseded_by <> ''",
            """CREATE TABLE memory_versions (
                id TEXT PRIMARY KEY,
                memory_id TEXT NOT NULL,
                ns TEXT NOT NULL,
                tenant TEXT NOT NULL,
                project TEXT NOT NULL,
                environment TEXT NOT NULL,
                user_id TEXT NOT NULL,
                version INTEGER NOT NULL,
                at DOUBLE PRECISION NOT NULL,
                actor TEXT NOT NULL,
                change TEXT NOT NULL,
                fields TEXT NOT NULL,
                description TEXT NOT NULL,
                tier TEXT NOT NULL,
                retention_status TEXT NOT NULL,
                importance DOUBLE PRECISION NOT NULL,
                ciphertext BYTEA,
                UNIQUE (memory_id, version)
            )""",
            "CREATE INDEX memory_versions_ns ON memory_versions (ns)",
            "CREATE INDEX memory_events_request ON memory_events (ns, request_id, memory_id)",
            """CREATE TABLE maintenance_leases (
                name TEXT PRIMARY KEY,
                holder TEXT NOT NULL,
                expires_at DOUBLE PRECISION NOT NULL
            )""",
            """CREATE TABLE tenant_usage_stats (
                tenant TEXT PRIMARY KEY,
                p50 DOUBLE PRECISION NOT NULL,
                p90 DOUBLE PRECISION NOT NULL,
                p99 DOUBLE PRECISION NOT NULL,
                memories BIGINT NOT NULL,
                computed_at DOUBLE PRECISION NOT NULL
            )""",
        ),
    ),
    (
        4,
        (
            # The Milvus server timestamp of each namespace's last vector write, read by every
            # replica so a search can wait for exactly that write (read-your-writes, not Strong).
            """CREATE TABLE vector_write_clock (
                ns TEXT NOT NULL,
                prefix TEXT NOT NULL,
                ts BIGINT NOT NULL,
                PRIMARY KEY (ns, prefix)
            )""",
        ),
    ),
    (
        5,
        (
            # Conversations: what a memory was derived from, turns whose extraction and summary
            # are still to be written (an outbox, like `indexed`), and summaries gone stale.
            "ALTER TABLE memories ADD COLUMN source_ids TEXT NOT NULL DEFAULT '[]'",
            "ALTER TABLE memories ADD COLUMN extraction_pending INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE memories ADD COLUMN stale INTEGER NOT NULL DEFAULT 0",
            "CREATE INDEX memories_extraction_pending ON memories (updated_at) WHERE extraction_pending = 1",
        ),
    ),
    _RECALL_EVENTS_INDEXES,
    _derivation_root("BYTEA"),
    _POSTGRES_LEXICAL_DOCS_ACTIVE,
    _LEXICAL_DOCS_COVERING,
    _ACKNOWLEDGEMENTS,
    _POSTGRES_LEXICAL_TERMS,
    _MEMORIES_BY_KIND,
    _MEMORIES_BY_SESSION,
    _MEMORIES_SESSION_OF,
)
