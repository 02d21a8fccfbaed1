"""A small synchronous client over the generated stubs, for the CLI and the benchmarks."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import grpc
from google.protobuf import json_format

from memsvc.api.tls import open_channel
from memsvc.tls import ClientTls
from memsvc.v1 import (
    memory_pb2,
    query_service_pb2,
    query_service_pb2_grpc,
    write_service_pb2,
    write_service_pb2_grpc,
)


def memory_record(line: str) -> memory_pb2.MemoryRecord:
    """One line of the export format (docs/export-format.md); ValueError says why it is not one."""
    try:
        return json_format.Parse(line, memory_pb2.MemoryRecord(), ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise ValueError(str(exc)) from exc


class ClientError(Exception):
    """A failed call: the gRPC status code name and the server's message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def as_dict(message: Any) -> dict[str, Any]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


class MemoryClient:
    def __init__(self, address: str, api_key: str, timeout_s: float = 30.0, tls: ClientTls | None = None) -> None:
        self._channel = open_channel(address, tls)
        self._metadata = (("authorization", f"Bearer {api_key}"),)
        self._timeout_s = timeout_s
        self.writes = write_service_pb2_grpc.WriteServiceStub(self._channel)
        self.queries = query_service_pb2_grpc.QueryServiceStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def _call(self, method: Any, request: Any) -> Any:
        try:
            return method(request, metadata=self._metadata, timeout=self._timeout_s)
        except grpc.RpcError as exc:
            raise ClientError(exc.code().name, exc.details() or "") from exc

    def add(self, user_id: str, memories: Sequence[dict[str, Any]]) -> dict[str, Any]:
        items = [json_format.ParseDict(m, write_service_pb2.NewMemory()) for m in memories]
        request = write_service_pb2.AddMemoriesRequest(user_id=user_id, memories=items)
        return as_dict(self._call(self.writes.AddMemories, request))

    def add_conversation(
        self, user_id: str, session_id: str, turns: Sequence[dict[str, Any]], first_turn_index: int = 0
    ) -> dict[str, Any]:
        request = json_format.ParseDict(
            {"user_id": user_id, "session_id": session_id, "turns": list(turns), "first_turn_index": first_turn_index},
            write_service_pb2.AddConversationRequest(),
        )
        return as_dict(self._call(self.writes.AddConversation, request))

    def query(self, user_id: str, query: str, **fields: Any) -> dict[str, Any]:
        request = json_format.ParseDict(
            {"user_id": user_id, "query": query, **fields}, query_service_pb2.QueryRequest()
        )
        return as_dict(self._call(self.queries.Query, request))

    def get(self, user_id: str, memory_id: str) -> dict[str, Any]:
        request = write_service_pb2.GetMemoryRequest(user_id=user_id, id=memory_id)
        return as_dict(self._call(self.writes.GetMemory, request))

    def list(self, user_id: str, page_size: int = 50, page_token: str = "") -> dict[str, Any]:
        request = write_service_pb2.ListMemoriesRequest(user_id=user_id, page_size=page_size, page_token=page_token)
        return as_dict(self._call(self.writes.ListMemories, request))

    def delete(self, user_id: str, memory_id: str) -> None:
        self._call(self.writes.DeleteMemory, write_service_pb2.DeleteMemoryRequest(user_id=user_id, id=memory_id))

    def export_lines(self, user_id: str) -> Iterator[str]:
        """One JSON line per memory record (docs/export-format.md), streamed."""
        request = write_service_pb2.ExportMemoriesRequest(user_id=user_id)
        try:
            for response in self.writes.ExportMemories(request, metadata=self._metadata, timeout=self._timeout_s):
                for record in response.records:
                    yield json_format.MessageToJson(record, preserving_proto_field_name=True, indent=None)
        except grpc.RpcError as exc:
            raise ClientError(exc.code().name, exc.details() or "") from exc

    def import_records(self, user_id: str, records: Sequence[memory_pb2.MemoryRecord]) -> dict[str, Any]:
        """Import records (lines of the export format read with `memory_record`)."""
        request = write_service_pb2.ImportMemoriesRequest(user_id=user_id, records=records)
        response = self._call(self.writes.ImportMemories, request)
        return {
            "imported": response.imported_count,
            "skipped": response.skipped_count,
            "memory_ids": list(response.memory_ids),
        }

    def history(self, user_id: str, memory_id: str) -> dict[str, Any]:
        request = write_service_pb2.GetMemoryHistoryRequest(user_id=user_id, id=memory_id, page_size=500)
        return as_dict(self._call(self.writes.GetMemoryHistory, request))

    def forget(self, user_id: str) -> dict[str, Any]:
        return as_dict(self._call(self.writes.ForgetUser, write_service_pb2.ForgetUserRequest(user_id=user_id)))
