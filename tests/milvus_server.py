"""A real C++ Milvus standalone server (`milvus-server` from the `milvus` package), once per test session."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

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


class MilvusServer:
    """The session's `milvus-server` process group: its address, data directory and ports.

    A handle on a process, not a value: `kill` and `restart` replace the process in place (same
    data directory, same ports, so clients holding the URI reconnect to it).
    """

    def __init__(
        self, data_dir: Path, extra_args: tuple[str, ...] = (), client_kwargs: Mapping[str, Any] | None = None
    ) -> None:
        """`extra_args` go to milvus-server (TLS options, say); `client_kwargs` are what a client
        then needs to reach it (a TLS server's URI is https://)."""
        self.data_dir = data_dir
        # One port per option, and the embedded etcd's peer port last.
        self.ports = tuple(_free_ports(len(_PORT_OPTIONS) + 1))
        self.extra_args = extra_args
        self.client_kwargs = dict(client_kwargs or {})
        self.uri = f"{'https' if self.client_kwargs else 'http'}://127.0.0.1:{self.ports[1]}"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self._process is not None, "the server is not running"
        return self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def log(self) -> Path:
        return self.data_dir.parent / "milvus-server.log"

    def start(self) -> MilvusServer:
        self._process = start_process(
            self.data_dir, self.ports, self.uri, self.log, self.extra_args, self.client_kwargs
        )
        return self

    def pause(self) -> None:
        """SIGSTOP the whole process group (wrapper and `milvus run standalone`)."""
        os.killpg(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.killpg(self.pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL the whole process group, as a node failure would, and reap it."""
        assert self._process is not None
        with contextlib.suppress(ProcessLookupError):  # the whole group may be gone already
            os.killpg(self.pid, signal.SIGKILL)
        self._process.wait(30)
        _wait_group_gone(self.pid, 30)
        self._process = None

    def restart(self) -> None:
        """Start again on the same data directory and ports (after `kill`)."""
        assert not self.running, "kill the running server first"
        self.start()

    def stop(self) -> None:
        """End of session: the data is thrown away, so no graceful stop (it took 20 s)."""
        if self._process is not None:
            self.kill()

    def fresh(self) -> MilvusServer:
        """Running, not paused, and without collections: as each test (or module) wants it."""
        if not self.running:  # a fault test killed it and failed before its restart
            self.restart()
        self.resume()  # and one that failed while it was paused
        self.drop_all_collections()
        return self

    def drop_all_collections(self) -> None:
        """Per-test cleanup: the server is shared by the session, the collections are not."""
        client = MilvusClient(uri=self.uri, **self.client_kwargs)
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


def _answers(uri: str, client_kwargs: Mapping[str, Any]) -> bool:
    try:
        client = MilvusClient(uri=uri, timeout=2, **client_kwargs)
    except Exception:
        return False
    try:
        client.list_collections(timeout=2)
        return True
    except Exception:
        return False
    finally:
        client.close()


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """Stop the wrapper and its `milvus run standalone` child: SIGTERM, then SIGKILL; reap the group."""
    try:
        os.killpg(process.pid, signal.SIGCONT)
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    # Reap the wrapper first: unreaped, it stays in its group and the group never looks gone.
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(20)
    if _wait_group_gone(process.pid, 20):
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    process.wait(10)


def _wait_group_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def start_process(
    data_dir: Path,
    ports: tuple[int, ...],
    uri: str,
    log_path: Path,
    extra_args: tuple[str, ...] = (),
    client_kwargs: Mapping[str, Any] | None = None,
) -> subprocess.Popen[bytes]:
    executable = _executable()
    if executable is None:
        pytest.skip("milvus-server not installed: `pip install milvus==2.3.5` (a dev dependency) did not run here")
    args = [executable, "--data", str(data_dir)]
    for option, port in zip(_PORT_OPTIONS, ports, strict=False):
        args += [option, str(port)]
    args += extra_args
    # The embedded etcd listens on 2379 and 2380 whatever --etcd-port says, so a second server on
    # the machine (another test session) panicked at start; Milvus reads ETCD_CONFIG_PATH.
    etcd_config = data_dir.parent / "embed-etcd.yaml"
    client, peer = f"http://localhost:{ports[0]}", f"http://localhost:{ports[-1]}"
    etcd_config.write_text(
        f"name: default\nlisten-client-urls: {client}\nadvertise-client-urls: {client}\n"
        f"listen-peer-urls: {peer}\ninitial-advertise-peer-urls: {peer}\ninitial-cluster: default={peer}\n"
    )
    with log_path.open("ab") as log:  # the child keeps its own descriptor
        process = subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "ETCD_CONFIG_PATH": str(etcd_config)},
        )
    deadline = time.monotonic() + _START_TIMEOUT_S
    while not _answers(uri, client_kwargs or {}):
        if process.poll() is not None or time.monotonic() > deadline:
            stop_group(process)
            tail = log_path.read_bytes()[-3000:].decode(errors="replace")
            raise RuntimeError(
                f"milvus-server did not answer at {uri} within {_START_TIMEOUT_S} s; {log_path}:\n{tail}"
            )
        time.sleep(1.0)
    return process


@pytest.fixture(scope="session")
def milvus_server_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MilvusServer]:
    root = tmp_path_factory.mktemp("milvus-server")
    data_dir = root / "data"
    data_dir.mkdir()
    server = MilvusServer(data_dir).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def milvus_server(milvus_server_session: MilvusServer) -> MilvusServer:
    """The session's Milvus server, running and emptied of collections for this test."""
    return milvus_server_session.fresh()
