"""The vector index on a C++ Milvus server (2.3.5, `milvus-server`) that requires mutual TLS
(`common.security.tlsMode: 2`), through the gRPC API; wrong TLS settings stop the start-up."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memsvc.config import Settings
from memsvc.errors import FailedPrecondition, Unavailable
from memsvc.server import build_components
from tests.conftest import LoopThread, RunningServer, ServerFactory
from tests.integration.test_outbound_tls import recall, remember
from tests.milvus_server import MilvusServer
from tests.tls_certs import Pki

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def client_tls(pki: Pki) -> dict[str, Any]:
    """memsvc's settings for the server: the CA that signed it, and a client certificate."""
    return {
        "milvus_server_pem_path": str(pki.ca.cert_file),
        "milvus_client_pem_path": str(pki.client.cert_file),
        "milvus_client_key_path": str(pki.client.key_file),
    }


def start_milvus(pki: Pki, directory: Path, tls_mode: int) -> MilvusServer:
    """`milvus-server` with TLS on its proxy: one-way (mode 1) or mutual (mode 2)."""
    data_dir = directory / "data"
    data_dir.mkdir()
    server_args = ("--tls-mode", str(tls_mode), "--server-pem-path", str(pki.server.cert_file))
    server_args += ("--server-key-path", str(pki.server.key_file), "--ca-pem-path", str(pki.ca.cert_file))
    client_kwargs: dict[str, Any] = {"secure": True, "dedicated": True}
    if tls_mode == 1:
        client_kwargs["server_pem_path"] = str(pki.ca.cert_file)
    else:
        client_kwargs["ca_pem_path"] = str(pki.ca.cert_file)
        client_kwargs["client_pem_path"] = str(pki.client.cert_file)
        client_kwargs["client_key_path"] = str(pki.client.key_file)
    return MilvusServer(data_dir, server_args, client_kwargs).start()


@pytest.fixture(scope="module")
def milvus_tls(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MilvusServer]:
    server = start_milvus(pki, tmp_path_factory.mktemp("milvus-mtls"), tls_mode=2)
    try:
        yield server
    finally:
        server.stop()


def remember_and_recall(s: RunningServer) -> None:
    report = recall(s, "zoe", remember(s, "zoe"))
    assert report.candidates_recalled >= 1 and not report.degraded


def test_the_vector_index_on_a_milvus_server_over_mutual_tls(
    server_factory: ServerFactory, milvus_tls: MilvusServer, pki: Pki
) -> None:
    # Dense recall only, so the answer must come through the TLS connection to Milvus.
    remember_and_recall(server_factory(milvus_uri=milvus_tls.uri, lexical_enabled=False, **client_tls(pki)))


@pytest.fixture(scope="module")
def milvus_one_way_tls(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MilvusServer]:
    server = start_milvus(pki, tmp_path_factory.mktemp("milvus-tls"), tls_mode=1)
    try:
        yield server
    finally:
        server.stop()


def test_the_vector_index_on_a_milvus_server_over_one_way_tls(
    server_factory: ServerFactory, milvus_one_way_tls: MilvusServer, pki: Pki
) -> None:
    settings = {"milvus_server_pem_path": str(pki.ca.cert_file)}
    remember_and_recall(server_factory(milvus_uri=milvus_one_way_tls.uri, lexical_enabled=False, **settings))


@pytest.mark.parametrize(
    "wrong",
    ["plaintext", "no client certificate", "another CA", "client certificate of another CA"],
)
def test_wrong_milvus_tls_settings_stop_the_start(
    milvus_tls: MilvusServer, pki: Pki, loop_thread: LoopThread, embedder: Any, tmp_path: Path, wrong: str
) -> None:
    good = client_tls(pki)
    settings = {
        "plaintext": {"milvus_uri": milvus_tls.uri.replace("https://", "http://")},
        "no client certificate": {"milvus_server_pem_path": good["milvus_server_pem_path"]},
        "another CA": {**good, "milvus_server_pem_path": str(pki.other_ca.cert_file)},
        "client certificate of another CA": {
            **good,
            "milvus_client_pem_path": str(pki.other_client.cert_file),
            "milvus_client_key_path": str(pki.other_client.key_file),
        },
    }[wrong]
    values = {"data_dir": tmp_path, "milvus_uri": milvus_tls.uri, "milvus_call_timeout_s": 5.0, **settings}
    with pytest.raises(Unavailable, match="does not answer"):
        loop_thread.run(build_components(Settings(**values), embedder=embedder))


def test_a_client_certificate_without_its_key_is_refused_by_name(
    milvus_tls: MilvusServer, pki: Pki, loop_thread: LoopThread, embedder: Any, tmp_path: Path
) -> None:
    settings = Settings(
        data_dir=tmp_path,
        milvus_uri=milvus_tls.uri,
        milvus_server_pem_path=str(pki.ca.cert_file),
        milvus_client_pem_path=str(pki.client.cert_file),
    )
    with pytest.raises(FailedPrecondition, match="MEMSVC_MILVUS_CLIENT_KEY_PATH"):
        loop_thread.run(build_components(settings, embedder=embedder))
