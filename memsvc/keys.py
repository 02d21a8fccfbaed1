"""API keys: `msk_<id>_<secret>`, stored as a peppered HMAC, verified in constant time."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass

from memsvc.domain.models import ApiKeyRecord, Permission, Principal
from memsvc.errors import InvalidArgument, Unauthenticated
from memsvc.stores.caches.memory import LruTtlMap
from memsvc.stores.records.base import ApiKeyRecords

_KEY_PATTERN = re.compile(r"msk_([0-9a-f]{16})_([A-Za-z0-9_-]{32,64})")
_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
ENVIRONMENTS = ("development", "staging", "production")


@dataclass(frozen=True)
class IssuedKey:
    token: str
    record: ApiKeyRecord


class ApiKeys:
    def __init__(self, store: ApiKeyRecords, pepper: bytes, cache_ttl_s: float = 2.0) -> None:
        self._store = store
        self._pepper = pepper
        # A short cache: revocation takes effect within cache_ttl_s on every replica.
        self._cache: LruTtlMap[ApiKeyRecord] = LruTtlMap(10_000, cache_ttl_s)

    def _hash(self, secret: str) -> bytes:
        return hmac.new(self._pepper, secret.encode(), hashlib.sha256).digest()

    async def create(
        self,
        tenant: str,
        project: str,
        environment: str,
        permissions: frozenset[Permission],
        ttl_s: float | None = None,
        description: str = "",
    ) -> IssuedKey:
        for field, value in (("tenant", tenant), ("project", project)):
            if not _NAME_PATTERN.fullmatch(value):
                raise InvalidArgument.field(field, "must match [A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
        if environment not in ENVIRONMENTS:
            raise InvalidArgument.field("environment", f"must be one of {', '.join(ENVIRONMENTS)}")
        if not permissions:
            raise InvalidArgument.field("permissions", "must name at least one permission")
        key_id = secrets.token_hex(8)
        secret = secrets.token_urlsafe(32)[:43]
        now = time.time()
        record = ApiKeyRecord(
            key_id=key_id,
            secret_hash=self._hash(secret),
            tenant=tenant,
            project=project,
            environment=environment,
            permissions=permissions,
            created_at=now,
            expires_at=None if ttl_s is None else now + ttl_s,
            description=description,
        )
        await self._store.insert_api_key(record)
        return IssuedKey(f"msk_{key_id}_{secret}", record)

    async def authenticate(self, token: str) -> Principal:
        match = _KEY_PATTERN.fullmatch(token)
        if match is None:
            raise Unauthenticated("the API key is malformed")
        key_id, secret = match.groups()
        record = self._cache.get(key_id)
        if record is None:
            record = await self._store.get_api_key(key_id)
            if record is None:
                raise Unauthenticated("the API key is not valid")
            self._cache.put(key_id, record)
        if not hmac.compare_digest(record.secret_hash, self._hash(secret)):
            raise Unauthenticated("the API key is not valid")
        now = time.time()
        if record.revoked_at is not None:
            raise Unauthenticated("the API key was revoked")
        if record.expires_at is not None and record.expires_at <= now:
            raise Unauthenticated("the API key has expired")
        return Principal(record.key_id, record.tenant, record.project, record.environment, record.permissions)

    async def revoke(self, key_id: str) -> bool:
        return await self._store.revoke_api_key(key_id, time.time())
