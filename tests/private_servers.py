"""Private PostgreSQL and Redis servers that speak only TLS, started by a test with its own certificates.

The machine's shared PostgreSQL and Redis are left as they are (CI reuses them as left); these run
from the same Debian binaries on free ports, in directories of their own, and are stopped after.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.tls_certs import CertificateAuthority, Issued

# PostgreSQL refuses to run as root; as root the test runs it as the Debian package's user.
POSTGRES_USER = "postgres"
# The server also listens here; its certificate does not name it, so verify-full must refuse it.
UNNAMED_LOOPBACK = "127.0.0.2"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def postgres_bin() -> Path | None:
    """The newest /usr/lib/postgresql/<version>/bin holding initdb and pg_ctl, if any."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    return found[-1].parent if found else None


@dataclass(frozen=True)
class PrivatePostgres:
    """A PostgreSQL cluster that accepts TLS connections only (`hostssl` alone in pg_hba.conf)."""

    port: int
    ca: CertificateAuthority

    def url(self, host: str = "127.0.0.1", sslmode: str = "verify-full", ca_file: Path | None = None) -> str:
        root = ca_file or self.ca.cert_file
        return f"postgresql://postgres@{host}:{self.port}/postgres?sslmode={sslmode}&sslrootcert={root}"


def _as_postgres(args: list[str], log: Path | None = None) -> None:
    """Run a PostgreSQL tool as its own user when we are root (initdb and postgres refuse root)."""
    command = ["runuser", "-u", POSTGRES_USER, "--", *args] if os.geteuid() == 0 else args
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0:
        tail = log.read_text()[-3000:] if log is not None and log.exists() else ""
        raise RuntimeError(f"{' '.join(args)} failed ({result.returncode}):\n{result.stderr}\n{tail}")


@contextlib.contextmanager
def private_postgres(ca: CertificateAuthority, server: Issued) -> Iterator[PrivatePostgres]:
    """initdb, configure TLS with `server`'s certificate, start on a free port; stop and remove after."""
    binaries = postgres_bin()
    if binaries is None:
        pytest.skip("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin (Debian package postgresql)")
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam(POSTGRES_USER)
        except KeyError:
            pytest.skip(f"running as root and there is no {POSTGRES_USER} user to run PostgreSQL as")
    # Not under pytest's temporary directory: its root-only parent would lock the postgres user out.
    root = Path(tempfile.mkdtemp(prefix="memsvc-pg-tls-"))
    data, log = root / "data", root / "postgres.log"
    try:
        for source, name in ((server.cert_file, "server.crt"), (server.key_file, "server.key")):
            shutil.copyfile(source, root / name)
        (root / "server.key").chmod(0o600)
        if os.geteuid() == 0:
            for path in (root, root / "server.crt", root / "server.key"):
                os.chown(path, owner.pw_uid, owner.pw_gid)
        _as_postgres([str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"])
        port = free_port()
        with (data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"listen_addresses = '127.0.0.1,{UNNAMED_LOOPBACK}'\nport = {port}\n"
                f"unix_socket_directories = '{root}'\nssl = on\n"
                f"ssl_cert_file = '{root / 'server.crt'}'\nssl_key_file = '{root / 'server.key'}'\n"
                "fsync = off\n"
            )
        # TLS or nothing: a plaintext TCP connection finds no pg_hba.conf line and is refused.
        (data / "pg_hba.conf").write_text("local all all trust\nhostssl all all 127.0.0.0/8 trust\n")
        _as_postgres([str(binaries / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60", "start"], log)
        try:
            yield PrivatePostgres(port, ca)
        finally:
            _as_postgres([str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"], log)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@dataclass(frozen=True)
class PrivateRedis:
    """A Redis that listens on a TLS port only and requires client certificates signed by `ca`."""

    port: int
    ca: CertificateAuthority


@contextlib.contextmanager
def private_redis(ca: CertificateAuthority, server: Issued, directory: Path) -> Iterator[PrivateRedis]:
    executable = shutil.which("redis-server")
    if executable is None:
        pytest.skip("redis-server is not installed (Debian package redis-server)")
    port = free_port()
    log = directory / "redis.log"
    args = [executable, "--port", "0", "--tls-port", str(port), "--bind", f"127.0.0.1 {UNNAMED_LOOPBACK}"]
    args += ["--tls-cert-file", str(server.cert_file), "--tls-key-file", str(server.key_file)]
    args += ["--tls-ca-cert-file", str(ca.cert_file), "--tls-auth-clients", "yes"]
    args += ["--save", "", "--appendonly", "no", "--dir", str(directory), "--logfile", str(log)]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                stderr = process.stderr.read().decode() if process.stderr else ""
                text = f"{stderr}\n{log.read_text() if log.exists() else ''}"
                if "tls" in text.lower() and "support" in text.lower():
                    pytest.skip(f"this redis-server was built without TLS: {text.strip()}")
                raise RuntimeError(f"redis-server exited with {process.returncode}:\n{text}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not listen on {port}:\n{log.read_text()}")
            time.sleep(0.05)
        yield PrivateRedis(port, ca)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        if process.stderr is not None:
            process.stderr.close()
