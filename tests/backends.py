"""Throwaway PostgreSQL schemas and Redis key prefixes for tests against the real servers."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

import psycopg
import pytest
import redis

POSTGRES_URL = os.environ.get("MEMSVC_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("MEMSVC_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def postgres_unreachable() -> str:
    """Why PostgreSQL cannot be used here, or "" when it answers."""
    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"no PostgreSQL answers at {POSTGRES_URL} (set MEMSVC_TEST_POSTGRES_URL): {exc}".strip()
    return ""


def redis_unreachable() -> str:
    try:
        redis.Redis.from_url(REDIS_URL, socket_timeout=3).ping()
    except redis.RedisError as exc:
        return f"no Redis answers at {REDIS_URL} (set MEMSVC_TEST_REDIS_URL): {exc}"
    return ""


def schema_url(schema: str) -> str:
    """The test database URL with `search_path` set to one schema (libpq `options`)."""
    separator = "&" if "?" in POSTGRES_URL else "?"
    return f"{POSTGRES_URL}{separator}options={quote(f'-csearch_path={schema}')}"


@contextmanager
def fresh_schema() -> Iterator[str]:
    """A new, empty PostgreSQL schema; yields a URL bound to it and drops it afterwards."""
    reason = postgres_unreachable()
    if reason:
        pytest.skip(reason)
    schema = f"memsvc_test_{secrets.token_hex(6)}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield schema_url(schema)
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@contextmanager
def fresh_schema_with_role() -> Iterator[tuple[str, str]]:
    """A new schema owned by a new login role; yields (URL as that role, role name).

    Tests make the database unreachable for the service with `ALTER ROLE ... NOLOGIN` and
    terminating the role's sessions, and bring it back with `ALTER ROLE ... LOGIN`.
    """
    reason = postgres_unreachable()
    if reason:
        pytest.skip(reason)
    name = f"memsvc_test_{secrets.token_hex(6)}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{name}" LOGIN')
        conn.execute(f'CREATE SCHEMA "{name}" AUTHORIZATION "{name}"')
    url = schema_url(name)
    _, _, rest = url.partition("://")[2].partition("@")
    role_url = f"postgresql://{name}@{rest}" if rest else url
    try:
        yield role_url, name
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,))
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')
            conn.execute(f'DROP ROLE "{name}"')


def set_login(role: str, allowed: bool) -> None:
    """Let a role log in again, or lock it out and end its sessions (a database outage for it)."""
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'ALTER ROLE "{role}" {"LOGIN" if allowed else "NOLOGIN"}')
        if not allowed:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))


@contextmanager
def redis_prefix() -> Iterator[str]:
    """A unique Redis key prefix; every key under it is deleted afterwards."""
    reason = redis_unreachable()
    if reason:
        pytest.skip(reason)
    prefix = f"memsvc-test-{secrets.token_hex(6)}"
    try:
        yield prefix
    finally:
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()
