"""Shutdown under load drains instead of crashing: no connection is closed under a running call.

A call cut at shutdown leaves its store work running in a worker thread; closing a SQLite
connection that thread still uses crashed the process (SIGSEGV) in CI and on SIGTERM. Both
tests run the server in a child process, so a crash is a failed test, not a dead test session.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest

from memsvc.v1 import memory_pb2, query_service_pb2, query_service_pb2_grpc, write_service_pb2, write_service_pb2_grpc
from tests.e2e.processes import Replica

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def test_repeated_stops_under_load_exit_cleanly_and_keep_acknowledged_writes(tmp_path: Path) -> None:
    rounds = 12
    done = subprocess.run(
        [
            sys.executable,
            "-X",
            "faulthandler",
            "-m",
            "tests.fault.shutdown_rounds",
            str(tmp_path / "data"),
            str(rounds),
        ],
        cwd=ROOT,
        capture_output=True,
        timeout=240,
        check=False,
    )
    output = (done.stdout + done.stderr).decode(errors="replace")
    assert done.returncode == 0, f"exit {done.returncode} (-11 is a segfault):\n{output[-6000:]}"
    assert f"{rounds} rounds stopped cleanly" in output


class MixedLoad:
    """Client threads that write and query until told to stop, noting acknowledged writes."""

    def __init__(self, address: str, md: tuple[tuple[str, str]], threads: int) -> None:
        self._channel = grpc.insecure_channel(address)
        self._writes = write_service_pb2_grpc.WriteServiceStub(self._channel)
        self._queries = query_service_pb2_grpc.QueryServiceStub(self._channel)
        self._md = md
        self._stop = threading.Event()
        self.acknowledged: dict[str, tuple[str, str]] = {}
        self.unexpected: list[str] = []
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._work, args=(n,), daemon=True) for n in range(threads)]

    def _work(self, n: int) -> None:
        user = f"user{n % 4}"
        i = 0
        while not self._stop.is_set():
            i += 1
            try:
                if i % 2:
                    content = f"thread {n} note {i}"
                    request = write_service_pb2.AddMemoriesRequest(
                        user_id=user, memories=[write_service_pb2.NewMemory(content=content)]
                    )
                    (memory,) = self._writes.AddMemories(request, metadata=self._md, timeout=30).memories
                    with self._lock:
                        # A near-duplicate confirms the memory already stored: that one was acknowledged.
                        self.acknowledged[memory.id] = (user, memory.content)
                else:
                    query = query_service_pb2.QueryRequest(
                        user_id=user, query=f"note {i}", limit=20, filter=memory_pb2.MemoryFilter(min_importance=0.0)
                    )
                    self._queries.Query(query, metadata=self._md, timeout=30)
            except grpc.RpcError as error:
                if error.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                    with self._lock:
                        self.unexpected.append(f"{error.code()}: {error.details()}")
                return  # the server is going away

    def start(self) -> MixedLoad:
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(40)
        self._channel.close()


@pytest.mark.slow
@pytest.mark.parametrize("grace_s", ["0", "2"])
def test_sigterm_under_mixed_load_exits_zero_and_loses_nothing(tmp_path: Path, grace_s: str) -> None:
    env = {"MEMSVC_GRACE_PERIOD_S": grace_s, "MEMSVC_BOOKKEEPING_FLUSH_INTERVAL_MS": "20"}
    acknowledged: dict[str, tuple[str, str]] = {}
    for round_no in range(6):
        replica = Replica("loaded", tmp_path, env).start(timeout_s=120)
        assert replica.process is not None
        key = (tmp_path / "loaded" / "dev-api-key").read_text().strip()
        md = (("authorization", f"Bearer {key}"),)
        load = MixedLoad(replica.address, md, threads=8).start()
        time.sleep(random.uniform(2.0, 3.0))
        replica.process.send_signal(signal.SIGTERM)
        code = replica.process.wait(60)
        load.stop()
        replica.stop()
        assert code == 0, f"round {round_no}: exit {code} (-11 is a segfault):\n{replica.log.read_text()[-6000:]}"
        assert not load.unexpected, load.unexpected
        acknowledged.update(load.acknowledged)

    replica = Replica("loaded", tmp_path, env).start(timeout_s=120)
    try:
        assert replica.channel is not None
        writes = write_service_pb2_grpc.WriteServiceStub(replica.channel)
        for memory_id, (user, content) in acknowledged.items():
            got = writes.GetMemory(write_service_pb2.GetMemoryRequest(user_id=user, id=memory_id), metadata=md)
            assert got.memory.content == content
    finally:
        replica.stop()
    assert acknowledged, "no write was acknowledged: the load never ran"
