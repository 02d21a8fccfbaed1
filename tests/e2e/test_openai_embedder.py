"""The OpenAI-compatible embedding path, against a scripted HTTP endpoint on loopback."""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import pytest

from memsvc.v1 import memory_pb2, query_service_pb2, write_service_pb2
from tests.conftest import ServerFactory

pytestmark = pytest.mark.e2e
DIMENSION = 64


def bag_of_words(text: str) -> list[float]:
    """A deterministic toy embedding: hashed word counts, so shared words mean similarity."""
    vector = [0.0] * DIMENSION
    for word in text.lower().replace("?", " ").replace(".", " ").split():
        vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % DIMENSION] += 1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


class EmbeddingEndpoint(BaseHTTPRequestHandler):
    garbage = False
    requests: list[dict[str, object]] = []  # noqa: RUF012  (test double state, reset per test)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        EmbeddingEndpoint.requests.append(body)
        if EmbeddingEndpoint.garbage:
            payload = b'{"not": "embeddings"}'
        else:
            inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
            payload = json.dumps(
                {
                    "object": "list",
                    "model": body["model"],
                    "data": [
                        {"object": "embedding", "index": i, "embedding": bag_of_words(t)} for i, t in enumerate(inputs)
                    ],
                    "usage": {"prompt_tokens": 1, "total_tokens": 1},
                }
            ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def endpoint() -> Iterator[str]:
    EmbeddingEndpoint.garbage = False
    EmbeddingEndpoint.requests = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), EmbeddingEndpoint)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_openai_compatible_embeddings_serve_writes_and_queries(server_factory: ServerFactory, endpoint: str) -> None:
    s = server_factory(
        own_embedder=True,
        embedding_provider="openai",
        embedding_base_url=endpoint,
        embedding_model_name="toy-embed",
        embedding_dimension=DIMENSION,
    )
    request = write_service_pb2.AddMemoriesRequest(
        user_id="olga",
        memories=[
            write_service_pb2.NewMemory(content="Olga grows tomatoes on her balcony"),
            write_service_pb2.NewMemory(content="Olga commutes by train to the office"),
        ],
    )
    stored = s.writes.AddMemories(request, metadata=s.md).memories
    assert stored[0].embedding_version == "toy-embed@openai"
    everything = memory_pb2.MemoryFilter(min_importance=0.0)
    query = query_service_pb2.QueryRequest(user_id="olga", query="what grows on the balcony?", filter=everything)
    found = s.queries.Query(query, metadata=s.md)
    assert found.memories[0].memory.id == stored[0].id
    assert any(r["model"] == "toy-embed" for r in EmbeddingEndpoint.requests)

    EmbeddingEndpoint.garbage = True
    fresh = query_service_pb2.QueryRequest(user_id="olga", query="how does olga travel?", filter=everything)
    with pytest.raises(grpc.RpcError) as info:
        s.queries.Query(fresh, metadata=s.md)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
