"""TLS material of memsvc's ports and of its own clients: PEM files read, checked, and re-read when they change."""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from memsvc.config import Settings
from memsvc.errors import FailedPrecondition

log = logging.getLogger(__name__)

_SPKI = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _read(path: Path, setting: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise FailedPrecondition(f"{setting}: cannot read {path}: {exc.strerror or exc}") from exc


def _certificates(pem: bytes, path: Path, setting: str) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(pem)
    except ValueError as exc:
        raise FailedPrecondition(f"{setting}: {path} holds no PEM certificate") from exc


def _private_key(pem: bytes, path: Path, setting: str) -> PrivateKeyTypes:
    try:
        return serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        # TypeError: the key is encrypted; memsvc has no passphrase to open it with.
        raise FailedPrecondition(f"{setting}: {path} holds no unencrypted PEM private key") from exc


def read_key_pair(
    cert_file: Path, cert_setting: str, key_file: Path, key_setting: str
) -> tuple[bytes, bytes, x509.Certificate]:
    """A certificate chain and its key as PEM, checked to belong together, and the leaf certificate;
    FailedPrecondition names the setting at fault."""
    chain = _read(cert_file, cert_setting)
    key_pem = _read(key_file, key_setting)
    leaf = _certificates(chain, cert_file, cert_setting)[0]
    key = _private_key(key_pem, key_file, key_setting)
    if leaf.public_key().public_bytes(*_SPKI) != key.public_key().public_bytes(*_SPKI):
        raise FailedPrecondition(f"{key_setting}: the key in {key_file} does not match the certificate in {cert_file}")
    return chain, key_pem, leaf


def read_trusted_cas(path: Path, setting: str) -> bytes:
    """PEM CA certificates, checked to be some; FailedPrecondition names the setting at fault."""
    pem = _read(path, setting)
    _certificates(pem, path, setting)
    return pem


@dataclass(frozen=True)
class ServerTlsFiles:
    """Where the server's certificate, its key and (for mutual TLS) the clients' CA are."""

    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None

    @classmethod
    def of(cls, settings: Settings) -> ServerTlsFiles | None:
        """The files the settings name; None when TLS is off. Half a configuration is refused."""
        cert, key, client_ca = settings.tls_cert_file, settings.tls_key_file, settings.tls_client_ca_file
        if cert is None and key is None:
            if client_ca is not None:
                raise FailedPrecondition(
                    "MEMSVC_TLS_CLIENT_CA_FILE: client certificates need TLS; set MEMSVC_TLS_CERT_FILE and "
                    "MEMSVC_TLS_KEY_FILE too"
                )
            return None
        if cert is None:
            raise FailedPrecondition("MEMSVC_TLS_CERT_FILE: not set, but MEMSVC_TLS_KEY_FILE is; TLS needs both")
        if key is None:
            raise FailedPrecondition("MEMSVC_TLS_KEY_FILE: not set, but MEMSVC_TLS_CERT_FILE is; TLS needs both")
        return cls(cert, key, client_ca)

    def stamp(self) -> tuple[tuple[int, int, int], ...]:
        """What changes when a file is replaced: a Kubernetes secret volume swaps a symlink, an
        editor or `cp` rewrites in place; a file that is gone stamps as zeros."""
        stamps = []
        for path in (self.cert_file, self.key_file, self.client_ca_file):
            if path is None:
                continue
            try:
                st = os.stat(path)
            except OSError:
                stamps.append((0, 0, 0))
            else:
                stamps.append((st.st_ino, st.st_mtime_ns, st.st_size))
        return tuple(stamps)


@dataclass(frozen=True)
class ServerCertificate:
    """One loaded and checked version of the server's TLS files."""

    cert_chain_pem: bytes
    key_pem: bytes
    # Mutual TLS: the CAs whose client certificates are accepted; None accepts any client.
    client_ca_pem: bytes | None
    not_after: datetime.datetime
    # The same certificate for the HTTPS ports (the MCP transport, the metrics endpoint).
    ssl_context: ssl.SSLContext


def load_server_certificate(files: ServerTlsFiles) -> ServerCertificate:
    """Read and check the files; FailedPrecondition names the setting at fault."""
    chain, key_pem, leaf = read_key_pair(files.cert_file, "MEMSVC_TLS_CERT_FILE", files.key_file, "MEMSVC_TLS_KEY_FILE")
    client_ca = (
        read_trusted_cas(files.client_ca_file, "MEMSVC_TLS_CLIENT_CA_FILE")
        if files.client_ca_file is not None
        else None
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        # From the files again (ssl takes no PEM bytes): a replacement between the two reads
        # either still matches or fails here, and a reload keeps the certificate it had.
        context.load_cert_chain(files.cert_file, files.key_file)
    except (OSError, ssl.SSLError) as exc:
        raise FailedPrecondition(f"MEMSVC_TLS_CERT_FILE: {files.cert_file} changed while it was read ({exc})") from exc
    if client_ca is not None:
        context.load_verify_locations(cadata=client_ca.decode("ascii", errors="replace"))
        context.verify_mode = ssl.CERT_REQUIRED
    return ServerCertificate(chain, key_pem, client_ca, leaf.not_valid_after_utc, context)


class CertificateSource:
    """The server's certificate, re-read when its files change, for every port that serves TLS.

    Each new connection asks for `current()` before its handshake (gRPC's certificate fetcher,
    the HTTPS ports' handshake callback), so a rotated certificate reaches new connections without
    a restart while open connections keep the one they began with. A replacement that does not
    load (a key that does not match yet, a half-written file) keeps the previous certificate and
    is logged once; the next connection tries again.
    """

    def __init__(self, files: ServerTlsFiles) -> None:
        self.files = files
        self._stamp = files.stamp()
        self._current = load_server_certificate(files)
        self._failed_stamp: tuple[tuple[int, int, int], ...] | None = None
        self._lock = threading.Lock()
        _warn_if_expired(self._current, files)
        # The HTTPS ports wrap their sockets with this context; each handshake switches to the
        # latest certificate's context (the callback runs whether or not the client sent a name).
        self.https_context = self._current.ssl_context
        self.https_context.sni_callback = self._select_context

    @property
    def requires_client_certificate(self) -> bool:
        return self.files.client_ca_file is not None

    def current(self) -> ServerCertificate:
        stamp = self.files.stamp()
        if stamp == self._stamp or stamp == self._failed_stamp:
            return self._current
        with self._lock:
            if stamp in (self._stamp, self._failed_stamp):
                return self._current
            try:
                loaded = load_server_certificate(self.files)
            except FailedPrecondition as exc:
                self._failed_stamp = stamp
                log.warning("TLS files changed but do not load; serving the previous certificate: %s", exc.message)
                return self._current
            self._current, self._stamp, self._failed_stamp = loaded, stamp, None
            log.info("TLS certificate reloaded from %s (valid until %s)", self.files.cert_file, loaded.not_after)
            _warn_if_expired(loaded, self.files)
            return loaded

    def _select_context(
        self, connection: ssl.SSLObject | ssl.SSLSocket, _name: str | None, context: ssl.SSLContext
    ) -> None:
        latest = self.current().ssl_context
        if latest is not context:
            connection.context = latest


def _warn_if_expired(certificate: ServerCertificate, files: ServerTlsFiles) -> None:
    if certificate.not_after < datetime.datetime.now(datetime.UTC):
        log.warning(
            "the TLS certificate in %s expired at %s: clients will refuse it", files.cert_file, certificate.not_after
        )


def server_certificates(settings: Settings) -> CertificateSource | None:
    """The server's certificate source when the settings turn TLS on; FailedPrecondition naming the
    setting when they are wrong, so the server never starts half secure."""
    files = ServerTlsFiles.of(settings)
    return CertificateSource(files) if files is not None else None


def describe_transport(certificates: CertificateSource | None, probe_listen: str) -> str:
    """How the gRPC port is served, for the start-up line."""
    if certificates is None:
        text = "plaintext"
    elif certificates.requires_client_certificate:
        text = "TLS, client certificates required"
    else:
        text = "TLS"
    return f"{text}; health probes in plaintext on {probe_listen}" if probe_listen else text


@dataclass(frozen=True)
class ClientTlsMaterial:
    """What a client's TLS credentials are made of, as PEM bytes."""

    root_certificates: bytes | None  # None: the system's trust store
    private_key: bytes | None
    certificate_chain: bytes | None
    server_name: str


@dataclass(frozen=True)
class ClientTls:
    """How memsvc's own clients (the CLI, `memsvc mcp`, `memsvc bench --address`) reach a TLS server."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    # The name the server's certificate must carry when it differs from the address's host
    # (a port-forward to 127.0.0.1, an address by IP).
    server_name: str = ""

    @classmethod
    def of(cls, settings: Settings) -> ClientTls | None:
        """TLS when MEMSVC_CLIENT_TLS is on or any other client TLS setting is given; None for plaintext."""
        named = (settings.client_ca_file, settings.client_cert_file, settings.client_key_file)
        if not settings.client_tls and all(f is None for f in named) and not settings.client_tls_server_name:
            return None
        return cls(*named, server_name=settings.client_tls_server_name)

    def material(self) -> ClientTlsMaterial:
        """Read and check the files; FailedPrecondition names the setting (and flag) at fault."""
        roots = read_trusted_cas(self.ca_file, "MEMSVC_CLIENT_CA_FILE (--ca-file)") if self.ca_file else None
        key = chain = None
        if (self.cert_file is None) != (self.key_file is None):
            missing = (
                "MEMSVC_CLIENT_KEY_FILE (--key-file)"
                if self.key_file is None
                else "MEMSVC_CLIENT_CERT_FILE (--cert-file)"
            )
            raise FailedPrecondition(f"{missing}: a client certificate needs both its certificate and its key")
        if self.cert_file is not None and self.key_file is not None:
            chain, key, _ = read_key_pair(
                self.cert_file,
                "MEMSVC_CLIENT_CERT_FILE (--cert-file)",
                self.key_file,
                "MEMSVC_CLIENT_KEY_FILE (--key-file)",
            )
        return ClientTlsMaterial(roots, key, chain, self.server_name)


def add_client_tls_arguments(parser: argparse.ArgumentParser) -> None:
    """The command-line flags of a client's TLS; each overrides its MEMSVC_CLIENT_* setting."""
    parser.add_argument(
        "--tls", action="store_true", default=None, help="reach the server over TLS (MEMSVC_CLIENT_TLS)"
    )
    parser.add_argument(
        "--ca-file", type=Path, help="the CA of the server's certificate; implies --tls (MEMSVC_CLIENT_CA_FILE)"
    )
    parser.add_argument(
        "--cert-file", type=Path, help="a client certificate for mutual TLS; implies --tls (MEMSVC_CLIENT_CERT_FILE)"
    )
    parser.add_argument("--key-file", type=Path, help="the client certificate's key (MEMSVC_CLIENT_KEY_FILE)")
    parser.add_argument(
        "--tls-server-name",
        help="the name in the server's certificate, when the address does not carry it; implies --tls "
        "(MEMSVC_CLIENT_TLS_SERVER_NAME)",
    )


def client_tls_of(args: argparse.Namespace, settings: Settings) -> ClientTls | None:
    """The client's TLS: the command line's flags over the settings; None for plaintext."""
    flags = {
        "client_tls": args.tls,
        "client_ca_file": args.ca_file,
        "client_cert_file": args.cert_file,
        "client_key_file": args.key_file,
        "client_tls_server_name": args.tls_server_name,
    }
    return ClientTls.of(settings.model_copy(update={k: v for k, v in flags.items() if v is not None}))
