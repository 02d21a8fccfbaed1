"""A real C++ Milvus standalone server (`milvus-server` from the `milvus` package), once per test session."""

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

import pytest
from pymilvus import MilvusClient

# The server starts in 30-45 s on an idle machine; a shared 2-core one needs more.
_START_TIMEOUT_S = 180.0
# Every port it opens, so a second session (another worktree) on this machine does not collide.
_PORT_OPTIONS = (
    "--etcd-port",
    "--proxy-port",
    "--proxy-internal-port",
    "--root-coord-port",
    "--query-coord-port",
    "--query-node-port",
    "--index-coord-port",
    "--index-node-port",
    "--data-coord-port",
    "--data-node-port",
)


@dataclass(frozen=True)
class MilvusServer:
    uri: str
    data_dir: Path
    pid: int

    def pause(self) -> None:
        """SIGSTOP the whole process group (wrapper and `milvus run standalone`)."""
        os.killpg(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.killpg(self.pid, signal.SIGCONT)

    def drop_all_collections(self) -> None:
        """Per-test cleanup: the server is shared by the session, the collections are not."""
        client = MilvusClient(uri=self.uri)
        try:
            for name in client.list_collections():
                client.drop_collection(name)
        finally:
            client.close()


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _executable() -> str | None:
    found = Path(sys.executable).parent / "milvus-server"
    return str(found) if found.exists() else shutil.which("milvus-server")


def _answers(uri: str) -> bool:
    try:
        client = MilvusClient(uri=uri, timeout=2)
    except Exception:
        return False
    try:
        client.list_collections(timeout=2)
        return True
    except Exception:
        return False
    finally:
        client.close()


def stop_group(pid: int) -> None:
    """Stop the wrapper and its `milvus run standalone` child: SIGTERM, then SIGKILL; reap the group."""
    try:
        os.killpg(pid, signal.SIGCONT)
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        return


def start_server(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    executable = _executable()
    if executable is None:
        pytest.skip("milvus-server not installed: `pip install milvus==2.3.5` (a dev dependency) did not run here")
    ports = _free_ports(len(_PORT_OPTIONS) + 1)
    args = [executable, "--data", str(data_dir)]
    for option, port in zip(_PORT_OPTIONS, ports, strict=False):
        args += [option, str(port)]
    # The embedded etcd listens on 2379 and 2380 whatever --etcd-port says, so a second server on
    # the machine (another test session) panicked at start; Milvus reads ETCD_CONFIG_PATH.
    etcd_config = data_dir.parent / "embed-etcd.yaml"
    client, peer = f"http://localhost:{ports[0]}", f"http://localhost:{ports[-1]}"
    etcd_config.write_text(
        f"name: default\nlisten-client-urls: {client}\nadvertise-client-urls: {client}\n"
        f"listen-peer-urls: {peer}\ninitial-advertise-peer-urls: {peer}\ninitial-cluster: default={peer}\n"
    )
    log = (data_dir.parent / "milvus-server.log").open("wb")
    process = subprocess.Popen(
        args,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "ETCD_CONFIG_PATH": str(etcd_config)},
    )
    uri = f"http://127.0.0.1:{ports[1]}"
    deadline = time.monotonic() + _START_TIMEOUT_S
    while not _answers(uri):
        if process.poll() is not None or time.monotonic() > deadline:
            stop_group(process.pid)
            raise RuntimeError(f"milvus-server did not answer at {uri}; see {data_dir.parent / 'milvus-server.log'}")
        time.sleep(1.0)
    return process, uri


@pytest.fixture(scope="session")
def milvus_server_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MilvusServer]:
    root = tmp_path_factory.mktemp("milvus-server")
    data_dir = root / "data"
    data_dir.mkdir()
    process, uri = start_server(data_dir)
    try:
        yield MilvusServer(uri, data_dir, process.pid)
    finally:
        stop_group(process.pid)
        process.wait(timeout=30)


@pytest.fixture
def milvus_server(milvus_server_session: MilvusServer) -> MilvusServer:
    """The session's Milvus server, emptied of collections for this test."""
    milvus_server_session.drop_all_collections()
    return milvus_server_session
