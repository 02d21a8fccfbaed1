"""`memsvc bench load`: a short soak against a running server, and its checks catching breaches."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memsvc.bench.load import Client, Ledger, Plan, marker, verify
from memsvc.v1 import write_service_pb2
from tests.conftest import RunningServer, ServerFactory
from tests.fault.support import MILVUS_LITE_WAL_LEAK

pytestmark = [pytest.mark.e2e, *MILVUS_LITE_WAL_LEAK]


def test_a_short_soak_reports_latency_errors_and_no_lost_or_crossed_writes(
    server_factory: ServerFactory, tmp_path: Path
) -> None:
    s = server_factory()
    out = tmp_path / "load.json"
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("memsvc")),
            "bench",
            "load",
            "--address",
            s.address,
            "--api-key",
            s.api_key,
            "--soak",
            "--duration-s",
            "4",
            "--users",
            "6",
            "--memories-per-user",
            "3",
            "--concurrency",
            "4",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "lost writes: 0, cross-user results: 0" in done.stdout
    data = json.loads(out.read_text())
    assert data["operations"] > 0 and data["acknowledged_writes"] >= 18
    for rpc in ("AddMemories", "Query"):
        assert data["rpcs"][rpc]["ok"] > 0
        assert 0 < data["rpcs"][rpc]["p50_ms"] <= data["rpcs"][rpc]["p95_ms"] <= data["rpcs"][rpc]["p99_ms"]


def test_the_final_check_counts_lost_writes_and_crossed_results(server: RunningServer) -> None:
    plan = Plan(server.address, server.api_key, ["zoe"], 0, 0.0, 2, 0.5, 1, 30.0, 1, True)
    ledger = Ledger()
    client = Client(server.address, server.api_key, ledger, 30.0)
    try:
        client.add("zoe", [f"Zoe plays the banjo ({marker('zoe')})"])
        assert verify(client, plan)[0] == 0
        ledger.acknowledged["zoe"]["0" * 32] = "a write the server never stored"
        lost, examples, _ = verify(client, plan)
        assert lost == 1 and examples == [f"zoe/{'0' * 32}"]
        # A result without the asked user's marker counts as crossed.
        request = write_service_pb2.AddMemoriesRequest(
            user_id="zoe", memories=[write_service_pb2.NewMemory(content="Zoe plays the banjo on Sundays")]
        )
        server.writes.AddMemories(request, metadata=server.md)
        client.query("zoe", "banjo on Sundays")
        assert ledger.cross_user >= 1
    finally:
        client.close()
