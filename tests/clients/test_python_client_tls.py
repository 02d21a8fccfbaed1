"""The Python client (clients/python) against a server that requires mutual TLS."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from memsvc_client import AsyncMemoryClient, MemoryClient, UnavailableError, tls_credentials

from tests.conftest import ServerFactory
from tests.tls_certs import Pki

pytestmark = pytest.mark.e2e


def test_tls_credentials_reach_a_mutual_tls_server(server_factory: ServerFactory, pki: Pki, tmp_path: Path) -> None:
    # The certificate names only the cluster's name, as behind a port-forward to 127.0.0.1.
    served = pki.ca.issue("cluster-name-only", hosts=("memsvc.memsvc.svc",))
    server = server_factory(
        tls_cert_file=served.cert_file, tls_key_file=served.key_file, tls_client_ca_file=pki.ca.cert_file
    )
    credentials = tls_credentials(pki.ca.cert_file, pki.client.cert_file, pki.client.key_file)
    override = [("grpc.ssl_target_name_override", "memsvc.memsvc.svc")]
    with MemoryClient(server.address, server.api_key, tls=credentials, channel_options=override) as client:
        memory = client.add("vera", "My piano teacher is called Mr Okafor")
        assert memory.id in [hit.memory.id for hit in client.query("vera", "who teaches me piano?").memories]

    async def asynchronously() -> str:
        async with AsyncMemoryClient(
            server.address, server.api_key, tls=credentials, channel_options=override
        ) as client:
            return (await client.get_memory("vera", memory.id)).content

    assert asyncio.run(asynchronously()) == "My piano teacher is called Mr Okafor"

    without_certificate = tls_credentials(pki.ca.cert_file)
    refused = [
        (without_certificate, override),
        (tls_credentials(pki.ca.cert_file, pki.client.cert_file, pki.client.key_file), []),  # wrong host name
        (tls_credentials(pki.other_ca.cert_file, pki.client.cert_file, pki.client.key_file), override),
    ]
    for tls, options in refused:
        with (
            MemoryClient(server.address, server.api_key, tls=tls, channel_options=options, retries=False) as client,
            pytest.raises(UnavailableError),
        ):
            client.get_memory("vera", memory.id, timeout_s=5)

    with pytest.raises(ValueError, match="both"):
        tls_credentials(pki.ca.cert_file, cert_file=pki.client.cert_file)
    with pytest.raises(FileNotFoundError):
        tls_credentials(tmp_path / "missing-ca.crt")
