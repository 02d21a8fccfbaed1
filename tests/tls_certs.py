"""Certificates for TLS tests, made with `cryptography`: CAs, server and client certificates as PEM files."""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# What a server certificate for a test server on this machine names.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost")


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _alt_names(hosts: tuple[str, ...]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


@dataclass(frozen=True)
class Issued:
    """A certificate and its key, written as PEM files."""

    cert_file: Path
    key_file: Path
    certificate: x509.Certificate

    @property
    def cert_pem(self) -> bytes:
        return self.cert_file.read_bytes()

    @property
    def key_pem(self) -> bytes:
        return self.key_file.read_bytes()

    @property
    def der(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.DER)


class CertificateAuthority:
    """A self-signed CA that issues server and client certificates into a directory."""

    def __init__(self, directory: Path, name: str) -> None:
        self.directory = directory
        self.name = name
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = _now()
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(_name(name))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        directory.mkdir(parents=True, exist_ok=True)
        self.cert_file = directory / f"{name}.crt"
        self.cert_file.write_bytes(self.certificate.public_bytes(serialization.Encoding.PEM))

    @property
    def cert_pem(self) -> bytes:
        return self.cert_file.read_bytes()

    def issue(
        self,
        file_stem: str,
        *,
        hosts: tuple[str, ...] = LOOPBACK_HOSTS,
        client: bool = False,
        expired: bool = False,
    ) -> Issued:
        """A leaf certificate: for a server (`hosts` in its subject alternative names) or a client."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = _now()
        not_before, not_after = (
            (now - datetime.timedelta(days=10), now - datetime.timedelta(days=1))
            if expired
            else (now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=7))
        )
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(file_stem if client else hosts[0]))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False)
        )
        if not client:
            builder = builder.add_extension(x509.SubjectAlternativeName(_alt_names(hosts)), critical=False)
        certificate = builder.sign(self._key, hashes.SHA256())
        cert_file = self.directory / f"{file_stem}.crt"
        key_file = self.directory / f"{file_stem}.key"
        cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(_key_pem(key))
        key_file.chmod(0o600)
        return Issued(cert_file, key_file, certificate)


@dataclass(frozen=True)
class TrustBundle:
    """Several CAs' certificates in one PEM file, as a client that trusts each of them holds them."""

    cert_file: Path

    @classmethod
    def of(cls, path: Path, *cas: CertificateAuthority) -> TrustBundle:
        path.write_bytes(b"".join(ca.cert_pem for ca in cas))
        return cls(path)

    @property
    def cert_pem(self) -> bytes:
        return self.cert_file.read_bytes()


Trusted = CertificateAuthority | TrustBundle


@dataclass(frozen=True)
class Pki:
    """Everything a TLS test needs: the trusted CA and another, and their certificates."""

    directory: Path
    ca: CertificateAuthority
    other_ca: CertificateAuthority
    server: Issued
    client: Issued
    other_client: Issued

    @classmethod
    def make(cls, directory: Path) -> Pki:
        ca = CertificateAuthority(directory, "test-ca")
        other = CertificateAuthority(directory, "other-ca")
        return cls(
            directory=directory,
            ca=ca,
            other_ca=other,
            server=ca.issue("server"),
            client=ca.issue("client", client=True),
            other_client=other.issue("other-client", client=True),
        )


def grpc_credentials(ca: Trusted, client: Issued | None = None) -> grpc.ChannelCredentials:
    """Channel credentials that trust `ca`, presenting `client`'s certificate when given."""
    return grpc.ssl_channel_credentials(
        root_certificates=ca.cert_pem,
        private_key=client.key_pem if client else None,
        certificate_chain=client.cert_pem if client else None,
    )


def client_ssl_context(ca: Trusted, client: Issued | None = None) -> ssl.SSLContext:
    """A Python TLS client context that trusts `ca`, presenting `client`'s certificate when given."""
    context = ssl.create_default_context(cafile=str(ca.cert_file))
    if client is not None:
        context.load_cert_chain(client.cert_file, client.key_file)
    return context


def served_certificate(port: int, client: Issued | None = None, alpn: str = "h2") -> bytes:
    """The DER certificate a TLS server on 127.0.0.1:`port` presents to a new connection (not
    verified: the caller compares it), presenting `client`'s certificate when given."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols([alpn])
    if client is not None:
        context.load_cert_chain(client.cert_file, client.key_file)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


def install(issued: Issued, cert_file: Path, key_file: Path) -> None:
    """Replace the served files with `issued`'s, each by an atomic rename (a new inode), as a
    Kubernetes secret volume or cert-manager does."""
    for source, target in ((issued.cert_file, cert_file), (issued.key_file, key_file)):
        staged = target.with_name(target.name + ".new")
        shutil.copyfile(source, staged)
        os.replace(staged, target)


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """The session's CAs and certificates; tests issue more into its directory, each under a name of its own."""
    return Pki.make(tmp_path_factory.mktemp("pki"))
