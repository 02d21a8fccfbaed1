"""The Python client (clients/python) against a real memsvc server, plus its retry behaviour."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status
from memsvc_client import (
    AddResult,
    AsyncMemoryClient,
    ConversationResult,
    ConversationTurn,
    DeadlineExceededError,
    Extractor,
    InvalidArgumentError,
    Memory,
    MemoryClient,
    MemoryFilter,
    MemoryKind,
    MemsvcError,
    NewMemory,
    NotFoundError,
    QueryMode,
    QueryResult,
    RetentionStatus,
    RetryPolicy,
    Role,
    Tier,
    UnauthenticatedError,
    UnavailableError,
    WriteOutcome,
)
from memsvc_client.proto import write_service_pb2

from tests.conftest import RunningServer

EVERYTHING = MemoryFilter(min_importance=0.0)
README = Path(__file__).resolve().parents[2] / "clients" / "python" / "README.md"


@pytest.fixture
def client(server: RunningServer) -> Iterator[MemoryClient]:
    with MemoryClient(server.address, server.api_key, timeout_s=30) as c:
        yield c


@pytest.mark.e2e
def test_add_then_query(client: MemoryClient) -> None:
    stored = client.add("u-query", "My dog is called Biscuit.", importance=0.9, tags=["pets"])
    client.add_memories("u-query", ["I work as a nurse in Leeds.", NewMemory("I like rainy days.", importance=0.8)])

    result = client.query("u-query", "What is my dog called?", limit=3, filter=EVERYTHING)

    assert isinstance(stored, Memory) and stored.id and stored.tags == ("pets",)
    assert isinstance(result, QueryResult)
    assert result.memories[0].memory.id == stored.id
    assert "Biscuit" in result.memories[0].memory.content
    assert 0 < result.memories[0].score <= 1
    assert result.report.mode is QueryMode.DIRECT
    assert result.report.queries[0] == "What is my dog called?"
    assert result.request_id


@pytest.mark.e2e
def test_iter_memories_follows_page_tokens(client: MemoryClient) -> None:
    facts = [
        "My dog is called Biscuit.",
        "I work as a nurse in Leeds.",
        "I am allergic to peanuts.",
        "My sister Ana lives in Porto.",
        "I play the cello on Sundays.",
        "The car needs new tyres in May.",
        "I prefer tea over coffee.",
    ]
    added = client.add_memories("u-pages", facts)

    first = client.list_memories("u-pages", page_size=3)
    seen = list(client.iter_memories("u-pages", page_size=3))

    assert len(first.memories) == 3 and first.next_page_token
    assert sorted(m.id for m in seen) == sorted(m.id for m in added.memories)
    assert len({m.id for m in seen}) == 7
    assert added.created == (True,) * 7


@pytest.mark.e2e
def test_update_changes_only_the_given_fields(client: MemoryClient) -> None:
    stored = client.add("u-update", "I live in Paris.", importance=0.7, tags=["home"])

    updated = client.update_memory("u-update", stored.id, content="I live in Lyon.", tier=Tier.WARM)

    assert updated.content == "I live in Lyon." and updated.tier is Tier.WARM
    assert updated.tags == ("home",)
    assert updated.importance == pytest.approx(0.7)
    assert client.get_memory("u-update", stored.id).content == "I live in Lyon."
    with pytest.raises(ValueError, match="at least one"):
        client.update_memory("u-update", stored.id)


@pytest.mark.e2e
def test_delete_then_get_is_not_found(client: MemoryClient) -> None:
    stored = client.add("u-delete", "The spare key is under the blue pot.")

    client.delete_memory("u-delete", stored.id)

    with pytest.raises(NotFoundError) as info:
        client.get_memory("u-delete", stored.id)
    assert info.value.code is grpc.StatusCode.NOT_FOUND
    assert isinstance(info.value, MemsvcError)


@pytest.mark.e2e
def test_forget_user_erases_everything(client: MemoryClient) -> None:
    client.add_memories("u-forget", ["My sister is called Ana.", "I am allergic to peanuts."])

    assert client.forget_user("u-forget") == 2
    assert list(client.iter_memories("u-forget")) == []


@pytest.mark.e2e
def test_empty_content_is_invalid_argument_with_field_violations(client: MemoryClient) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        client.add("u-invalid", "")

    error = info.value
    assert error.code is grpc.StatusCode.INVALID_ARGUMENT
    assert error.reason and error.domain == "memsvc.v1"
    assert [v.field for v in error.field_violations] == ["memories[0].content"]
    assert error.violation("memories[0].content") is not None
    assert "memories[0].content" in str(error)


SESSION = [
    ConversationTurn(Role.USER, "I adopted a greyhound named Pepper.", datetime(2023, 5, 8, 10, tzinfo=UTC), "Zoe"),
    ConversationTurn(
        Role.ASSISTANT, "Lovely! You should try the dog park on Elm Street.", datetime(2023, 5, 8, 10, 1, tzinfo=UTC)
    ),
]


@pytest.mark.e2e
def test_add_conversation_then_query_with_sources(client: MemoryClient) -> None:
    added = client.add_conversation("u-conv", "s1", SESSION)
    assert [t.content for t in added.turns] == [t.content for t in SESSION] and added.turns_created == (True, True)
    assert added.turns[0].speaker_name == "Zoe" and added.turns[0].kind is MemoryKind.EPISODE
    assert added.turns[0].create_time == SESSION[0].create_time and added.extractor is Extractor.RULES
    advice = next(m for m in added.extracted if m.kind is MemoryKind.RECOMMENDATION)
    assert advice.source_memory_ids == (added.turns[1].id,) and added.summary is None  # two turns: no summary yet
    again = client.add_conversation("u-conv", "s1", SESSION)  # a resent session stores nothing twice
    assert again.turns_created == (False, False) and [t.id for t in again.turns] == [t.id for t in added.turns]
    assert again.extractor is Extractor.NONE and not again.extracted

    found = client.query("u-conv", "which dog park was suggested?", include_sources=True, filter=EVERYTHING)
    hit = next(r for r in found.memories if r.memory.id == advice.id)
    assert [s.id for s in hit.sources] == [added.turns[1].id]
    assert 0 < hit.score_breakdown.relevance <= 1 and 0 <= hit.score_breakdown.term_coverage <= 1
    everything = client.query("u-conv", "what is the capital of Peru?", min_relevance=0.0, filter=EVERYTHING)
    floored = client.query("u-conv", "what is the capital of Peru?", filter=EVERYTHING)
    assert len(floored.memories) + floored.report.dropped_below_relevance == len(everything.memories)

    with pytest.raises(InvalidArgumentError) as info:
        client.add_conversation("u-conv", "s1", [ConversationTurn(Role.USER, "")], first_turn_index=2)
    assert [v.field for v in info.value.field_violations] == ["turns[0].content"]
    assert info.value.code is grpc.StatusCode.INVALID_ARGUMENT and "turns[0].content" in str(info.value)


def said_by_melanie(content: str, at: datetime | None = None) -> ConversationTurn:
    return ConversationTurn(Role.USER, content, at, "Melanie")


@pytest.mark.e2e
def test_extracted_memories_say_what_the_write_review_did(client: MemoryClient) -> None:
    first = client.add_conversation("u-review", "s1", [said_by_melanie("I love painting sunsets with my kids.")])
    [statement] = first.extracted
    assert [r.outcome for r in first.extracted_results] == [WriteOutcome.CREATED]

    again = client.add_conversation("u-review", "s2", [said_by_melanie("I love painting sunsets with my kids!")])
    [repeat] = again.extracted_results
    assert repeat.outcome is WriteOutcome.CONFIRMED_EXISTING and repeat.reason
    assert [m.id for m in again.extracted] == [statement.id]  # the earlier memory, confirmed

    may = datetime(2023, 5, 8, 10, tzinfo=UTC)
    moved = client.add_conversation("u-review", "s3", [said_by_melanie("I live in Boston with my family.", may)])
    later = client.add_conversation(
        "u-review", "s4", [said_by_melanie("I live in Denver with my family now.", may + timedelta(days=30))]
    )
    boston = moved.extracted[0].id
    assert later.extracted_results[0].superseded_ids == (boston,)
    assert client.get_memory("u-review", boston).retention_status is RetentionStatus.SUPERSEDED


@pytest.mark.e2e
def test_wrong_key_is_unauthenticated(server: RunningServer) -> None:
    with (
        MemoryClient(server.address, "msk_not_a_real_key", timeout_s=30) as client,
        pytest.raises(UnauthenticatedError) as info,
    ):
        client.query("u-auth", "anything")
    assert info.value.code is grpc.StatusCode.UNAUTHENTICATED


@pytest.mark.e2e
def test_raw_stubs_escape_hatch(client: MemoryClient) -> None:
    stored = client.add("u-raw", "The boiler was serviced in March.")

    request = write_service_pb2.GetMemoryRequest(user_id="u-raw", id=stored.id)
    response = client.write_stub.GetMemory(request, metadata=client.metadata, timeout=30)

    assert Memory.from_proto(response.memory) == client.get_memory("u-raw", stored.id)


@pytest.mark.e2e
def test_async_client(server: RunningServer) -> None:
    async def scenario() -> None:
        async with AsyncMemoryClient(server.address, server.api_key, timeout_s=30) as client:
            stored = await client.add("u-async", "My bike is a green Brompton.", importance=0.9)
            more = await client.add_memories(
                "u-async",
                ["I swim on Tuesdays.", "My flat is on the fourth floor.", "I grow tomatoes.", "I speak Welsh."],
            )
            result = await client.query("u-async", "What bike do I ride?", filter=EVERYTHING)
            listed = [m.id async for m in client.iter_memories("u-async", page_size=2)]
            updated = await client.update_memory("u-async", stored.id, tags=["bike"])
            await client.delete_memory("u-async", more.memories[0].id)
            with pytest.raises(NotFoundError):
                await client.get_memory("u-async", more.memories[0].id)
            with pytest.raises(InvalidArgumentError) as info:
                await client.add("u-async", "")
            conversation = await client.add_conversation(
                "u-async", "s1", ["I started learning the cello.", "My teacher is called Ines."]
            )
            with_sources = await client.query(
                "u-async", "Which instrument am I learning?", include_sources=True, filter=EVERYTHING
            )
            forgotten = await client.forget_user("u-async")

        assert result.memories[0].memory.id == stored.id
        assert sorted(listed) == sorted([stored.id, *(m.id for m in more.memories)])
        assert updated.tags == ("bike",)
        assert [v.field for v in info.value.field_violations] == ["memories[0].content"]
        assert [t.role for t in conversation.turns] == [Role.USER, Role.USER] and conversation.extracted
        # What is extracted from a turn is a memory of its own, never the turn confirmed again.
        assert not {m.id for m in conversation.extracted} & {t.id for t in conversation.turns}
        extracted_ids = {m.id for m in conversation.extracted}
        derived = [hit for hit in with_sources.memories if hit.memory.id in extracted_ids]
        assert derived, [hit.memory.content for hit in with_sources.memories]
        for hit in derived:  # each extracted memory comes back with the turns it names as its sources
            assert hit.sources and [s.id for s in hit.sources] == list(hit.memory.source_memory_ids)
            assert {s.id for s in hit.sources} <= {t.id for t in conversation.turns}
        assert forgotten == 4 + len(conversation.turns) + len(conversation.extracted)

    asyncio.run(scenario())


@pytest.mark.e2e
def test_from_env_reads_the_settings_the_cli_reads(
    server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("MEMSVC_ADDRESS", "MEMSVC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMSVC_DATA_DIR", str(tmp_path / "elsewhere"))
    with pytest.raises(ValueError, match="no API key: set MEMSVC_API_KEY"):
        MemoryClient.from_env()
    # A server's non-default listen address and data directory, as `memsvc serve` was given them.
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "dev-api-key").write_text(server.api_key + "\n")
    monkeypatch.setenv("MEMSVC_LISTEN", server.address)
    with MemoryClient.from_env(timeout_s=30) as client:
        stored = client.add("u-env", "I keep my passport in the blue drawer.")
        assert client.get_memory("u-env", stored.id).content == stored.content
    monkeypatch.setenv("MEMSVC_ADDRESS", "127.0.0.1:1")  # the CLI's own variable wins over the server's
    with MemoryClient.from_env(timeout_s=5, retries=False) as client, pytest.raises(UnavailableError):
        client.get_memory("u-env", stored.id)


@pytest.mark.e2e
def test_readme_example_runs(server: RunningServer, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    example = re.search(r"## Example\n.*?```python\n(.*?)```", README.read_text(), re.DOTALL)
    assert example is not None, "clients/python/README.md has no example"
    monkeypatch.setenv("MEMSVC_ADDRESS", server.address)
    monkeypatch.setenv("MEMSVC_API_KEY", server.api_key)

    exec(compile(example.group(1), str(README), "exec"), {})  # noqa: S102 - runs our own README example

    printed = capsys.readouterr().out
    assert "window seats" in printed
    assert "memories[0].content" in printed
    # The conversation's turn and the fact extracted from it (in the user's words) are one
    # result: the fact is found once, whichever of the two ranks first (the other its source).
    said = "I'm allergic to shellfish, so no oysters for me."
    assert f'["{said}"] RULES' in printed
    found = next(line for line in printed.splitlines() if line.startswith("[("))
    assert found.count(f'("{said}"') == 1, found
    assert "erased 5" in printed  # three memories, one turn, one extracted


# Retries, against a stand-in WriteService that fails a chosen number of times.

IDEMPOTENT = {
    ("memsvc.v1.QueryService", "Query"),
    ("memsvc.v1.WriteService", "GetMemory"),
    ("memsvc.v1.WriteService", "ListMemories"),
    ("memsvc.v1.WriteService", "DeleteMemory"),
    ("memsvc.v1.WriteService", "ForgetUser"),
}


def test_retry_config_present() -> None:
    client = MemoryClient("127.0.0.1:1", "key")
    try:
        options = dict(client.channel_options)
        config = json.loads(options["grpc.service_config"])
        (method_config,) = config["methodConfig"]
        names = {(n["service"], n["method"]) for n in method_config["name"]}
        policy = method_config["retryPolicy"]
    finally:
        client.close()
    assert names == IDEMPOTENT
    assert policy["retryableStatusCodes"] == ["UNAVAILABLE"]
    assert policy["maxAttempts"] == 4
    assert options["grpc.enable_retries"] == 1
    with MemoryClient("127.0.0.1:1", "key", retries=False) as plain:
        assert "grpc.service_config" not in dict(plain.channel_options)


def _unavailable(retry_delay_ms: int | None = None) -> grpc.Status:
    details = [any_pb2.Any()]
    details[0].Pack(error_details_pb2.ErrorInfo(reason="INDEX_UNAVAILABLE", domain="memsvc.v1"))
    if retry_delay_ms is not None:
        delay = duration_pb2.Duration()
        delay.FromMilliseconds(retry_delay_ms)
        details.append(any_pb2.Any())
        details[-1].Pack(error_details_pb2.RetryInfo(retry_delay=delay))
    return rpc_status.to_status(
        status_pb2.Status(code=code_pb2.UNAVAILABLE, message="try again later", details=details)
    )


class FlakyWriteService:
    """Answers every WriteService method, after failing the first `failures` calls of each."""

    def __init__(self, failures: int, retry_delay_ms: int | None = None) -> None:
        self.failures = failures
        self.retry_delay_ms = retry_delay_ms
        self.delay_s = 0.0
        self.address = ""
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def handler(self, method: str, response: Callable[[Any], Any]) -> Callable[[Any, grpc.ServicerContext], Any]:
        def handle(request: Any, context: grpc.ServicerContext) -> Any:
            with self._lock:
                self.calls[method] = self.calls.get(method, 0) + 1
                failing = self.calls[method] <= self.failures
            if failing:
                context.abort_with_status(_unavailable(self.retry_delay_ms))
            time.sleep(self.delay_s)
            return response(request)

        return handle


@pytest.fixture
def flaky() -> Iterator[tuple[FlakyWriteService, Callable[..., MemoryClient]]]:
    service = FlakyWriteService(failures=2)
    pb = write_service_pb2
    handlers = {
        "GetMemory": (pb.GetMemoryRequest, lambda r: pb.GetMemoryResponse(memory={"id": r.id, "content": "x"})),
        "UpdateMemory": (pb.UpdateMemoryRequest, lambda r: pb.UpdateMemoryResponse(memory={"id": r.id})),
        "AddMemories": (
            pb.AddMemoriesRequest,
            lambda r: pb.AddMemoriesResponse(
                memories=[{"id": f"m{i}", "content": m.content} for i, m in enumerate(r.memories)],
                created=[True] * len(r.memories),
            ),
        ),
        "AddConversation": (
            pb.AddConversationRequest,
            lambda r: pb.AddConversationResponse(
                turns=[{"id": f"t{r.first_turn_index + i}", "content": t.content} for i, t in enumerate(r.turns)],
                turn_results=[{"outcome": pb.WRITE_OUTCOME_CREATED}] * len(r.turns),
                extractor=pb.EXTRACTOR_NONE,
            ),
        ),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(
                "memsvc.v1.WriteService",
                {
                    name: grpc.unary_unary_rpc_method_handler(
                        service.handler(name, respond),
                        request_deserializer=request_type.FromString,
                        response_serializer=lambda m: m.SerializeToString(),
                    )
                    for name, (request_type, respond) in handlers.items()
                },
            )
        ]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    service.address = f"127.0.0.1:{port}"
    clients: list[MemoryClient] = []

    def make(**options: Any) -> MemoryClient:
        clients.append(MemoryClient(service.address, "key", **{"timeout_s": 10, **options}))
        return clients[-1]

    yield service, make
    for c in clients:
        c.close()
    server.stop(0)


def test_idempotent_methods_are_retried_on_unavailable(flaky: Any) -> None:
    service, make = flaky
    client = make(retries=RetryPolicy(initial_backoff_s=0.01, max_backoff_s=0.05))

    memory = client.get_memory("u", "m1")

    assert memory.id == "m1"
    assert service.calls["GetMemory"] == 3


def test_update_and_unkeyed_add_are_not_retried(flaky: Any) -> None:
    service, make = flaky
    client = make(retries=RetryPolicy(initial_backoff_s=0.01, max_backoff_s=0.05))

    with pytest.raises(UnavailableError) as info:
        client.update_memory("u", "m1", content="new")
    with pytest.raises(UnavailableError):
        client.add_memories("u", ["one", NewMemory("two", idempotency_key="k2")])

    assert service.calls == {"UpdateMemory": 1, "AddMemories": 1}
    assert info.value.reason == "INDEX_UNAVAILABLE"


def test_add_with_every_item_keyed_is_retried_honouring_retry_info(flaky: Any) -> None:
    service, make = flaky
    service.retry_delay_ms = 50
    client = make(retries=RetryPolicy(initial_backoff_s=0.01, max_backoff_s=0.05))

    result = client.add_memories("u", [NewMemory("one", idempotency_key="k1"), NewMemory("two", idempotency_key="k2")])

    assert [m.content for m in result.memories] == ["one", "two"]
    assert service.calls["AddMemories"] == 3


def test_add_conversation_is_retried_as_the_server_stores_each_turn_index_once(flaky: Any) -> None:
    service, make = flaky
    client = make(retries=RetryPolicy(initial_backoff_s=0.01, max_backoff_s=0.05))

    result = client.add_conversation(
        "u", "s1", ["Hello again.", ConversationTurn(Role.ASSISTANT, "Hi!")], first_turn_index=3
    )

    assert [(t.id, t.content) for t in result.turns] == [("t3", "Hello again."), ("t4", "Hi!")]
    assert result.turns_created == (True, True) and result.extractor is Extractor.NONE
    assert service.calls["AddConversation"] == 3


def test_retries_off_raises_first_unavailable_with_retry_delay(flaky: Any) -> None:
    service, make = flaky
    service.retry_delay_ms = 1500
    client = make(retries=False)

    with pytest.raises(UnavailableError) as info:
        client.get_memory("u", "m1")

    assert service.calls["GetMemory"] == 1
    assert info.value.retry_delay == timedelta(milliseconds=1500)


def test_async_client_retries_like_the_sync_one(flaky: Any) -> None:
    service, _ = flaky
    fast = RetryPolicy(initial_backoff_s=0.01, max_backoff_s=0.05)

    async def scenario() -> tuple[Memory, AddResult, ConversationResult]:
        async with AsyncMemoryClient(service.address, "key", retries=fast) as client:
            memory = await client.get_memory("u", "m1")
            with pytest.raises(UnavailableError):
                await client.update_memory("u", "m1", content="new")
            added = await client.add_memories("u", [NewMemory("one", idempotency_key="k1")])
            conversation = await client.add_conversation("u", "s1", ["Hello again."], first_turn_index=3)
            return memory, added, conversation

    memory, added, conversation = asyncio.run(scenario())

    assert memory.id == "m1" and added.memories[0].content == "one"
    assert [t.id for t in conversation.turns] == ["t3"]
    assert service.calls == {"GetMemory": 3, "UpdateMemory": 1, "AddMemories": 3, "AddConversation": 3}


def test_per_call_deadline(flaky: Any) -> None:
    service, make = flaky
    service.failures = 0
    service.delay_s = 1.0
    client = make(timeout_s=30)

    started = time.monotonic()
    with pytest.raises(DeadlineExceededError):
        client.get_memory("u", "m1", timeout_s=0.2)

    assert time.monotonic() - started < 0.9


def test_tls_options_build_secure_channels() -> None:
    with MemoryClient("localhost:1", "key", tls=True) as system_roots:
        assert system_roots.channel is not None
    credentials = grpc.ssl_channel_credentials()
    with MemoryClient("localhost:1", "key", tls=credentials, retries=False) as custom:
        assert custom.channel is not None
    with pytest.raises(ValueError, match="api_key"):
        MemoryClient("localhost:1", "")
