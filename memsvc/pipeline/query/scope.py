"""Stage 1, scope: the credential's namespace, permission, validation and the effective plan."""

from __future__ import annotations

import uuid

from memsvc.domain.models import Namespace, Permission, Principal
from memsvc.errors import PermissionDenied
from memsvc.llm.heuristics import asks_about_the_past, asks_about_the_present
from memsvc.pipeline.context import QueryInput, QueryPlan
from memsvc.pipeline.validation import Limits, validate_query


class ScopeStage:
    def __init__(self, limits: Limits, default_limit: int, importance_floor: float, relevance_floor: float) -> None:
        self._limits = limits
        self._default_limit = default_limit
        self._importance_floor = importance_floor
        self._relevance_floor = relevance_floor

    def run(self, principal: Principal, request: QueryInput, default_limit: int | None = None) -> QueryPlan:
        if not principal.allows(Permission.READ):
            raise PermissionDenied("this API key may not read memories")
        limit = request.limit or (default_limit or self._default_limit)
        validate_query(
            request.user_id, request.query, limit, request.memory_filter, self._limits, request.min_relevance
        )
        floor = request.memory_filter.min_importance
        min_importance = self._importance_floor if floor is None else floor
        return QueryPlan(
            principal=principal,
            namespace=Namespace.of(principal, request.user_id),
            query=request.query,
            limit=limit,
            memory_filter=request.memory_filter,
            min_importance=min_importance,
            min_relevance=self._relevance_floor if request.min_relevance is None else request.min_relevance,
            request_id=f"req_{uuid.uuid4().hex[:16]}",
            skip_cache=request.skip_cache,
            source=request,
            about_the_present=asks_about_the_present(request.query),
            about_the_past=asks_about_the_past(request.query),
        )
