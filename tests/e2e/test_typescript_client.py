"""The TypeScript client (clients/typescript) against the real server: `npm test` from Node."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]
CLIENT_DIR = ROOT / "clients" / "typescript"
# Loading the embedding model dominates start-up on a cold machine.
STARTUP_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0
NPM_TEST_TIMEOUT_S = 300.0

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class LiveServer:
    """A memsvc server process listening on a free loopback port."""

    address: str
    api_key: str
    log_path: Path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _memsvc_executable() -> str:
    # The console script of the environment running the tests; .venv/bin/memsvc in the repo.
    beside = Path(sys.executable).with_name("memsvc")
    return str(beside if beside.exists() else ROOT / ".venv" / "bin" / "memsvc")


def _log_tail(path: Path, lines: int = 40) -> str:
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def _wait_until_serving(process: subprocess.Popen[bytes], server: LiveServer) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    with grpc.insecure_channel(server.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            if process.poll() is not None:
                pytest.fail(f"memsvc exited with {process.returncode} before serving:\n{_log_tail(server.log_path)}")
            try:
                reply = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=2.0)
            except grpc.RpcError:
                reply = None
            if reply is not None and reply.status == health_pb2.HealthCheckResponse.SERVING:
                return
            time.sleep(0.5)
    pytest.fail(f"memsvc did not report SERVING within {STARTUP_TIMEOUT_S:.0f} s:\n{_log_tail(server.log_path)}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT_S)


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[LiveServer]:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    port = _free_port()
    log_path = tmp_path / "memsvc.log"
    env = {
        **os.environ,
        "MEMSVC_LISTEN": f"127.0.0.1:{port}",
        "MEMSVC_DATA_DIR": str(data_dir),
    }
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [_memsvc_executable(), "serve"],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        pending = LiveServer(f"127.0.0.1:{port}", "", log_path)
        _wait_until_serving(process, pending)
        key_path = data_dir / "dev-api-key"
        assert key_path.exists(), f"memsvc wrote no development key at {key_path}"
        yield LiveServer(pending.address, key_path.read_text(encoding="utf-8").strip(), log_path)
    finally:
        _stop(process)


@pytest.mark.timeout(STARTUP_TIMEOUT_S + NPM_TEST_TIMEOUT_S + 120)
def test_typescript_client_against_live_server(live_server: LiveServer) -> None:
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: install Node.js 20+ and npm to test the TS client")
    subprocess.run([str(ROOT / "tools" / "ensure_node_modules.sh")], cwd=ROOT, check=True)
    env = {
        **os.environ,
        "MEMSVC_ADDRESS": live_server.address,
        "MEMSVC_API_KEY": live_server.api_key,
    }
    result = subprocess.run(
        ["npm", "test"],
        cwd=CLIENT_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=NPM_TEST_TIMEOUT_S,
        check=False,
    )
    output = f"{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, f"npm test failed:\n{output}\nserver log:\n{_log_tail(live_server.log_path)}"
    # The live tests skip themselves without an address; here they must have run.
    assert "# SKIP" not in output, f"the Node e2e tests were skipped:\n{output}"
    assert "adds memories for a fresh user" in output, output
