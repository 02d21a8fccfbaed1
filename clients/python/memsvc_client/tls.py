"""TLS credentials for a memsvc server from PEM files: a private CA and a client certificate."""

from __future__ import annotations

import os
from pathlib import Path

import grpc

PathLike = str | os.PathLike[str]


def tls_credentials(
    ca_file: PathLike | None = None, cert_file: PathLike | None = None, key_file: PathLike | None = None
) -> grpc.ChannelCredentials:
    """Credentials to pass as ``tls=``: the server's certificate is verified against ``ca_file``
    (the system's trust store when None); ``cert_file`` and ``key_file``, given together, are this
    client's certificate for a server that requires one (mutual TLS). The files are read now, so a
    missing one raises ``OSError`` here rather than failing every call."""
    if (cert_file is None) != (key_file is None):
        raise ValueError("a client certificate needs both cert_file and key_file")
    return grpc.ssl_channel_credentials(
        root_certificates=Path(ca_file).read_bytes() if ca_file is not None else None,
        private_key=Path(key_file).read_bytes() if key_file is not None else None,
        certificate_chain=Path(cert_file).read_bytes() if cert_file is not None else None,
    )
