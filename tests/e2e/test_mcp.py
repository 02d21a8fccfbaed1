"""`memsvc mcp` driven by the MCP SDK's own client, over stdio and streamable HTTP, against a live server."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from tests.e2e.processes import free_port, stop_process, wait_for_port
from tests.live_server import LiveServer, log_tail, memsvc_executable

pytestmark = pytest.mark.e2e

TOOLS = {"remember", "recall", "forget", "list", "history"}


def unique_user(name: str) -> str:
    """A user id no other test of the shared server uses."""
    return f"mcp-{name}-{uuid.uuid4().hex[:8]}"


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool call that must succeed; its structured result."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool}{arguments}: {text_of(result)}"
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def tool_error(client: Client, tool: str, **arguments: Any) -> str:
    """A tool call that must fail as a tool error (not a protocol error); its text."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool}{arguments} succeeded: {result.structured_content}"
    return text_of(result)


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    anyio.run(scenario)


def http_client(api_key: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(headers={"Authorization": f"Bearer {api_key}"}, timeout=120)


async def remember_recall_and_isolation(client: Client) -> None:
    """The tools as an assistant uses them, for two users of one key."""
    tools = await client.list_tools()
    assert {tool.name for tool in tools.tools} == TOOLS
    for tool in tools.tools:
        # Scope comes from the key alone: no tool can be asked for another tenant, project or environment.
        assert not {"tenant", "project", "environment"} & set(tool.input_schema.get("properties", {}))
        assert "user_id" in tool.input_schema["required"]

    alice, bob = unique_user("alice"), unique_user("bob")
    conversation = await call(
        client,
        "remember",
        user_id=alice,
        session_id="trip-1",
        turns=[
            {"role": "user", "name": "Alice", "content": "I adopted a greyhound named Pepper."},
            {"role": "assistant", "content": "Lovely! You should try the dog park on Elm Street."},
        ],
    )
    turns = [m for m in conversation["memories"] if m["stored_as"] == "turn"]
    assert [t["content"] for t in turns] == [
        "I adopted a greyhound named Pepper.",
        "Lovely! You should try the dog park on Elm Street.",
    ]
    assert turns[0]["speaker"] == "Alice" and turns[1]["role"] == "assistant"
    assert any(m["stored_as"] == "extracted" for m in conversation["memories"])

    stored = await call(
        client, "remember", user_id=alice, content="I prefer window seats when I fly", kind="preference"
    )
    seat = stored["memories"][0]
    assert seat["stored_as"] == "memory" and seat["kind"] == "preference" and seat["outcome"] == "created"
    await call(client, "remember", user_id=bob, content="I prefer aisle seats when I fly", kind="preference")

    recalled = await client.call_tool("recall", {"user_id": alice, "query": "which seat do I like on planes?"})
    assert not recalled.is_error, text_of(recalled)
    block = text_of(recalled)
    assert block.startswith("Relevant memories") and "I prefer window seats when I fly" in block
    assert "aisle" not in block  # Bob's memory never reaches Alice's recall
    assert recalled.structured_content is not None
    assert seat["id"] in [m["id"] for m in recalled.structured_content["memories"]]
    assert recalled.structured_content["context"] == block

    dog = await call(client, "recall", user_id=alice, query="what is my dog called?", mode="fusion", limit=3)
    assert dog["mode"] == "fusion" and len(dog["memories"]) <= 3
    assert "Pepper" in dog["context"]

    bobs = await call(client, "recall", user_id=bob, query="which seat do I like on planes?")
    assert [m["content"] for m in bobs["memories"]] == ["I prefer aisle seats when I fly"]

    # How the user wants to be answered comes with every recall, whatever it is about.
    await call(client, "remember", user_id=bob, content="Please always answer in German.")
    contract = await call(client, "recall", user_id=bob, query="what is my dog called?")
    assert contract["context"].startswith("How the user wants you to behave:")
    assert "answer in German" in contract["context"]

    listed = await call(client, "list", user_id=alice, page_size=100)
    assert seat["id"] in [m["id"] for m in listed["memories"]]
    assert "I prefer aisle seats when I fly" not in [m["content"] for m in listed["memories"]]
    history = await call(client, "history", user_id=alice, memory_id=seat["id"])
    assert [v["change"] for v in history["versions"]] == ["create"]

    # Another user's id is just another user: Bob cannot forget Alice's memory by naming its id.
    assert "NOT_FOUND" in await tool_error(client, "forget", user_id=bob, memory_id=seat["id"])
    assert (await call(client, "forget", user_id=alice, memory_id=seat["id"]))["forgotten"] is True
    after = await call(client, "recall", user_id=alice, query="which seat do I like on planes?")
    assert seat["id"] not in [m["id"] for m in after["memories"]]
    # What is left of a forgotten memory is the content-free record that it was deleted.
    erased = await call(client, "history", user_id=alice, memory_id=seat["id"])
    assert [(v["change"], v["content"]) for v in erased["versions"]] == [("delete", "")]


async def bad_arguments_name_the_field(client: Client) -> None:
    user = unique_user("carol")
    # Checked by the gRPC server (google.rpc.BadRequest), reported under the tool's argument names:
    # AddMemories' `memories[0].content` is the tool's `content`, GetMemoryHistory's `id` its `memory_id`.
    blank = await tool_error(client, "remember", user_id=user, content="  ")
    assert "invalid argument: content: must not be empty" in blank and "memories[0]" not in blank
    assert "invalid argument: limit: must be within 1..100" in await tool_error(
        client, "recall", user_id=user, query="anything", limit=1000
    )
    assert "invalid argument: user_id:" in await tool_error(client, "recall", user_id="", query="anything")
    assert "invalid argument: memory_id:" in await tool_error(client, "history", user_id=user, memory_id="not-an-id")
    assert "invalid argument: turns[0].content:" in await tool_error(
        client, "remember", user_id=user, session_id="s", turns=[{"content": ""}]
    )
    # Checked by the tool's own input schema before any call, and said the same way.
    low = await tool_error(client, "recall", user_id=user, query="anything", limit=0)
    assert low == "invalid argument: limit: must be at least 1", low
    mode = await tool_error(client, "recall", user_id=user, query="anything", mode="fastest")
    assert mode == "invalid argument: mode: must be one of direct, multi_query, fusion, applicability, agent, auto"
    missing = await tool_error(client, "remember", user_id=user, session_id="s", turns=[{"role": "robot"}])
    assert missing.startswith("invalid argument: turns[0].role: must be one of user, assistant, system; "), missing
    assert "turns[0].content: is required" in missing and "pydantic" not in missing
    both = await tool_error(client, "remember", user_id=user, content="x", turns=[{"content": "y"}])
    assert "invalid argument: content, turns:" in both
    misplaced = await tool_error(client, "remember", user_id=user, session_id="s", turns=[{"content": "y"}], tags=["a"])
    assert "invalid argument: tags: only apply with content" in misplaced
    # Nothing of the rejected calls was stored.
    assert (await call(client, "list", user_id=user))["memories"] == []


def test_stdio_remember_recall_isolation_and_errors(live_server: LiveServer, tmp_path: Path) -> None:
    server = StdioServerParameters(
        command=memsvc_executable(),
        args=["mcp", "--address", live_server.address],
        env={"MEMSVC_API_KEY": live_server.api_key},
        cwd=tmp_path,
    )

    async def scenario() -> None:
        async with Client(server, read_timeout_seconds=120) as client:
            await remember_recall_and_isolation(client)
            await bad_arguments_name_the_field(client)

    run(scenario)


@pytest.fixture(scope="module")
def mcp_http(live_server: LiveServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`memsvc mcp --transport http` on a free port; its endpoint URL."""
    workdir = tmp_path_factory.mktemp("mcp-http")
    port = free_port()
    log = workdir / "mcp.log"
    # No MEMSVC_API_KEY: over HTTP only each request's header may name the key.
    env = {k: v for k, v in live_server.env().items() if k != "MEMSVC_API_KEY"}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                memsvc_executable(),
                "mcp",
                "--transport",
                "http",
                "--port",
                str(port),
                "--address",
                live_server.address,
            ],
            env=env,
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_port(port, 60, process, log)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(process)
        print(log_tail(log))


def test_http_remember_recall_isolation_and_errors(live_server: LiveServer, mcp_http: str) -> None:
    async def scenario() -> None:
        async with (
            http_client(live_server.api_key) as http,
            Client(streamable_http_client(mcp_http, http_client=http), read_timeout_seconds=120) as client,
        ):
            await remember_recall_and_isolation(client)
            await bad_arguments_name_the_field(client)

    run(scenario)


def test_http_without_a_key_is_401_and_each_request_uses_its_own_key(live_server: LiveServer, mcp_http: str) -> None:
    created = subprocess.run(
        [memsvc_executable(), "keys", "create", "--tenant", f"other-{uuid.uuid4().hex[:6]}"],
        env=live_server.env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert created.returncode == 0, created.stderr
    other_tenant_key = created.stdout.splitlines()[0]
    user = unique_user("dave")

    async def scenario() -> None:
        async with httpx2.AsyncClient(timeout=30) as anonymous:
            initialize = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            answer = await anonymous.post(mcp_http, json=initialize)
            assert answer.status_code == 401
            assert answer.headers["www-authenticate"].startswith("Bearer")
            wrong = await anonymous.post(mcp_http, json=initialize, headers={"Authorization": "Basic abc"})
            assert wrong.status_code == 401

        async with (
            http_client(live_server.api_key) as http,
            Client(streamable_http_client(mcp_http, http_client=http), read_timeout_seconds=120) as client,
        ):
            await call(client, "remember", user_id=user, content="Dave keeps bees on his roof")
            found = await call(client, "recall", user_id=user, query="what does dave keep on the roof?")
            assert "bees" in found["context"]

        # The same user id under another tenant's key is another user: nothing of Dave is there.
        async with (
            http_client(other_tenant_key) as http,
            Client(streamable_http_client(mcp_http, http_client=http), read_timeout_seconds=120) as client,
        ):
            elsewhere = await call(client, "recall", user_id=user, query="what does dave keep on the roof?")
            assert elsewhere["memories"] == [] and "bees" not in elsewhere["context"]
            assert (await call(client, "list", user_id=user))["memories"] == []

        async with (
            http_client("not-a-key") as http,
            Client(streamable_http_client(mcp_http, http_client=http), read_timeout_seconds=120) as client,
        ):
            assert "UNAUTHENTICATED" in await tool_error(client, "recall", user_id=user, query="bees")

    run(scenario)
