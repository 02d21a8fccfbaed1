"""A memsvc server as a real subprocess (`memsvc serve`), for tests of the CLI and other clients."""

from __future__ import annotations

import os
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

ROOT = Path(__file__).resolve().parents[1]
# Loading the embedding model dominates start-up on a cold machine.
STARTUP_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class LiveServer:
    """A memsvc server process listening on a free loopback port."""

    address: str
    api_key: str
    log_path: Path
    data_dir: Path

    def env(self) -> dict[str, str]:
        """Environment for CLI calls against this server."""
        return {**os.environ, "MEMSVC_ADDRESS": self.address, "MEMSVC_DATA_DIR": str(self.data_dir)}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def memsvc_executable() -> str:
    # The console script of the environment running the tests; .venv/bin/memsvc in the repo.
    beside = Path(sys.executable).with_name("memsvc")
    return str(beside if beside.exists() else ROOT / ".venv" / "bin" / "memsvc")


def log_tail(path: Path, lines: int = 40) -> str:
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def _wait_until_serving(process: subprocess.Popen[bytes], server: LiveServer) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    with grpc.insecure_channel(server.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            if process.poll() is not None:
                pytest.fail(f"memsvc exited with {process.returncode} before serving:\n{log_tail(server.log_path)}")
            try:
                reply = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=2.0)
            except grpc.RpcError:
                reply = None
            if reply is not None and reply.status == health_pb2.HealthCheckResponse.SERVING:
                return
            time.sleep(0.5)
    pytest.fail(f"memsvc did not report SERVING within {STARTUP_TIMEOUT_S:.0f} s:\n{log_tail(server.log_path)}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT_S)


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One server process per test module: starting one costs seconds (model, Milvus Lite)."""
    tmp_path = tmp_path_factory.mktemp("live")
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
            [memsvc_executable(), "serve"],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        pending = LiveServer(f"127.0.0.1:{port}", "", log_path, data_dir)
        _wait_until_serving(process, pending)
        key_path = data_dir / "dev-api-key"
        assert key_path.exists(), f"memsvc wrote no development key at {key_path}"
        yield LiveServer(pending.address, key_path.read_text(encoding="utf-8").strip(), log_path, data_dir)
    finally:
        _stop(process)
