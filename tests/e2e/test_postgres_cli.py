"""Operating on PostgreSQL from the command line: migrate, the start-up schema check, outages."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.backends import fresh_schema
from tests.e2e.processes import BIN, memsvc, replica_env

pytestmark = pytest.mark.e2e


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "memsvc"), *args], env={**os.environ, **env}, cwd=cwd, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow  # three CLI processes: about half a minute on a busy machine
def test_serve_refuses_an_unmigrated_schema_and_migrate_is_idempotent(tmp_path: Path) -> None:
    with fresh_schema() as url:
        env = replica_env(record_store_url=url, milvus_uri="", MEMSVC_LISTEN="127.0.0.1:0")
        refused = run(["serve"], env, tmp_path)
        assert refused.returncode == 1
        assert "schema migrations pending" in refused.stderr and "memsvc migrate" in refused.stderr
        assert "Traceback" not in refused.stderr
        assert "applied migrations" in memsvc(["migrate"], env, tmp_path)
        assert "schema is up to date" in memsvc(["migrate"], env, tmp_path)


def test_an_unreachable_database_is_reported_plainly(tmp_path: Path) -> None:
    env = replica_env(
        record_store_url="postgresql://postgres@127.0.0.1:1/test",
        milvus_uri="",
        MEMSVC_RECORD_STORE_TIMEOUT_S="1",
    )
    done = run(["migrate"], env, tmp_path)
    assert done.returncode == 1
    assert "error: the record store is unavailable" in done.stderr
    assert "Traceback" not in done.stderr
