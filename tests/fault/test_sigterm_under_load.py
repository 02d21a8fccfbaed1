"""SIGTERM under load: in-flight calls finish within the grace period, new ones are refused.

tests/e2e/test_graceful.py drains one call held by a PostgreSQL lock; this suite drains many
concurrent writes on the embedded default, cuts a call that outlives the grace period, and checks
that what was acknowledged during the drain survives the restart.
"""

from __future__ import annotations

import hashlib
import json
import math
import signal
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import grpc
import pytest

from memsvc.v1 import write_service_pb2, write_service_pb2_grpc
from tests.e2e.processes import Replica
from tests.fault.support import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DIMENSION = 16
GRACE_S = 6.0
DRAIN_DELAY_S = 1.0  # embedding time of each in-flight write once released: well inside the grace period
STUCK_DELAY_S = 60.0  # a call that outlives the grace period
IN_FLIGHT = 12


class Endpoint(BaseHTTPRequestHandler):
    """OpenAI-compatible embeddings that take a while for texts marked `drain` or `stuck`.

    `drain` texts are held until the test releases them: they are in flight at the SIGTERM
    however slowly the machine started them, instead of finishing on their own beforehand.
    """

    started: list[str] = []  # noqa: RUF012  (test double state, reset per test)
    release = threading.Event()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        Endpoint.started.extend(texts)
        if any("stuck" in t for t in texts):
            time.sleep(STUCK_DELAY_S)
        elif any("drain" in t for t in texts):
            Endpoint.release.wait(STUCK_DELAY_S)
            time.sleep(DRAIN_DELAY_S)
        data = []
        for i, text in enumerate(texts):
            vector = [0.0] * DIMENSION
            for word in text.lower().split():
                vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % DIMENSION] += 1.0
            norm = math.sqrt(sum(v * v for v in vector)) or 1.0
            data.append({"object": "embedding", "index": i, "embedding": [v / norm for v in vector]})
        raw = json.dumps({"object": "list", "model": body["model"], "data": data, "usage": {}}).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
        except OSError:
            pass  # the server went away

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def endpoint() -> Iterator[str]:
    Endpoint.started = []
    Endpoint.release = threading.Event()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Endpoint)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    Endpoint.release.set()
    httpd.shutdown()
    httpd.server_close()


def add_request(user: str, content: str) -> write_service_pb2.AddMemoriesRequest:
    return write_service_pb2.AddMemoriesRequest(user_id=user, memories=[write_service_pb2.NewMemory(content=content)])


def refuses_new_calls(address: str, md: tuple[tuple[str, str]]) -> bool:
    """Does a new client's call find the server refusing it? (A read: probing writes nothing.)"""
    request = write_service_pb2.GetMemoryRequest(user_id="user9", id="0" * 32)
    with grpc.insecure_channel(address) as fresh:
        try:
            write_service_pb2_grpc.WriteServiceStub(fresh).GetMemory(request, metadata=md, timeout=5)
        except grpc.RpcError as error:
            return error.code() == grpc.StatusCode.UNAVAILABLE  # else NOT_FOUND: still taking calls
    return False


def test_sigterm_drains_concurrent_calls_cuts_the_stuck_one_and_refuses_new_ones(tmp_path: Path, endpoint: str) -> None:
    env = {
        "MEMSVC_GRACE_PERIOD_S": str(GRACE_S),
        "MEMSVC_EMBEDDING_PROVIDER": "openai",
        "MEMSVC_EMBEDDING_BASE_URL": endpoint,
        "MEMSVC_EMBEDDING_MODEL_NAME": "toy-embed",
        "MEMSVC_EMBEDDING_DIMENSION": str(DIMENSION),
        "MEMSVC_EMBEDDING_TIMEOUT_S": "120",
        "MEMSVC_DEFAULT_DEADLINE_S": "120",
    }
    replica = Replica("drained", tmp_path, env).start(timeout_s=120)
    key = (tmp_path / "drained" / "dev-api-key").read_text().strip()
    md = (("authorization", f"Bearer {key}"),)
    assert replica.channel is not None and replica.process is not None
    writes = write_service_pb2_grpc.WriteServiceStub(replica.channel)

    contents = [f"drain note {i} for user{i % 4}" for i in range(IN_FLIGHT)]
    in_flight = [
        writes.AddMemories.future(add_request(f"user{i % 4}", c), metadata=md, timeout=60)
        for i, c in enumerate(contents)
    ]
    stuck = writes.AddMemories.future(add_request("user0", "stuck note"), metadata=md, timeout=120)
    wait_until(lambda: len(Endpoint.started) >= IN_FLIGHT + 1, 60, "every call reached the embedder")
    assert not any(f.done() for f in in_flight)

    signalled = time.monotonic()
    replica.process.send_signal(signal.SIGTERM)
    # However long the signal takes to land, new calls are refused well within the grace period...
    wait_until(lambda: refuses_new_calls(replica.address, md), GRACE_S / 2, "new calls refused after SIGTERM")
    with grpc.insecure_channel(replica.address) as fresh, pytest.raises(grpc.RpcError) as refused:
        write_service_pb2_grpc.WriteServiceStub(fresh).AddMemories(
            add_request("user9", "drain too late"), metadata=md, timeout=5
        )
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    # ...while the server is still draining: every accepted call is still in flight.
    assert not any(f.done() for f in in_flight)
    Endpoint.release.set()

    acknowledged: dict[str, str] = {}
    for content, future in zip(contents, in_flight, strict=True):
        (memory,) = future.result(timeout=GRACE_S + 10).memories  # finished, not cut
        assert memory.content == content
        acknowledged[memory.id] = content
    with pytest.raises(grpc.RpcError) as cut:
        stuck.result(timeout=GRACE_S + 30)
    assert cut.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
    assert replica.process.wait(GRACE_S + 30) == 0
    took_s = time.monotonic() - signalled
    assert took_s < GRACE_S + 10, f"stopping took {took_s:.1f} s for a {GRACE_S} s grace period"
    replica.stop()

    # What was acknowledged while draining is durable.
    replica = Replica("drained", tmp_path, env).start(timeout_s=120)
    try:
        assert replica.channel is not None
        writes = write_service_pb2_grpc.WriteServiceStub(replica.channel)
        for memory_id, content in acknowledged.items():
            user = content.rsplit(" ", 1)[1]
            got = writes.GetMemory(write_service_pb2.GetMemoryRequest(user_id=user, id=memory_id), metadata=md)
            assert got.memory.content == content
    finally:
        replica.stop()
