"""The README as a newcomer follows it: `make run`, then every command of the tour, as written.

The server runs as `make run` runs it (`.venv/bin/memsvc serve` in the checkout), in a directory
that holds only the checkout's `.venv`, so `.memsvc/dev-api-key` and the files the tour writes
land there. It listens on a free port instead of 127.0.0.1:50051, which another server on the
machine may hold: the test rewrites that address in the blocks and points the CLI at the port
with MEMSVC_ADDRESS, its own variable. grpcurl is not packaged for Debian or Ubuntu, and the Go
module proxy is out of reach here; without it on PATH a stand-in hands grpcurl's arguments to
`buf curl` (the same method, metadata and JSON), so the lines are checked all the same.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.processes import free_port
from tests.live_server import ROOT, STARTUP_TIMEOUT_S

pytestmark = pytest.mark.e2e

README = ROOT / "README.md"
DEFAULT_ADDRESS = "127.0.0.1:50051"
# Blocks outside the tour start something long-running, each driven by tests of its own.
LONG_RUNNING = re.compile(r"^(make (run|test)\b|\.venv/bin/memsvc bench )")


def blocks(markdown: str, language: str) -> list[tuple[str, str]]:
    """(section heading, code) of every fenced block in `language`, in order."""
    found, section = [], ""
    for match in re.finditer(rf"^## ([^\n]+)$|^```{language}\n(.*?)^```$", markdown, re.MULTILINE | re.DOTALL):
        if match.group(1) is not None:
            section = match.group(1)
        else:
            found.append((section, match.group(2)))
    return found


def clean_environment(**extra: str) -> dict[str, str]:
    """A new shell's environment: none of the test session's MEMSVC_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSVC_")}
    return {**env, **extra}


@dataclass
class Started:
    process: subprocess.Popen[str]
    output: list[str]
    address: str

    def wait_for(self, text: str) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        assert self.process.stdout is not None
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                pytest.fail(f"memsvc exited before printing {text!r}:\n{''.join(self.output)}")
            self.output.append(line)
            if text in line:
                return
        pytest.fail(f"memsvc did not print {text!r} within {STARTUP_TIMEOUT_S:.0f} s:\n{''.join(self.output)}")

    def stop(self) -> str:
        """SIGTERM, then everything it printed."""
        self.process.send_signal(signal.SIGTERM)
        rest, _ = self.process.communicate(timeout=60)
        self.output.append(rest)
        return "".join(self.output)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A directory laid out as a clone after `make run`: its `.venv`, nothing else yet."""
    here = tmp_path / "memsvc"
    here.mkdir()
    (here / ".venv").symlink_to(ROOT / ".venv")
    return here


@contextmanager
def make_run(checkout: Path, **settings: str) -> Iterator[Started]:
    """`make run`'s server in `checkout`, on a free port; stopped (killed if need be) on leaving."""
    port = free_port()
    env = clean_environment(MEMSVC_LISTEN=f"127.0.0.1:{port}", **settings)
    process = subprocess.Popen(
        [".venv/bin/memsvc", "serve"],
        cwd=checkout,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    started = Started(process, [], f"127.0.0.1:{port}")
    try:
        started.wait_for("serving on")
        yield started
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)


@pytest.fixture
def grpcurl_on_path(tmp_path: Path) -> str:
    """PATH with grpcurl on it: the real one, or a stand-in that asks `buf curl` the same call."""
    if shutil.which("grpcurl"):
        return os.environ["PATH"]
    buf = json.loads((ROOT / "package.json").read_text())["devDependencies"]["@bufbuild/buf"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "grpcurl"
    stand_in.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "args, options = sys.argv[1:], []\n"
        "while args[0].startswith('-'):\n"
        "    flag = args.pop(0)\n"
        "    if flag in ('-H', '-d'):\n"
        "        options += [flag, args.pop(0)]\n"
        "    elif flag != '-plaintext':\n"
        "        sys.exit(f'the grpcurl stand-in does not know {flag}')\n"
        "address, method = args\n"
        f"command = ['npx', '--yes', '@bufbuild/buf@{buf}', 'curl', '--protocol', 'grpc', '--http2-prior-knowledge']\n"
        "os.execvp('npx', [*command, *options, f'http://{address}/{method}'])\n"
    )
    stand_in.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


def run_shell(script: str, cwd: Path, env: dict[str, str]) -> str:
    """What `script` prints on stdout, run as a new shell would run it; it must succeed."""
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, f"exit {result.returncode}:\n{script}\n---\n{result.stdout}\n{result.stderr}"
    return result.stdout


def send_goaway_with_an_error(address: str) -> None:
    """What a client dropping its connection may send: HTTP/2 GOAWAY with error code 2."""
    host, port = address.rsplit(":", 1)

    def frame(kind: int, payload: bytes = b"") -> bytes:
        return struct.pack(">I", len(payload))[1:] + bytes([kind, 0]) + struct.pack(">I", 0) + payload

    with socket.create_connection((host, int(port))) as connection:
        connection.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4) + frame(7, struct.pack(">II", 0, 2)))
        time.sleep(0.5)


def test_first_start_says_what_matters_and_its_try_it_lines_work_in_a_new_shell(
    checkout: Path, tmp_path: Path, grpcurl_on_path: str
) -> None:
    # Not the defaults: the printed lines must carry the address and where the key is.
    data_dir = tmp_path / "elsewhere" / "data"
    fresh_model_cache = tmp_path / "onnx"
    settings = {"MEMSVC_DATA_DIR": str(data_dir), "MEMSVC_EMBEDDING_ONNX_DIR": str(fresh_model_cache)}
    with make_run(checkout, **settings) as started:
        try_it = "".join(started.output).split("Try it in another shell, in ", 1)[1].splitlines()
        assert Path(try_it[0].rstrip(":")) == checkout
        lines = [line.strip() for line in try_it[1:] if line.startswith("    ")]
        add, query = (line for line in lines if ".venv/bin/memsvc" in line)
        assert add.startswith(f"MEMSVC_ADDRESS={started.address} MEMSVC_DATA_DIR={data_dir} .venv/bin/memsvc add ")
        grpcurl = " ".join(line.removesuffix("\\").strip() for line in lines[2:])
        assert grpcurl.startswith("grpcurl ") and started.address in grpcurl
        env = clean_environment(PATH=grpcurl_on_path)
        assert "I prefer window seats on long flights" in run_shell(add, checkout, env)
        found = json.loads(run_shell(query, checkout, env))
        assert found["memories"][0]["memory"]["content"] == "I prefer window seats on long flights"
        assert "I prefer window seats on long flights" in run_shell(grpcurl, checkout, env)
        send_goaway_with_an_error(started.address)
        printed = started.stop()
    # The first start: the model's one-time preparation, the key and its lines, then "serving
    # on"; no library's progress or warnings, and gRPC's C core quiet about a client's GOAWAY.
    assert list(fresh_model_cache.glob("*.onnx")), "the first start prepared the model into the cache"
    logged = [line for line in printed.splitlines() if re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", line)]
    assert all(" memsvc." in line for line in logged), "\n".join(logged)
    assert any("preparing the embedding model" in line for line in logged), printed
    assert not re.search(r"(?i)warning:|deprecat|goaway|it/s\]|^[IWE]\d{4} ", printed, re.MULTILINE), printed
    assert printed.count("serving on") == 1, printed


def test_every_command_of_the_readme_works_as_written(checkout: Path, grpcurl_on_path: str) -> None:
    # `shell` blocks need files the reader supplies (the TLS certificates): tests/e2e/
    # test_tls_clients.py runs the same commands with certificates it makes.
    readme = README.read_text(encoding="utf-8")
    shell = blocks(readme, "sh")
    tour = [code for section, code in shell if section == "A tour"]
    assert len(tour) >= 4, "README.md has a tour"
    for section, code in shell:
        if section != "A tour":
            commands = [line for line in code.splitlines() if line and not line.startswith((" ", "#"))]
            assert all(LONG_RUNNING.match(line) for line in commands), f"{section}: {code}"
    (python,) = (code for _, code in blocks(readme, "python"))

    with make_run(checkout) as started:
        env = clean_environment(PATH=grpcurl_on_path, MEMSVC_ADDRESS=started.address)
        said = run_shell("\n".join(tour).replace(DEFAULT_ADDRESS, started.address), checkout, env)
        listed = run_shell(".venv/bin/memsvc list --user alice", checkout, env)
        client = subprocess.run(
            [".venv/bin/python", "-"], input=python, cwd=checkout, env=env, capture_output=True, text=True, timeout=300
        )
        started.stop()
    assert "Luna and Oliver" in said  # the cats' names, found by the conversation's query
    # Written from a file and from standard input, exported, erased and imported again.
    assert "the grey scarf" in listed and "a table seat facing forward" in listed
    assert client.returncode == 0, client.stderr
    assert "I prefer window seats on long flights" in client.stdout
