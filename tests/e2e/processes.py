"""Real processes for e2e tests: `memsvc serve` replicas and a standalone Milvus Lite server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc.crypto.keyring import new_key_b64

BIN = Path(sys.executable).parent
WRITE_SERVICE = "memsvc.v1.WriteService"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout_s: float, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"process exited with {process.returncode}:\n{log.read_text()[-4000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"nothing listens on {port} after {timeout_s} s:\n{log.read_text()[-4000:]}")


def stop_process(process: subprocess.Popen[bytes], timeout_s: float = 20) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
    return process.returncode


@dataclass
class MilvusLiteServer:
    """One `milvus-lite server` process: the vector store several replicas can share.

    A Milvus Lite *file* is locked by the one process that opens it, so replicas cannot share
    a file; they share this server by its URI, as they would share a Milvus standalone.
    """

    data_dir: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MilvusLiteServer:
        log = self.data_dir.with_suffix(".log")
        with log.open("wb") as out:  # the child keeps its own descriptor
            self.process = subprocess.Popen(
                [str(BIN / "milvus-lite"), "server", "--data-dir", str(self.data_dir), "--port", str(self.port)],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        wait_for_port(self.port, 30, self.process, log)
        return self

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)


def replica_env(
    *, record_store_url: str, milvus_uri: str, redis_url: str = "", redis_prefix: str = "", **extra: str
) -> dict[str, str]:
    """Settings every replica of one deployment shares (secrets included)."""
    env = {
        "MEMSVC_RECORD_STORE_URL": record_store_url,
        "MEMSVC_MILVUS_URI": milvus_uri,
        "MEMSVC_MASTER_KEYS": f"1:{new_key_b64()}",
        "MEMSVC_API_KEY_PEPPER": new_key_b64(),
        "MEMSVC_BOOTSTRAP_DEV_KEY": "false",
        # One process per replica: the tests of replicas count processes (worker processes are
        # tested on their own, in tests/e2e/test_workers.py).
        "MEMSVC_WORKERS": "1",
        "MEMSVC_RECONCILE_INTERVAL_S": "3600",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    if redis_url:
        env["MEMSVC_REDIS_URL"] = redis_url
        env["MEMSVC_REDIS_KEY_PREFIX"] = redis_prefix
    env.update(extra)
    return env


def memsvc(args: list[str], env: Mapping[str, str], cwd: Path, timeout_s: float = 60) -> str:
    """Run one `memsvc` command; return its stdout."""
    done = subprocess.run(
        [str(BIN / "memsvc"), *args],
        env={**os.environ, **env},
        cwd=cwd,
        capture_output=True,
        timeout=timeout_s,
        check=False,
    )
    assert done.returncode == 0, f"memsvc {' '.join(args)} failed:\n{done.stderr.decode()[-4000:]}"
    return done.stdout.decode()


@dataclass
class Replica:
    """One `memsvc serve` process on a free port."""

    name: str
    workdir: Path
    env: Mapping[str, str]
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    channel: grpc.Channel | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.name}.log"

    def start(self, timeout_s: float = 90) -> Replica:
        return self.launch().wait_ready(timeout_s)

    def launch(self) -> Replica:
        """Start the process without waiting (replicas load their models in parallel)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            **self.env,
            "MEMSVC_LISTEN": self.address,
            "MEMSVC_DATA_DIR": str(self.workdir / self.name),
        }
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [str(BIN / "memsvc"), "serve"], env=env, cwd=self.workdir, stdout=out, stderr=subprocess.STDOUT
            )
        return self

    def wait_ready(self, timeout_s: float = 90) -> Replica:
        assert self.process is not None
        wait_for_port(self.port, timeout_s, self.process, self.log)
        self.channel = grpc.insecure_channel(self.address)
        deadline = time.monotonic() + timeout_s
        while self.health() != health_pb2.HealthCheckResponse.SERVING:
            assert time.monotonic() < deadline, f"{self.name} never became ready:\n{self.log.read_text()[-4000:]}"
            time.sleep(0.2)
        return self

    def health(self, service: str = WRITE_SERVICE) -> int:
        assert self.channel is not None
        stub = health_pb2_grpc.HealthStub(self.channel)
        try:
            return int(stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status)
        except grpc.RpcError:
            return int(health_pb2.HealthCheckResponse.UNKNOWN)

    def stop(self) -> int:
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        return stop_process(self.process) if self.process is not None else 0
