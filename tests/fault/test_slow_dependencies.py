"""Slow or failing embedding and LLM endpoints: deadlines honoured, workers freed, fallbacks reported."""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import pytest

from memsvc.v1 import query_service_pb2
from tests.conftest import RunningServer, ServerFactory
from tests.fault.support import add, failure, query, retry_delay_s

pytestmark = pytest.mark.e2e

DIMENSION = 32
# The endpoint's delay for texts with the slow marker: far past every deadline below.
SLOW_S = 8.0
SLOW = "slowpoke"
BROKEN = "brokenpipe"


def toy_vector(text: str) -> list[float]:
    vector = [0.0] * DIMENSION
    for word in text.lower().split():
        vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % DIMENSION] += 1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


class ScriptedEndpoint(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint: embeddings fast, slow or failing by marker; chat per `chat`."""

    chat = "slow"  # "slow" sleeps past every deadline, "fail" answers 500

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path.endswith("/chat/completions"):
            if ScriptedEndpoint.chat == "slow":
                time.sleep(SLOW_S)
            self._reply(500, {"error": {"message": "scripted failure", "type": "server_error"}})
            return
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        if any(BROKEN in text for text in inputs):
            self._reply(500, {"error": {"message": "scripted failure", "type": "server_error"}})
            return
        if any(SLOW in text for text in inputs):
            time.sleep(SLOW_S)
        data = [{"object": "embedding", "index": i, "embedding": toy_vector(t)} for i, t in enumerate(inputs)]
        self._reply(200, {"object": "list", "model": body["model"], "data": data, "usage": {}})

    def _reply(self, status: int, payload: object) -> None:
        raw = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
        except OSError:
            pass  # the caller gave up (its deadline passed) and closed the connection

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def endpoint() -> Iterator[str]:
    ScriptedEndpoint.chat = "slow"
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedEndpoint)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def scripted_server(server_factory: ServerFactory, endpoint: str, **overrides: object) -> RunningServer:
    return server_factory(
        own_embedder=True,
        embedding_provider="openai",
        embedding_base_url=endpoint,
        embedding_model_name="toy-embed",
        embedding_dimension=DIMENSION,
        embedding_timeout_s=60.0,  # the endpoint client alone would wait: the deadline must cut it
        **overrides,
    )


def server_span_ms(s: RunningServer, method: str) -> list[float]:
    """The duration in ms of each finished server span of `method`."""
    return [
        float(span.attributes["memsvc.duration_ms"])  # type: ignore[arg-type]
        for span in s.spans.get_finished_spans()
        if span.name.endswith(f"/{method}") and span.attributes and "memsvc.duration_ms" in span.attributes
    ]


def test_the_callers_deadline_cuts_a_slow_embedding_call(server_factory: ServerFactory, endpoint: str) -> None:
    s = scripted_server(server_factory, endpoint)
    add(s, "vera", "Vera sails a small boat on the lake")
    s.spans.clear()
    started = time.monotonic()
    error = failure(lambda: query(s, "vera", f"{SLOW} where does vera sail?", timeout_s=1.0))
    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - started < 3.0
    # The server itself stopped waiting at the caller's deadline, not after the endpoint's delay.
    time.sleep(0.5)
    (took_ms,) = server_span_ms(s, "Query")
    assert took_ms < 2500, f"the server held the call {took_ms:.0f} ms for a 1 s deadline"


def test_the_server_deadline_frees_workers_held_by_a_slow_endpoint(
    server_factory: ServerFactory, endpoint: str
) -> None:
    # Two RPC slots and a 1 s server-side deadline; callers allow 30 s, so only the server can cut.
    s = scripted_server(server_factory, endpoint, max_concurrent_rpcs=2, default_deadline_s=1.0)
    add(s, "vera", "Vera sails a small boat on the lake")
    request = query_service_pb2.QueryRequest(user_id="vera", query=f"{SLOW} where does vera sail?")
    slow = [s.queries.Query.future(request, metadata=s.md, timeout=30) for _ in range(2)]
    started = time.monotonic()
    for call in slow:
        with pytest.raises(grpc.RpcError) as info:
            call.result(timeout=30)
        assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - started < 4.0, "the slow calls ended at the server deadline, not the endpoint delay"
    # Both slots are free again at once: a fast call is served, not RESOURCE_EXHAUSTED.
    fast_started = time.monotonic()
    reply = query(s, "vera", "where does vera sail?", timeout_s=30)
    assert reply.memories and time.monotonic() - fast_started < 1.0 + 2.0
    # A write with slow content fails the same way and stores nothing.
    error = failure(lambda: add(s, "vera", f"{SLOW} Vera paints", timeout_s=30))
    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert [r.memory.content for r in query(s, "vera", "Vera paints").memories if SLOW in r.memory.content] == []


def test_a_failing_embedding_endpoint_is_unavailable_with_retry_info(
    server_factory: ServerFactory, endpoint: str
) -> None:
    s = scripted_server(server_factory, endpoint)
    for call in (
        lambda: query(s, "vera", f"{BROKEN} anything"),
        lambda: add(s, "vera", f"{BROKEN} Vera sails"),
    ):
        error = failure(call)
        assert error.code() == grpc.StatusCode.UNAVAILABLE
        delay = retry_delay_s(error)
        assert delay is not None and delay > 0


@pytest.mark.parametrize("chat", ["slow", "fail"])
def test_a_slow_or_failing_llm_falls_back_within_the_deadline(
    server_factory: ServerFactory, endpoint: str, chat: str
) -> None:
    ScriptedEndpoint.chat = chat
    s = scripted_server(server_factory, endpoint, llm_base_url=endpoint, llm_timeout_s=60.0)
    (stored,) = add(s, "vera", "Vera sails a small boat on the lake")
    started = time.monotonic()
    reply = query(s, "vera", "where does vera sail?", timeout_s=3.0, mode=query_service_pb2.QUERY_MODE_MULTI_QUERY)
    assert time.monotonic() - started < 3.0
    assert stored.id in [r.memory.id for r in reply.memories]
    expected = "timeout" if chat == "slow" else "endpoint error"
    assert any(expected in note and "heuristics" in note for note in reply.report.notes), reply.report.notes
