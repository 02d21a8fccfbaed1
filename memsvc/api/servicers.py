"""gRPC servicers: translate, call the pipeline, translate back. No logic of their own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, TypeAlias

from memsvc.api import convert
from memsvc.api.interceptor import current_deadline, current_principal
from memsvc.domain.models import Namespace
from memsvc.metrics import ServiceMetrics
from memsvc.pipeline.history import HistoryService, MemoryRecord
from memsvc.pipeline.reads import MemoryReads
from memsvc.pipeline.write.conversation import ConversationPath
from memsvc.pipeline.write.extraction import ExtractorKind
from memsvc.pipeline.write.path import AddResult, WriteOutcome, WritePath
from memsvc.retrieval.router import Retrieval
from memsvc.v1 import (
    memory_pb2,
    query_service_pb2,
    query_service_pb2_grpc,
    write_service_pb2,
    write_service_pb2_grpc,
)

# grpc ships no type hints, so the servicer context is untyped here.
Context: TypeAlias = Any


_OUTCOMES = {
    WriteOutcome.CREATED: write_service_pb2.WRITE_OUTCOME_CREATED,
    WriteOutcome.IDEMPOTENT_REPLAY: write_service_pb2.WRITE_OUTCOME_IDEMPOTENT_REPLAY,
    WriteOutcome.CONFIRMED_EXISTING: write_service_pb2.WRITE_OUTCOME_CONFIRMED_EXISTING,
}


def add_result_message(r: AddResult) -> write_service_pb2.AddMemoryResult:
    return write_service_pb2.AddMemoryResult(
        outcome=_OUTCOMES[r.outcome], reason=r.reason, superseded_ids=list(r.superseded_ids)
    )


_EXTRACTORS = {
    ExtractorKind.LLM: write_service_pb2.EXTRACTOR_LLM,
    ExtractorKind.RULES: write_service_pb2.EXTRACTOR_RULES,
    ExtractorKind.RULES_AFTER_LLM_FAILURE: write_service_pb2.EXTRACTOR_RULES_AFTER_LLM_FAILURE,
    ExtractorKind.NONE: write_service_pb2.EXTRACTOR_NONE,
}


class WriteServicer(write_service_pb2_grpc.WriteServiceServicer):
    def __init__(
        self, writes: WritePath, conversations: ConversationPath, reads: MemoryReads, history: HistoryService
    ) -> None:
        self._writes = writes
        self._conversations = conversations
        self._reads = reads
        self._history = history

    async def AddMemories(  # noqa: N802 - gRPC method names are PascalCase
        self, request: write_service_pb2.AddMemoriesRequest, context: Context
    ) -> write_service_pb2.AddMemoriesResponse:
        items = [convert.new_memory(m, f"memories[{i}]") for i, m in enumerate(request.memories)]
        stored = await self._writes.add_detailed(current_principal(), request.user_id, items, current_deadline())
        return write_service_pb2.AddMemoriesResponse(
            memories=[convert.memory_message(r.memory) for r in stored],
            created=[r.created for r in stored],
            results=[add_result_message(r) for r in stored],
        )

    async def AddConversation(  # noqa: N802
        self, request: write_service_pb2.AddConversationRequest, context: Context
    ) -> write_service_pb2.AddConversationResponse:
        turns = [convert.spoken_turn(t, f"turns[{i}]") for i, t in enumerate(request.turns)]
        result = await self._conversations.add(
            current_principal(),
            request.user_id,
            request.session_id,
            turns,
            request.first_turn_index,
            current_deadline(),
        )
        derived = result.derived
        response = write_service_pb2.AddConversationResponse(
            turns=[convert.memory_message(r.memory) for r in result.turns],
            turn_results=[add_result_message(r) for r in result.turns],
            extracted=[convert.memory_message(r.memory) for r in derived.extracted],
            extracted_results=[add_result_message(r) for r in derived.extracted],
            extractor=_EXTRACTORS[derived.extraction.extractor],
            extractor_reason=derived.extraction.reason,
            llm_tokens=derived.extraction.llm_tokens,
        )
        if derived.summary is not None:
            response.summary.CopyFrom(convert.memory_message(derived.summary))
        return response

    async def Feedback(  # noqa: N802
        self, request: write_service_pb2.FeedbackRequest, context: Context
    ) -> write_service_pb2.FeedbackResponse:
        outcome = await self._history.feedback(
            current_principal(),
            request.user_id,
            request.request_id,
            list(request.used_ids),
            list(request.unused_ids),
            current_deadline(),
        )
        return write_service_pb2.FeedbackResponse(recorded_count=outcome.recorded, ignored_ids=outcome.ignored_ids)

    async def GetMemoryHistory(  # noqa: N802
        self, request: write_service_pb2.GetMemoryHistoryRequest, context: Context
    ) -> write_service_pb2.GetMemoryHistoryResponse:
        versions, token = await self._history.history(
            current_principal(), request.user_id, request.id, request.page_size, request.page_token, current_deadline()
        )
        return write_service_pb2.GetMemoryHistoryResponse(
            versions=[convert.version_message(v) for v in versions], next_page_token=token
        )

    async def ExportMemories(  # noqa: N802
        self, request: write_service_pb2.ExportMemoriesRequest, context: Context
    ) -> AsyncIterator[write_service_pb2.ExportMemoriesResponse]:
        async for batch in self._history.export(current_principal(), request.user_id, current_deadline()):
            yield write_service_pb2.ExportMemoriesResponse(
                records=[
                    memory_pb2.MemoryRecord(
                        memory=convert.memory_message(r.memory),
                        versions=[convert.version_message(v) for v in r.versions],
                    )
                    for r in batch
                ]
            )

    async def ImportMemories(  # noqa: N802
        self, request: write_service_pb2.ImportMemoriesRequest, context: Context
    ) -> write_service_pb2.ImportMemoriesResponse:
        principal = current_principal()
        namespace = Namespace.of(principal, request.user_id)
        records = [
            MemoryRecord(
                convert.imported_memory(r.memory, namespace, f"records[{i}].memory"),
                tuple(convert.imported_version(v, f"records[{i}].versions[{j}]") for j, v in enumerate(r.versions)),
            )
            for i, r in enumerate(request.records)
        ]
        outcome = await self._history.import_records(principal, request.user_id, records, current_deadline())
        return write_service_pb2.ImportMemoriesResponse(
            imported_count=outcome.imported, skipped_count=outcome.skipped, memory_ids=outcome.memory_ids
        )

    async def UpdateMemory(  # noqa: N802
        self, request: write_service_pb2.UpdateMemoryRequest, context: Context
    ) -> write_service_pb2.UpdateMemoryResponse:
        changes = convert.memory_changes(request)
        memory = await self._writes.update(
            current_principal(), request.user_id, request.id, changes, current_deadline()
        )
        return write_service_pb2.UpdateMemoryResponse(memory=convert.memory_message(memory))

    async def DeleteMemory(  # noqa: N802
        self, request: write_service_pb2.DeleteMemoryRequest, context: Context
    ) -> write_service_pb2.DeleteMemoryResponse:
        await self._writes.delete(current_principal(), request.user_id, request.id, current_deadline())
        return write_service_pb2.DeleteMemoryResponse()

    async def ForgetUser(  # noqa: N802
        self, request: write_service_pb2.ForgetUserRequest, context: Context
    ) -> write_service_pb2.ForgetUserResponse:
        count = await self._writes.forget(current_principal(), request.user_id, current_deadline())
        return write_service_pb2.ForgetUserResponse(deleted_count=count)

    async def GetMemory(  # noqa: N802
        self, request: write_service_pb2.GetMemoryRequest, context: Context
    ) -> write_service_pb2.GetMemoryResponse:
        memory = await self._reads.get(current_principal(), request.user_id, request.id, current_deadline())
        return write_service_pb2.GetMemoryResponse(memory=convert.memory_message(memory))

    async def ListMemories(  # noqa: N802
        self, request: write_service_pb2.ListMemoriesRequest, context: Context
    ) -> write_service_pb2.ListMemoriesResponse:
        page = await self._reads.list(
            current_principal(),
            request.user_id,
            convert.memory_filter(request.filter),
            request.page_size,
            request.page_token,
            current_deadline(),
        )
        return write_service_pb2.ListMemoriesResponse(
            memories=[convert.memory_message(m) for m in page.memories], next_page_token=page.next_page_token
        )


class QueryServicer(query_service_pb2_grpc.QueryServiceServicer):
    def __init__(self, retrieval: Retrieval, metrics: ServiceMetrics) -> None:
        self._retrieval = retrieval
        self._metrics = metrics

    async def Query(  # noqa: N802
        self, request: query_service_pb2.QueryRequest, context: Context
    ) -> query_service_pb2.QueryResponse:
        query = convert.query_input(request)
        outcome = await self._retrieval.query(current_principal(), query, current_deadline())
        self._metrics.record_stages(outcome.report.stages_ms)
        response = query_service_pb2.QueryResponse(
            explanation=outcome.explanation, request_id=outcome.plan.request_id, context=outcome.context
        )
        for ranked in outcome.memories:
            convert.fill_ranked(response.memories.add(), ranked)
        convert.fill_report(response.report, outcome.report)
        return response
