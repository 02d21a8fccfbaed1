"""TLS on the gRPC port: trusted and untrusted certificates, mutual TLS, rotation without a restart,
the plaintext probe port, HTTPS metrics, and bad settings that stop the server at start."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc.cli import main
from memsvc.v1 import query_service_pb2, query_service_pb2_grpc, write_service_pb2, write_service_pb2_grpc
from tests.conftest import RunningServer, ServerFactory
from tests.live_server import memsvc_executable
from tests.tls_certs import (
    CertificateAuthority,
    Issued,
    Pki,
    TrustBundle,
    Trusted,
    client_ssl_context,
    grpc_credentials,
    install,
    served_certificate,
)

pytestmark = pytest.mark.e2e

QUERY_SERVICE = "memsvc.v1.QueryService"


def tls_server(
    factory: ServerFactory, cert: Issued, client_ca: CertificateAuthority | None = None, **more: Any
) -> RunningServer:
    return factory(
        tls_cert_file=cert.cert_file,
        tls_key_file=cert.key_file,
        tls_client_ca_file=client_ca.cert_file if client_ca else None,
        **more,
    )


@pytest.fixture
def channels() -> Iterator[list[grpc.Channel]]:
    """Every channel a test opens, closed after it."""
    opened: list[grpc.Channel] = []
    yield opened
    for channel in opened:
        channel.close()


def open_tls(opened: list[grpc.Channel], address: str, ca: Trusted, client: Issued | None = None) -> grpc.Channel:
    channel = grpc.secure_channel(address, grpc_credentials(ca, client))
    opened.append(channel)
    return channel


def remember_and_recall(channel: grpc.Channel, api_key: str, user: str) -> None:
    """A write and a query through the channel; the query finds the write."""
    metadata = RunningServer.auth(api_key)
    added = write_service_pb2_grpc.WriteServiceStub(channel).AddMemories(
        write_service_pb2.AddMemoriesRequest(
            user_id=user, memories=[write_service_pb2.NewMemory(content="My sister Imogen teaches the violin in Porto")]
        ),
        metadata=metadata,
        timeout=60,
    )
    found = query_service_pb2_grpc.QueryServiceStub(channel).Query(
        query_service_pb2.QueryRequest(user_id=user, query="where does my sister teach?"),
        metadata=metadata,
        timeout=60,
    )
    assert added.memories[0].id in [r.memory.id for r in found.memories]


def health_check(channel: grpc.Channel, timeout_s: float = 10.0) -> int:
    reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout_s)
    return int(reply.status)


def refused(channel: grpc.Channel) -> str:
    """The details of a call the channel's handshake (or lack of one) makes UNAVAILABLE."""
    with pytest.raises(grpc.RpcError) as caught:
        health_check(channel, timeout_s=5.0)
    error: Any = caught.value
    assert error.code() == grpc.StatusCode.UNAVAILABLE, error
    return str(error.details())


def test_a_tls_client_gets_results_and_a_plaintext_client_is_refused(
    server_factory: ServerFactory, pki: Pki, channels: list[grpc.Channel]
) -> None:
    s = tls_server(server_factory, pki.server)
    remember_and_recall(open_tls(channels, s.address, pki.ca), s.api_key, "alice")
    # A client certificate is neither needed nor in the way without mutual TLS.
    remember_and_recall(open_tls(channels, s.address, pki.ca, pki.client), s.api_key, "bob")
    plaintext = grpc.insecure_channel(s.address)
    channels.append(plaintext)
    refused(plaintext)
    # The port really presents the configured certificate.
    assert served_certificate(int(s.address.rsplit(":", 1)[1])) == pki.server.der


@pytest.mark.parametrize(
    ("problem", "why"),
    [
        ("another CA", "unable to get local issuer certificate"),
        ("expired", "certificate has expired"),
        ("another host", "Hostname Verification Check failed"),
    ],
)
def test_a_certificate_the_client_cannot_trust_is_refused(
    server_factory: ServerFactory, pki: Pki, channels: list[grpc.Channel], problem: str, why: str
) -> None:
    if problem == "another CA":
        served, trusted = pki.server, pki.other_ca
    elif problem == "expired":
        served, trusted = pki.ca.issue("expired", expired=True), pki.ca
    else:
        served, trusted = pki.ca.issue("elsewhere", hosts=("memsvc.example.com",)), pki.ca
    s = tls_server(server_factory, served)
    assert why in refused(open_tls(channels, s.address, trusted))


def test_mutual_tls_refuses_clients_without_a_certificate_or_from_another_ca(
    server_factory: ServerFactory, pki: Pki, channels: list[grpc.Channel]
) -> None:
    s = tls_server(server_factory, pki.server, client_ca=pki.ca)
    remember_and_recall(open_tls(channels, s.address, pki.ca, pki.client), s.api_key, "carol")
    refused(open_tls(channels, s.address, pki.ca))
    refused(open_tls(channels, s.address, pki.ca, pki.other_client))
    plaintext = grpc.insecure_channel(s.address)
    channels.append(plaintext)
    refused(plaintext)
    # The certificate opens the channel; the API key still decides who calls.
    with pytest.raises(grpc.RpcError) as caught:
        query_service_pb2_grpc.QueryServiceStub(open_tls(channels, s.address, pki.ca, pki.client)).Query(
            query_service_pb2.QueryRequest(user_id="carol", query="violin"), timeout=30
        )
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED  # type: ignore[attr-defined]


def test_a_rotated_certificate_reaches_new_connections_while_open_calls_go_on(
    server_factory: ServerFactory,
    pki: Pki,
    channels: list[grpc.Channel],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    served = tmp_path / "served"
    served.mkdir()
    cert_file, key_file = served / "tls.crt", served / "tls.key"
    install(pki.server, cert_file, key_file)
    # Clients trust both CAs; the rotation moves the server from one to the other, so a client
    # trusting only the old CA can tell which certificate a new connection got.
    both = TrustBundle.of(tmp_path / "both.crt", pki.ca, pki.other_ca)
    s = server_factory(tls_cert_file=cert_file, tls_key_file=key_file)
    port = int(s.address.rsplit(":", 1)[1])
    before = open_tls(channels, s.address, both)
    remember_and_recall(before, s.api_key, "dora")
    watch = health_pb2_grpc.HealthStub(before).Watch(health_pb2.HealthCheckRequest(service=QUERY_SERVICE), timeout=60)
    assert next(watch).status == health_pb2.HealthCheckResponse.SERVING

    rotated = pki.other_ca.issue("rotated")
    install(rotated, cert_file, key_file)
    assert served_certificate(port) == rotated.der
    remember_and_recall(open_tls(channels, s.address, pki.other_ca), s.api_key, "erin")
    refused(open_tls(channels, s.address, pki.ca))

    # The connection opened before the rotation still carries calls, and its stream is still open.
    remember_and_recall(before, s.api_key, "dora")
    s.run(s.server.grpc.health.set(QUERY_SERVICE, health_pb2.HealthCheckResponse.NOT_SERVING))
    assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING
    s.run(s.server.grpc.health.set(QUERY_SERVICE, health_pb2.HealthCheckResponse.SERVING))
    watch.cancel()

    # A half-done replacement (a new certificate, the old key still in place) is not served: the
    # last good certificate stays, and the pair is taken once the key follows.
    third = pki.ca.issue("third")
    with caplog.at_level(logging.WARNING, logger="memsvc.tls"):
        shutil.copyfile(third.cert_file, cert_file)
        assert served_certificate(port) == rotated.der
    assert "does not match" in caplog.text
    shutil.copyfile(third.key_file, key_file)
    assert served_certificate(port) == third.der


def test_the_probe_port_serves_only_health_in_plaintext(
    server_factory: ServerFactory, pki: Pki, channels: list[grpc.Channel]
) -> None:
    s = tls_server(server_factory, pki.server, client_ca=pki.ca, probe_listen="127.0.0.1:0")
    probe_port = s.server.grpc.probe_port
    assert probe_port > 0
    probe = grpc.insecure_channel(f"127.0.0.1:{probe_port}")
    channels.append(probe)
    assert health_check(probe) == health_pb2.HealthCheckResponse.SERVING
    ready = health_pb2_grpc.HealthStub(probe).Check(health_pb2.HealthCheckRequest(service=QUERY_SERVICE), timeout=10)
    assert ready.status == health_pb2.HealthCheckResponse.SERVING
    with pytest.raises(grpc.RpcError) as caught:
        query_service_pb2_grpc.QueryServiceStub(probe).Query(
            query_service_pb2.QueryRequest(user_id="x", query="y"), metadata=s.md, timeout=10
        )
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED  # type: ignore[attr-defined]
    # Readiness on the probe port follows the server's: draining shows there too.
    s.run(s.server.grpc.health.set(QUERY_SERVICE, health_pb2.HealthCheckResponse.NOT_SERVING))
    ready = health_pb2_grpc.HealthStub(probe).Check(health_pb2.HealthCheckRequest(service=QUERY_SERVICE), timeout=10)
    assert ready.status == health_pb2.HealthCheckResponse.NOT_SERVING


def test_metrics_are_served_over_https_with_the_same_certificate(
    server_factory: ServerFactory, pki: Pki, tmp_path: Path
) -> None:
    served = tmp_path / "served"
    served.mkdir()
    cert_file, key_file = served / "tls.crt", served / "tls.key"
    install(pki.server, cert_file, key_file)
    s = server_factory(
        tls_cert_file=cert_file,
        tls_key_file=key_file,
        tls_client_ca_file=pki.ca.cert_file,
        metrics_listen="127.0.0.1:0",
    )
    port = s.components.metrics.port
    url = f"https://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=10, context=client_ssl_context(pki.ca, pki.client)) as response:
        assert b"memsvc_index_lag" in response.read()
    for context in (client_ssl_context(pki.ca), client_ssl_context(pki.other_ca, pki.client)):
        with pytest.raises((urllib.error.URLError, OSError)):
            urllib.request.urlopen(url, timeout=10, context=context)
    with pytest.raises((urllib.error.URLError, OSError)):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10)
    # Rotation reaches the scrape endpoint too.
    rotated = pki.ca.issue("metrics-rotated")
    install(rotated, cert_file, key_file)
    assert served_certificate(port, pki.client, alpn="http/1.1") == rotated.der
    with urllib.request.urlopen(url, timeout=10, context=client_ssl_context(pki.ca, pki.client)) as response:
        assert response.status == 200


def bad_settings(pki: Pki, tmp_path: Path) -> dict[str, tuple[dict[str, str], str]]:
    """Each wrong TLS configuration, and the start of the one line that must name it."""
    not_pem = tmp_path / "not-pem.crt"
    not_pem.write_text("this is not a certificate\n")
    directory = tmp_path / "a-directory"
    directory.mkdir(exist_ok=True)
    good = {"MEMSVC_TLS_CERT_FILE": str(pki.server.cert_file), "MEMSVC_TLS_KEY_FILE": str(pki.server.key_file)}
    return {
        "missing key file": (
            {**good, "MEMSVC_TLS_KEY_FILE": str(tmp_path / "missing.key")},
            "MEMSVC_TLS_KEY_FILE: cannot read",
        ),
        "unreadable key file": ({**good, "MEMSVC_TLS_KEY_FILE": str(directory)}, "MEMSVC_TLS_KEY_FILE: cannot read"),
        "key of another certificate": (
            {**good, "MEMSVC_TLS_KEY_FILE": str(pki.client.key_file)},
            "MEMSVC_TLS_KEY_FILE: the key in",
        ),
        "client CA not PEM": ({**good, "MEMSVC_TLS_CLIENT_CA_FILE": str(not_pem)}, "MEMSVC_TLS_CLIENT_CA_FILE:"),
        "certificate not PEM": ({**good, "MEMSVC_TLS_CERT_FILE": str(not_pem)}, "MEMSVC_TLS_CERT_FILE:"),
        "key without certificate": ({"MEMSVC_TLS_KEY_FILE": good["MEMSVC_TLS_KEY_FILE"]}, "MEMSVC_TLS_CERT_FILE:"),
        "client CA without TLS": (
            {"MEMSVC_TLS_CLIENT_CA_FILE": str(pki.ca.cert_file)},
            "MEMSVC_TLS_CLIENT_CA_FILE:",
        ),
    }


def test_bad_tls_settings_stop_the_server_at_start_naming_the_setting(
    pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMSVC_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("MEMSVC_LISTEN", "127.0.0.1:0")
    for variable in ("MEMSVC_TLS_CERT_FILE", "MEMSVC_TLS_KEY_FILE", "MEMSVC_TLS_CLIENT_CA_FILE"):
        monkeypatch.delenv(variable, raising=False)
    for case, (env, expected) in bad_settings(pki, tmp_path).items():
        with monkeypatch.context() as scoped:
            for name, value in env.items():
                scoped.setenv(name, value)
            assert main(["serve"]) == 1, case
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"error: {expected}"), f"{case}: {err}"
        # The start stopped before the stores were opened or the model loaded.
        assert not (tmp_path / "data" / "memsvc.db").exists(), case
    # `memsvc mcp` serves HTTPS with the same settings, and refuses them the same way.
    monkeypatch.setenv("MEMSVC_TLS_CERT_FILE", str(pki.server.cert_file))
    monkeypatch.setenv("MEMSVC_TLS_KEY_FILE", str(pki.client.key_file))
    assert main(["mcp", "--transport", "http", "--port", "0", "--address", "127.0.0.1:1"]) == 1
    assert capsys.readouterr().err.strip().startswith("error: MEMSVC_TLS_KEY_FILE: the key in")


def test_the_server_process_exits_with_one_line_on_a_bad_key(pki: Pki, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "MEMSVC_DATA_DIR": str(tmp_path / "data"),
        "MEMSVC_LISTEN": "127.0.0.1:0",
        "MEMSVC_TLS_CERT_FILE": str(pki.server.cert_file),
        "MEMSVC_TLS_KEY_FILE": str(pki.other_client.key_file),
    }
    result = subprocess.run(
        [memsvc_executable(), "serve"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1, result.stderr
    assert lines == [
        f"error: MEMSVC_TLS_KEY_FILE: the key in {pki.other_client.key_file} does not match the certificate in "
        f"{pki.server.cert_file}"
    ], result.stderr
    assert "serving on" not in result.stdout
