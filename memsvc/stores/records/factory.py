"""The record store the settings name. Apart from the server's wiring so that admin commands
(`memsvc keys`, `memsvc migrate`) open it without importing the vector, cache and LLM clients."""

from __future__ import annotations

from memsvc.config import Settings
from memsvc.stores.records.base import RecordStore


def build_record_store(settings: Settings) -> RecordStore:
    if settings.uses_postgres:
        from memsvc.stores.records.postgres import PostgresRecordStore

        return PostgresRecordStore(
            settings.record_store_url,
            max_connections=settings.record_store_pool_size,
            timeout_s=settings.record_store_timeout_s,
        )
    from memsvc.stores.records.sqlite import SqliteRecordStore

    return SqliteRecordStore(settings.sqlite_path, busy_timeout_ms=settings.sqlite_busy_timeout_ms)
