"""Row <-> domain conversion and filter SQL shared by the SQL record stores."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import orjson

from memsvc.domain.models import (
    ApiKeyRecord,
    MemoryChange,
    MemoryFilter,
    MemoryKind,
    Namespace,
    Permission,
    RetentionStatus,
    Role,
    StoredMemory,
    StoredVersion,
    Tier,
)

MEMORY_COLUMNS = (
    "id, tenant, project, environment, user_id, ciphertext, role, kind, tags, session_id, "
    "importance, tier, created_at, updated_at, usage_count, last_accessed_at, quality, "
    "consistency, decay, retention_status, embedding_version, superseded_by, idempotency_key, "
    "indexed, revision, expires_at, confirmation_count, score_reasons, vitality, source_ids, extraction_pending, "
    "stale, acknowledgement"
)

API_KEY_COLUMNS = (
    "key_id, secret_hash, tenant, project, environment, permissions, created_at, expires_at, revoked_at, description"
)


# Rows decode for every candidate of every query: enum members by plain lookup (an Enum call
# costs ten times more), the empty JSON values without a parser, the others with orjson (a
# row's tags and score reasons: 1 us against 6 with the json module).
_ROLES = MappingProxyType({m.value: m for m in Role})
_KINDS = MappingProxyType({m.value: m for m in MemoryKind})
_TIERS = MappingProxyType({m.value: m for m in Tier})
_STATUSES = MappingProxyType({m.value: m for m in RetentionStatus})


def _strings(text: str) -> tuple[str, ...]:
    return () if text == "[]" else tuple(orjson.loads(text))


def memory_from_row(row: Sequence[Any], namespace: Namespace | None = None) -> StoredMemory:
    """`namespace`: the one the rows were read from, shared by the rows that belong to it, so
    that its digest (a SHA-256, cached per instance) is computed once and not once per row. The
    columns are compared with it directly: building a `Namespace` to compare cost 2.9 us a row
    against 0.3 (a tenth of the row's decoding)."""
    last_accessed_at, expires_at, score_reasons = row[15], row[25], row[27]
    if namespace is None or (row[4], row[1], row[2], row[3]) != (
        namespace.user_id,
        namespace.tenant,
        namespace.project,
        namespace.environment,
    ):
        namespace = Namespace(row[1], row[2], row[3], row[4])
    # Positional, in the fields' order: keywords would cost as much again as the tuple.
    return StoredMemory(
        row[0],  # id
        namespace,
        bytes(row[5]),  # ciphertext
        _ROLES[row[6]],  # role
        _KINDS[row[7]],  # kind
        _strings(row[8]),  # tags
        row[9],  # session_id
        float(row[10]),  # importance
        _TIERS[row[11]],  # tier
        float(row[12]),  # created_at
        float(row[13]),  # updated_at
        int(row[14]),  # usage_count
        None if last_accessed_at is None else float(last_accessed_at),  # last_accessed_at
        float(row[16]),  # quality
        float(row[17]),  # consistency
        float(row[18]),  # decay
        _STATUSES[row[19]],  # retention_status
        row[20],  # embedding_version
        row[21],  # superseded_by
        row[22] or "",  # idempotency_key
        bool(row[23]),  # indexed
        int(row[24]),  # revision
        None if expires_at is None else float(expires_at),  # expires_at
        int(row[26]),  # confirmation_count
        orjson.loads(score_reasons) if score_reasons and score_reasons != "{}" else {},  # score_reasons
        float(row[28]),  # vitality
        _strings(row[29]),  # source_ids
        bool(row[30]),  # extraction_pending
        bool(row[31]),  # stale
        bool(row[32]),  # acknowledgement
    )


def memory_to_params(m: StoredMemory) -> tuple[Any, ...]:
    ns = m.namespace
    return (
        m.id,
        ns.digest,
        ns.tenant,
        ns.project,
        ns.environment,
        ns.user_id,
        m.ciphertext,
        m.role.value,
        m.kind.value,
        json.dumps(list(m.tags)),
        m.session_id,
        m.importance,
        m.tier.value,
        m.created_at,
        m.updated_at,
        m.usage_count,
        m.last_accessed_at,
        m.quality,
        m.consistency,
        m.decay,
        m.retention_status.value,
        m.embedding_version,
        m.superseded_by,
        m.idempotency_key or None,
        int(m.indexed),
        m.revision,
        m.expires_at,
        m.confirmation_count,
        json.dumps(dict(m.score_reasons), sort_keys=True),
        m.vitality,
        json.dumps(list(m.source_ids)),
        int(m.extraction_pending),
        int(m.stale),
        int(m.acknowledgement),
    )


INSERT_MEMORY_COLUMNS = (
    "id, ns, tenant, project, environment, user_id, ciphertext, role, kind, tags, session_id, "
    "importance, tier, created_at, updated_at, usage_count, last_accessed_at, quality, "
    "consistency, decay, retention_status, embedding_version, superseded_by, idempotency_key, "
    "indexed, revision, expires_at, confirmation_count, score_reasons, vitality, source_ids, extraction_pending, "
    "stale, acknowledgement"
)
INSERT_MEMORY_ARITY = 34


def api_key_from_row(row: Sequence[Any]) -> ApiKeyRecord:
    return ApiKeyRecord(
        key_id=row[0],
        secret_hash=bytes(row[1]),
        tenant=row[2],
        project=row[3],
        environment=row[4],
        permissions=frozenset(Permission(p) for p in json.loads(row[5])),
        created_at=float(row[6]),
        expires_at=None if row[7] is None else float(row[7]),
        revoked_at=None if row[8] is None else float(row[8]),
        description=row[9] or "",
    )


def api_key_to_params(r: ApiKeyRecord) -> tuple[Any, ...]:
    return (
        r.key_id,
        r.secret_hash,
        r.tenant,
        r.project,
        r.environment,
        json.dumps(sorted(p.value for p in r.permissions)),
        r.created_at,
        r.expires_at,
        r.revoked_at,
        r.description,
    )


def filter_sql(
    memory_filter: MemoryFilter, placeholder: str, tags_any_sql: Callable[[int], str]
) -> tuple[str, list[Any]]:
    """SQL conditions for the row-level fields of a filter; values are always bound.

    `tags_any_sql(n)` renders the backend's "tags contain any of n bound values" condition.
    """
    clauses: list[str] = []
    params: list[Any] = []
    if memory_filter.tags_any:
        clauses.append(tags_any_sql(len(memory_filter.tags_any)))
        params.extend(memory_filter.tags_any)
    if memory_filter.tier is not None:
        clauses.append(f"tier = {placeholder}")
        params.append(memory_filter.tier.value)
    if memory_filter.session_id:
        clauses.append(f"session_id = {placeholder}")
        params.append(memory_filter.session_id)
    if memory_filter.session_ids:
        clauses.append(f"session_id IN ({', '.join([placeholder] * len(memory_filter.session_ids))})")
        params.extend(memory_filter.session_ids)
    if memory_filter.min_importance is not None:
        clauses.append(f"importance >= {placeholder}")
        params.append(memory_filter.min_importance)
    if memory_filter.roles:
        clauses.append(f"role IN ({', '.join([placeholder] * len(memory_filter.roles))})")
        params.extend(r.value for r in memory_filter.roles)
    if memory_filter.kinds:
        clauses.append(f"kind IN ({', '.join([placeholder] * len(memory_filter.kinds))})")
        params.extend(k.value for k in memory_filter.kinds)
    if memory_filter.created_after is not None:
        clauses.append(f"created_at >= {placeholder}")
        params.append(memory_filter.created_after)
    if memory_filter.created_before is not None:
        clauses.append(f"created_at < {placeholder}")
        params.append(memory_filter.created_before)
    if not memory_filter.include_inactive:
        clauses.append(f"retention_status = {placeholder}")
        params.append(RetentionStatus.ACTIVE.value)
    return " AND ".join(clauses), params


def changes_to_params(changes: Mapping[str, Any]) -> dict[str, Any]:
    """Turn domain values of an update into column values."""
    out: dict[str, Any] = {}
    for column, value in changes.items():
        if column in {"tags", "source_ids"}:
            out[column] = json.dumps(list(value))
        elif column == "score_reasons":
            out[column] = json.dumps(dict(value), sort_keys=True)
        elif column == "extraction_pending":
            out[column] = int(value)
        elif hasattr(value, "value") and column in {"tier", "retention_status"}:
            out[column] = value.value
        else:
            out[column] = value
    return out


VERSION_COLUMNS = (
    "id, memory_id, tenant, project, environment, user_id, version, at, actor, change, fields, "
    "description, tier, retention_status, importance, ciphertext"
)
INSERT_VERSION_COLUMNS = (
    "id, memory_id, ns, tenant, project, environment, user_id, version, at, actor, change, fields, "
    "description, tier, retention_status, importance, ciphertext"
)
INSERT_VERSION_ARITY = 17


def version_from_row(row: Sequence[Any]) -> StoredVersion:
    return StoredVersion(
        id=row[0],
        memory_id=row[1],
        namespace=Namespace(row[2], row[3], row[4], row[5]),
        version=int(row[6]),
        at=float(row[7]),
        actor=row[8],
        change=MemoryChange(row[9]),
        fields=tuple(json.loads(row[10])),
        description=row[11],
        tier=Tier(row[12]),
        retention_status=RetentionStatus(row[13]),
        importance=float(row[14]),
        ciphertext=None if row[15] is None else bytes(row[15]),
    )


def version_to_params(v: StoredVersion, version: int) -> tuple[Any, ...]:
    ns = v.namespace
    return (
        v.id,
        v.memory_id,
        ns.digest,
        ns.tenant,
        ns.project,
        ns.environment,
        ns.user_id,
        version,
        v.at,
        v.actor,
        v.change.value,
        json.dumps(list(v.fields)),
        v.description,
        v.tier.value,
        v.retention_status.value,
        v.importance,
        v.ciphertext,
    )


def vitality_sql() -> str:
    """Vitality from feedback counts: 1 with no reports, falling towards 0.3 as unused reports
    outnumber used ones (two pseudo-reports keep a single report from swinging it)."""
    return "1.0 - 0.7 * feedback_unused / (feedback_used + feedback_unused + 2.0)"
