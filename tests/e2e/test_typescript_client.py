"""The TypeScript client (clients/typescript) against the real server: `npm test` from Node."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.live_server import ROOT, STARTUP_TIMEOUT_S, LiveServer, log_tail

CLIENT_DIR = ROOT / "clients" / "typescript"
NPM_TEST_TIMEOUT_S = 300.0

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(STARTUP_TIMEOUT_S + NPM_TEST_TIMEOUT_S + 120)
def test_typescript_client_against_live_server(live_server: LiveServer) -> None:
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: install Node.js 20+ and npm to test the TS client")
    subprocess.run([str(ROOT / "tools" / "ensure_node_modules.sh")], cwd=ROOT, check=True)
    env = {
        **os.environ,
        "MEMSVC_ADDRESS": live_server.address,
        "MEMSVC_API_KEY": live_server.api_key,
    }
    result = subprocess.run(
        ["npm", "test"],
        cwd=CLIENT_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=NPM_TEST_TIMEOUT_S,
        check=False,
    )
    output = f"{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, f"npm test failed:\n{output}\nserver log:\n{log_tail(live_server.log_path)}"
    # The live tests skip themselves without an address; here they must have run.
    assert "# SKIP" not in output, f"the Node e2e tests were skipped:\n{output}"
    assert "adds memories for a fresh user" in output, output
    assert "ok 2 - a conversation's turns are kept" in output, output
    assert "ok 4 - a turn with no content is a typed INVALID_ARGUMENT" in output, output
