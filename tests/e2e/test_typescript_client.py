"""The TypeScript client (clients/typescript) against the real server: `npm test` from Node."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.live_server import ROOT, STARTUP_TIMEOUT_S, LiveServer, log_tail

CLIENT_DIR = ROOT / "clients" / "typescript"
NPM_TEST_TIMEOUT_S = 300.0

pytestmark = pytest.mark.e2e


def npm(server: LiveServer, *args: str, cwd: Path = CLIENT_DIR) -> str:
    """`npm args` against `server` (its address and key in the environment, as a user sets them); its output."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: install Node.js 20+ and npm to test the TS client")
    subprocess.run([str(ROOT / "tools" / "ensure_node_modules.sh")], cwd=ROOT, check=True)
    env = {**os.environ, "MEMSVC_ADDRESS": server.address, "MEMSVC_API_KEY": server.api_key}
    result = subprocess.run(
        ["npm", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=NPM_TEST_TIMEOUT_S, check=False
    )
    output = f"{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, f"npm {' '.join(args)} failed:\n{output}\nserver log:\n{log_tail(server.log_path)}"
    return output


@pytest.mark.timeout(STARTUP_TIMEOUT_S + NPM_TEST_TIMEOUT_S + 120)
def test_typescript_client_against_live_server(live_server: LiveServer) -> None:
    output = npm(live_server, "test")
    # The live tests skip themselves without an address; here they must have run.
    assert "# SKIP" not in output, f"the Node e2e tests were skipped:\n{output}"
    assert "adds memories for a fresh user" in output, output
    assert "ok 2 - a conversation's turns are kept" in output, output
    assert "ok 4 - a turn with no content is a typed INVALID_ARGUMENT" in output, output


@pytest.mark.timeout(STARTUP_TIMEOUT_S + NPM_TEST_TIMEOUT_S + 120)
def test_the_readme_example_compiles_as_written_and_runs(live_server: LiveServer) -> None:
    example = (CLIENT_DIR / "examples" / "quickstart.ts").read_text(encoding="utf-8")
    readme = (CLIENT_DIR / "README.md").read_text(encoding="utf-8")
    assert f"```ts\n{example}```" in readme, "clients/typescript/README.md quotes examples/quickstart.ts verbatim"
    # As the README runs it: from the repository root, the key in the environment.
    output = npm(live_server, "run", "example", "--workspace", "clients/typescript", cwd=ROOT)
    version = subprocess.run(["npx", "tsc", "--version"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert version.stdout == "Version 5.9.3\n", "the repository's one TypeScript"
    assert 'extracted: [ "I\'m allergic to shellfish, so no oysters for me." ] RULES' in output, output
    assert "invalid: [ 'memories[0].content: must not be empty' ]" in output, output
    assert "erased 3 memories" in output, output
