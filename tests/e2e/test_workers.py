"""Worker processes: `memsvc serve` with MEMSVC_WORKERS=2 on one port, SQLite (WAL) and a Milvus server."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import grpc
import pytest
from google.protobuf import field_mask_pb2

from memsvc.v1 import memory_pb2, query_service_pb2, query_service_pb2_grpc, write_service_pb2, write_service_pb2_grpc
from tests.e2e.processes import BIN, Replica, free_port, memsvc, replica_env
from tests.milvus_server import MilvusServer

pytestmark = pytest.mark.e2e

WORKER_LINE = re.compile(r"memsvc worker (\d) \(pid (\d+)\) serving")


def workers_serving(log: Path) -> dict[int, int]:
    """Worker index -> pid of its latest start, from the supervisor's log."""
    return {int(i): int(pid) for i, pid in WORKER_LINE.findall(log.read_text())}


def wait_for(condition: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def queries_served(metrics_port: int) -> float:
    body = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    counts = re.findall(r'memsvc_rpc_duration_seconds_count\{[^}]*rpc_method="Query"[^}]*\} ([0-9.]+)', body)
    return sum(float(c) for c in counts)


def query_on_a_new_connection(address: str, token: str, user: str, text: str) -> list[str]:
    """A new connection, which the kernel hands to either worker. (Channels of one process share
    their connections through gRPC's global subchannel pool unless told to keep their own.)"""
    with grpc.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        reply = query_service_pb2_grpc.QueryServiceStub(channel).Query(
            query_service_pb2.QueryRequest(user_id=user, query=text, filter=memory_pb2.MemoryFilter(min_importance=0)),
            metadata=(("authorization", f"Bearer {token}"),),
            timeout=30,
        )
    assert not reply.report.degraded
    return [m.memory.content for m in reply.memories]


def test_two_workers_share_the_port_see_each_others_writes_restart_and_drain(
    milvus_server: MilvusServer, tmp_path: Path
) -> None:
    metrics_port = free_port()
    env = replica_env(
        record_store_url="",
        milvus_uri=milvus_server.uri,
        MEMSVC_WORKERS="2",
        MEMSVC_METRICS_LISTEN=f"127.0.0.1:{metrics_port}",
        MEMSVC_INDEX_FLUSH_DELAY_S="0.2",
    )
    server = Replica("w", tmp_path, env)
    token = memsvc(
        ["keys", "create", "--tenant", "acme", "--permissions", "read,write"],
        {**env, "MEMSVC_DATA_DIR": str(tmp_path / "w")},
        tmp_path,
    ).splitlines()[0]
    server.start()
    try:
        wait_for(lambda: len(workers_serving(server.log)) == 2, 90, "both workers serving")
        assert server.channel is not None
        writes = write_service_pb2_grpc.WriteServiceStub(server.channel)
        md = (("authorization", f"Bearer {token}"),)
        (stored,) = writes.AddMemories(
            write_service_pb2.AddMemoriesRequest(
                user_id="ann", memories=[write_service_pb2.NewMemory(content="I keep three beehives behind the barn")]
            ),
            metadata=md,
            timeout=30,
        ).memories

        # Whichever worker a connection lands on answers with the other's write at once.
        for _ in range(24):
            found = query_on_a_new_connection(server.address, token, "ann", "what insects do I look after?")
            assert found[:1] == ["I keep three beehives behind the barn"]
        assert queries_served(metrics_port) > 0 and queries_served(metrics_port + 1) > 0, "both workers answered"

        # No worker answers from a result cache the other's update did not reach.
        writes.UpdateMemory(
            write_service_pb2.UpdateMemoryRequest(
                user_id="ann",
                id=stored.id,
                memory=write_service_pb2.MemoryUpdate(content="I keep five beehives behind the barn"),
                update_mask=field_mask_pb2.FieldMask(paths=["content"]),
            ),
            metadata=md,
            timeout=30,
        )
        for _ in range(12):
            found = query_on_a_new_connection(server.address, token, "ann", "what insects do I look after?")
            assert found[:1] == ["I keep five beehives behind the barn"]

        # A worker that dies is replaced; the port keeps answering meanwhile.
        killed = workers_serving(server.log)[0]
        os.kill(killed, signal.SIGKILL)
        wait_for(lambda: workers_serving(server.log)[0] != killed, 90, "worker 0 restarted")
        assert query_on_a_new_connection(server.address, token, "ann", "beehives")[:1] == [
            "I keep five beehives behind the barn"
        ]
    finally:
        pids = list(workers_serving(server.log).values())
        code = server.stop()
    assert code == 0, server.log.read_text()[-3000:]
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text(), pid


def test_more_than_one_worker_on_milvus_lite_is_refused_naming_the_setting(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(BIN / "memsvc"), "serve"],
        env={**os.environ, "MEMSVC_DATA_DIR": str(tmp_path), "MEMSVC_WORKERS": "2", "MEMSVC_MILVUS_URI": ""},
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "workers > 1 needs a Milvus server" in done.stderr.decode()


def test_bench_query_drives_worker_processes_over_a_connection_per_client(
    milvus_server: MilvusServer, tmp_path: Path
) -> None:
    """`memsvc bench query --address` measures a server someone started, here two workers on one
    port: each client thread has its own connection, so both workers serve. With the Milvus
    server's process it reports what a query costs the whole machine."""
    from memsvc.bench.harness import BENCH_DATABASE
    from memsvc.cli import main

    load = ["bench", "query", "--users", "2", "--memories-per-user", "20", "--queries", "5", "--floor-samples", "5"]
    assert main([*load, "--milvus-uri", milvus_server.uri, "--data-dir", str(tmp_path / "w")]) == 0
    metrics_port = free_port()
    env = {
        "MEMSVC_MILVUS_URI": milvus_server.uri,
        "MEMSVC_MILVUS_DB_NAME": BENCH_DATABASE,
        "MEMSVC_WORKERS": "2",
        "MEMSVC_METRICS_LISTEN": f"127.0.0.1:{metrics_port}",
        "MEMSVC_BOOTSTRAP_DEV_KEY": "false",
    }
    token = memsvc(
        ["keys", "create", "--tenant", "bench", "--permissions", "read"],
        {**env, "MEMSVC_DATA_DIR": str(tmp_path / "w")},
        tmp_path,
    ).splitlines()[0]
    server = Replica("w", tmp_path, env).start()
    try:
        wait_for(lambda: len(workers_serving(server.log)) == 2, 90, "both workers serving")
        assert server.process is not None
        out = tmp_path / "driven.json"
        drive = ["bench", "query", "--address", server.address, "--api-key", token, "--users", "2"]
        drive += ["--concurrency", "16", "--queries", "64", "--server-pid", str(server.process.pid)]
        drive += ["--milvus-pid", str(milvus_server.pid)]
        assert main([*drive, "--json", str(out)]) == 0
        data = json.loads(out.read_text())
        assert data["queries"] == 64 and data["errors"] == {} and data["qps"] > 0
        assert 0 < data["p50_ms"] <= data["p99_ms"]
        assert data["server_cpu_ms_per_query"] > 0  # the supervisor's and both workers' CPU
        assert data["milvus_cpu_ms_per_query"] > 0 and data["client_cpu_ms_per_query"] > 0
        machine_ms = data["server_cpu_ms_per_query"] + data["milvus_cpu_ms_per_query"] + data["client_cpu_ms_per_query"]
        assert data["machine_cpu_ms_per_query"] == pytest.approx(machine_ms, abs=0.002)
        assert data["machine_qps_ceiling"] == pytest.approx((os.cpu_count() or 1) * 1000 / machine_ms, rel=0.01)
        assert queries_served(metrics_port) > 0 and queries_served(metrics_port + 1) > 0, "both workers answered"
    finally:
        assert server.stop() == 0
