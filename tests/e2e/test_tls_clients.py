"""Every client of memsvc against a server that requires mutual TLS: the CLI (flags and settings),
`memsvc mcp` (reaching memsvc over TLS and serving HTTPS itself), the Go and TypeScript clients."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from memsvc.cli import main
from tests.conftest import RunningServer, ServerFactory
from tests.e2e.processes import free_port, stop_process, wait_for_port
from tests.e2e.test_go_client import BUILD_SCRIPT, GO_TEST_TIMEOUT_S, TOOLCHAIN_MISSING
from tests.e2e.test_mcp import call
from tests.live_server import ROOT, log_tail, memsvc_executable
from tests.tls_certs import Pki, client_ssl_context, install, served_certificate

pytestmark = pytest.mark.e2e


@pytest.fixture
def mtls_server(server_factory: ServerFactory, pki: Pki) -> RunningServer:
    return server_factory(
        tls_cert_file=pki.server.cert_file, tls_key_file=pki.server.key_file, tls_client_ca_file=pki.ca.cert_file
    )


def client_env(server: RunningServer, **more: str) -> dict[str, str]:
    """The environment of a client process: the server's address and key, no TLS settings of the caller's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSVC_CLIENT_", "MEMSVC_TLS_"))}
    return {**env, "MEMSVC_ADDRESS": server.address, "MEMSVC_API_KEY": server.api_key, **more}


def memsvc_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [memsvc_executable(), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_cli_reaches_a_mutual_tls_server_by_flags_or_settings(mtls_server: RunningServer, pki: Pki) -> None:
    flags = ["--ca-file", str(pki.ca.cert_file), "--cert-file", str(pki.client.cert_file)]
    flags += ["--key-file", str(pki.client.key_file)]
    env = client_env(mtls_server)
    added = memsvc_cli(["add", *flags, "--json", "--user", "tina", "My bike is a green Brompton"], env)
    assert added.returncode == 0, added.stderr
    memory_id = json.loads(added.stdout)["memories"][0]["id"]

    by_settings = client_env(
        mtls_server,
        MEMSVC_CLIENT_CA_FILE=str(pki.ca.cert_file),
        MEMSVC_CLIENT_CERT_FILE=str(pki.client.cert_file),
        MEMSVC_CLIENT_KEY_FILE=str(pki.client.key_file),
    )
    found = memsvc_cli(["query", "--json", "--user", "tina", "what bike do I ride?"], by_settings)
    assert found.returncode == 0, found.stderr
    assert memory_id in [r["memory"]["id"] for r in json.loads(found.stdout)["memories"]]

    without_cert = memsvc_cli(["query", "--ca-file", str(pki.ca.cert_file), "--user", "tina", "bike"], env)
    assert without_cert.returncode == 2
    assert without_cert.stderr.startswith("error: UNAVAILABLE"), without_cert.stderr
    plaintext = memsvc_cli(["query", "--user", "tina", "bike"], env)
    assert plaintext.returncode == 2
    assert plaintext.stderr.startswith("error: UNAVAILABLE"), plaintext.stderr
    # A wrong file is named before any call is made.
    not_pem = memsvc_cli(["query", "--ca-file", str(pki.client.key_file), "--user", "tina", "bike"], env)
    assert not_pem.returncode == 1
    assert not_pem.stderr.strip() == (
        f"error: MEMSVC_CLIENT_CA_FILE (--ca-file): {pki.client.key_file} holds no PEM certificate"
    )


@pytest.fixture
def mcp_https(mtls_server: RunningServer, pki: Pki, tmp_path: Path) -> Iterator[str]:
    """`memsvc mcp --transport http` serving HTTPS with the server's certificate settings (client
    certificates required; the files in tmp_path/served), calling memsvc over mutual TLS; its URL."""
    port = free_port()
    log = tmp_path / "mcp.log"
    served = tmp_path / "served"
    served.mkdir()
    install(pki.server, served / "tls.crt", served / "tls.key")
    env = client_env(
        mtls_server,
        MEMSVC_TLS_CERT_FILE=str(served / "tls.crt"),
        MEMSVC_TLS_KEY_FILE=str(served / "tls.key"),
        MEMSVC_TLS_CLIENT_CA_FILE=str(pki.ca.cert_file),
    )
    del env["MEMSVC_API_KEY"]  # over HTTP each request brings its own
    args = ["mcp", "--transport", "http", "--port", str(port), "--address", mtls_server.address]
    args += ["--ca-file", str(pki.ca.cert_file), "--cert-file", str(pki.client.cert_file)]
    args += ["--key-file", str(pki.client.key_file)]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [memsvc_executable(), *args], env=env, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=out, stderr=out
        )
    try:
        wait_for_port(port, 60, process, log)
        yield f"https://127.0.0.1:{port}/mcp"
    finally:
        stop_process(process)
        print(log_tail(log))


def test_mcp_serves_https_and_reaches_memsvc_over_mutual_tls(
    mtls_server: RunningServer, pki: Pki, mcp_https: str, tmp_path: Path
) -> None:
    user = f"mcp-tls-{uuid.uuid4().hex[:8]}"
    headers = {"Authorization": f"Bearer {mtls_server.api_key}"}

    async def scenario() -> None:
        context = client_ssl_context(pki.ca, pki.client)
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120, verify=context) as http,
            Client(streamable_http_client(mcp_https, http_client=http), read_timeout_seconds=120) as client,
        ):
            await call(client, "remember", user_id=user, content="Uma grows chillies on her balcony")
            found = await call(client, "recall", user_id=user, query="what does uma grow?")
            assert "chillies" in found["context"]
        # The HTTPS port wants a client certificate as the gRPC port does, and speaks no plaintext.
        for client_context in (client_ssl_context(pki.ca), client_ssl_context(pki.other_ca, pki.client)):
            async with httpx2.AsyncClient(headers=headers, timeout=10, verify=client_context) as http:
                with pytest.raises(httpx2.HTTPError):
                    await http.post(mcp_https, json={})
        async with httpx2.AsyncClient(headers=headers, timeout=10) as http:
            with pytest.raises(httpx2.HTTPError):
                await http.post(mcp_https.replace("https://", "http://"), json={})

    anyio.run(scenario)
    # A renewed certificate reaches the HTTPS port's next connection without a restart.
    port = int(mcp_https.rsplit(":", 1)[1].split("/")[0])
    assert served_certificate(port, pki.client, alpn="http/1.1") == pki.server.der
    renewed = pki.ca.issue("mcp-renewed")
    install(renewed, tmp_path / "served" / "tls.crt", tmp_path / "served" / "tls.key")
    assert served_certificate(port, pki.client, alpn="http/1.1") == renewed.der


def test_go_client_over_mutual_tls(mtls_server: RunningServer, pki: Pki) -> None:
    env = client_env(
        mtls_server,
        MEMSVC_CA_FILE=str(pki.ca.cert_file),
        MEMSVC_CLIENT_CERT_FILE=str(pki.client.cert_file),
        MEMSVC_CLIENT_KEY_FILE=str(pki.client.key_file),
    )
    result = subprocess.run(
        [str(BUILD_SCRIPT), "-v", "-run", "TestTLSLiveServer"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=GO_TEST_TIMEOUT_S,
        check=False,
    )
    if result.returncode == TOOLCHAIN_MISSING:
        pytest.skip(result.stderr.strip().splitlines()[-1])
    output = f"{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, f"go test failed:\n{output}"
    for subtest in (
        "with_the_CA_and_a_client_certificate,_add_then_query_finds_the_memory",
        "without_a_client_certificate_the_handshake_is_refused",
        "plaintext_is_refused",
        "bad_TLS_files_are_errors",
    ):
        assert f"--- PASS: TestTLSLiveServer/{subtest}" in output, f"subtest {subtest} did not pass:\n{output}"


def test_typescript_client_over_mutual_tls(mtls_server: RunningServer, pki: Pki) -> None:
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: install Node.js 20+ and npm to test the TS client")
    subprocess.run([str(ROOT / "tools" / "ensure_node_modules.sh")], cwd=ROOT, check=True)
    env = client_env(
        mtls_server,
        MEMSVC_CA_FILE=str(pki.ca.cert_file),
        MEMSVC_CLIENT_CERT_FILE=str(pki.client.cert_file),
        MEMSVC_CLIENT_KEY_FILE=str(pki.client.key_file),
    )
    result = subprocess.run(
        ["npm", "test"],
        cwd=ROOT / "clients" / "typescript",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = f"{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, f"npm test failed:\n{output}"
    assert "# SKIP" not in output, output
    assert "adds memories for a fresh user" in output, output
    assert "over mutual TLS a client without a certificate, or in plaintext, is refused" in output, output


def test_bench_query_drives_a_mutual_tls_server(
    mtls_server: RunningServer, pki: Pki, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = tmp_path / "bench.json"
    args = ["bench", "query", "--address", mtls_server.address, "--api-key", mtls_server.api_key, "--users", "2"]
    args += ["--queries", "20", "--max-seconds", "120", "--concurrency", "2", "--json", str(summary)]
    tls = ["--ca-file", str(pki.ca.cert_file), "--cert-file", str(pki.client.cert_file)]
    tls += ["--key-file", str(pki.client.key_file)]
    assert main([*args, *tls]) == 0
    data = json.loads(summary.read_text())
    assert data["tls"] is True and data["queries"] == 20 and not data["errors"]
    assert data["connection_first_call_p50_ms"] > 0 and data["connection_next_call_p50_ms"] > 0
    # Without the client certificate the connections are refused, and the run says so.
    assert main([*args, "--ca-file", str(pki.ca.cert_file)]) == 2
    assert capsys.readouterr().err.startswith("error: UNAVAILABLE")
