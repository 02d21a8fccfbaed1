"""The Go client (clients/go/memsvc) against the real server: `go test` with Debian's Go toolchain."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.live_server import ROOT, STARTUP_TIMEOUT_S, LiveServer, log_tail

BUILD_SCRIPT = ROOT / "tools" / "build_go_client.sh"
# A cold build cache compiles grpc and protobuf first (about 30 s on two cores).
GO_TEST_TIMEOUT_S = 300.0
# tools/build_go_client.sh exits with this when Go or Debian's Go sources are missing.
TOOLCHAIN_MISSING = 3
LIVE_SUBTESTS = (
    "add_then_query,_get_and_list_find_the_memory",
    "another_user's_query_does_not_see_the_memory",
    "an_empty_content_is_a_typed_InvalidArgument_naming_the_field",
    "an_empty_user_id_is_a_typed_InvalidArgument_naming_user_id",
    "a_conversation's_turn_is_stored_as_evidence",
    "a_deleted_memory_is_NotFound",
    "an_unknown_API_key_is_Unauthenticated",
    "the_default_deadline_applies_to_a_call_without_one",
)

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(STARTUP_TIMEOUT_S + GO_TEST_TIMEOUT_S + 120)
def test_go_client_against_live_server(live_server: LiveServer) -> None:
    env = {
        **os.environ,
        "MEMSVC_ADDRESS": live_server.address,
        "MEMSVC_API_KEY": live_server.api_key,
    }
    result = subprocess.run(
        [str(BUILD_SCRIPT), "-v", "-run", "TestLiveServer"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=GO_TEST_TIMEOUT_S,
        check=False,
    )
    if result.returncode == TOOLCHAIN_MISSING:
        pytest.skip(result.stderr.strip().splitlines()[-1])
    output = f"{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, f"go test failed:\n{output}\nserver log:\n{log_tail(live_server.log_path)}"
    # The live test skips itself without an address; here it must have run, every part of it.
    assert "--- PASS: TestLiveServer" in output, f"the Go live test did not pass:\n{output}"
    for subtest in LIVE_SUBTESTS:
        assert f"--- PASS: TestLiveServer/{subtest}" in output, f"subtest {subtest} did not pass:\n{output}"
