"""gRPC credentials from memsvc's TLS material: the server's rotating certificate, the clients' channels."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import grpc

from memsvc.tls import CertificateSource, ClientTls, ServerCertificate


def _configuration(certificate: ServerCertificate) -> grpc.ServerCertificateConfiguration:
    return grpc.ssl_server_certificate_configuration(
        [(certificate.key_pem, certificate.cert_chain_pem)], root_certificates=certificate.client_ca_pem
    )


class _CertificateFetcher:
    """gRPC calls this before every new connection's handshake: a new configuration when the
    certificate changed since it last answered, else None (keep the one in use)."""

    def __init__(self, source: CertificateSource) -> None:
        self._source = source
        self._served = source.current()
        self._lock = threading.Lock()

    def initial(self) -> grpc.ServerCertificateConfiguration:
        return _configuration(self._served)

    def __call__(self) -> grpc.ServerCertificateConfiguration | None:
        latest = self._source.current()
        with self._lock:
            if latest is self._served:
                return None
            self._served = latest
        return _configuration(latest)


def server_credentials(source: CertificateSource) -> grpc.ServerCredentials:
    """TLS credentials that follow the source's certificate (dynamic server credentials); with a
    client CA, a client without a certificate signed by it is refused at the handshake."""
    fetcher = _CertificateFetcher(source)
    return grpc.dynamic_ssl_server_credentials(
        fetcher.initial(), fetcher, require_client_authentication=source.requires_client_certificate
    )


def channel_credentials(tls: ClientTls) -> tuple[grpc.ChannelCredentials, list[tuple[str, Any]]]:
    """The credentials of a TLS channel, and the options it needs (a server name override)."""
    material = tls.material()
    credentials = grpc.ssl_channel_credentials(
        root_certificates=material.root_certificates,
        private_key=material.private_key,
        certificate_chain=material.certificate_chain,
    )
    options = [("grpc.ssl_target_name_override", material.server_name)] if material.server_name else []
    return credentials, options


def open_channel(address: str, tls: ClientTls | None, options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel:
    """A channel to memsvc: TLS when `tls` is given, plaintext otherwise."""
    if tls is None:
        return grpc.insecure_channel(address, options=list(options))
    credentials, tls_options = channel_credentials(tls)
    return grpc.secure_channel(address, credentials, options=[*options, *tls_options])


def open_aio_channel(address: str, tls: ClientTls | None, options: Sequence[tuple[str, Any]] = ()) -> grpc.aio.Channel:
    """The asyncio form of `open_channel`."""
    if tls is None:
        return grpc.aio.insecure_channel(address, options=list(options))
    credentials, tls_options = channel_credentials(tls)
    return grpc.aio.secure_channel(address, credentials, options=[*options, *tls_options])
