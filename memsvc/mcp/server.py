"""`memsvc mcp`: remember, recall, forget, list and history as MCP tools, over stdio or streamable HTTP.

The server holds no memory and makes no decision of its own: each tool call is one gRPC call to
a running memsvc with the caller's API key, so the tenant, project and environment come from the
key exactly as for any gRPC client (no tool argument can name them), and authentication,
validation, rate limits and spans are the gRPC server's. On stdio the key is the one the server
was started with; over HTTP it is the `Authorization: Bearer` header of each request.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import Annotated, Any, Literal, TypeVar

import anyio
from google.protobuf import timestamp_pb2
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import AwareDatetime, BaseModel, Field, ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from memsvc import __version__
from memsvc.mcp.gateway import CallFailed, MemoryGateway, NewTurn
from memsvc.tls import CertificateSource, ClientTls
from memsvc.v1 import memory_pb2, query_service_pb2, write_service_pb2

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Long-term memory of the people you talk with. Call `recall` with the user's message before "
    "answering to get what you know about them; call `remember` with what they told you (a fact, "
    "a preference, a decision) or with the turns of the conversation. Every tool names the user "
    "by `user_id`; which organisation's memories you reach is fixed by the API key."
)

Kind = Literal["fact", "preference", "episode", "decision", "summary", "recommendation", "commitment", "instruction"]
Speaker = Literal["user", "assistant", "system"]
Mode = Literal["direct", "multi_query", "fusion", "applicability", "agent", "auto"]

UserId = Annotated[
    str,
    Field(
        description="The end user whose memories these are (1 to 128 printable characters). The organisation, "
        "project and environment are not arguments: they come from the API key."
    ),
]
MemoryId = Annotated[str, Field(description="The id of a memory (32 lowercase hex digits), as recall or list return.")]


class Turn(BaseModel):
    """One turn of a conversation to remember."""

    role: Speaker = Field(default="user", description="Who spoke.")
    content: str = Field(description="What was said, 1 to 16,384 characters.")
    name: str = Field(default="", description="The speaker's name, when known (at most 128 characters).")
    time: AwareDatetime | None = Field(
        default=None, description="When it was said (RFC 3339 with a zone); the time of the call when absent."
    )


class MemoryView(BaseModel):
    """A stored memory as the tools show it."""

    id: str
    content: str
    kind: str
    role: str
    created: str = Field(description="When the memory was created, RFC 3339.")
    session_id: str = ""
    speaker: str = Field(default="", description="The speaker's name of a conversation turn.")
    tags: list[str] = Field(default_factory=list)


StoredAs = Literal["memory", "turn", "extracted", "summary"]


class StoredMemory(MemoryView):
    stored_as: StoredAs = Field(
        description="memory: stored as given; turn: a conversation turn kept as evidence; extracted: stated by "
        "the turns; summary: the session's summary."
    )
    outcome: str = Field(
        description="created, idempotent_replay (stored by an earlier call) or confirmed_existing (repeats a memory "
        "the user already had, which is returned)."
    )
    reason: str = ""


class Remembered(BaseModel):
    memories: list[StoredMemory]
    extractor: str = Field(
        default="", description="What decided the extracted memories of a conversation (llm or rules)."
    )


class RecalledMemory(MemoryView):
    score: float = Field(description="The ranking score, in [0, 1].")
    relevance: float = Field(description="How well the memory matches the query on its own, in [0, 1].")
    outdated: bool = Field(description="A later memory replaced what this one states (history, not the present).")


class Recollection(BaseModel):
    context: str = Field(description="The memories as a block ready to put into a prompt, best first.")
    memories: list[RecalledMemory]
    mode: str = Field(description="The retrieval mode that ran.")
    request_id: str


class Listing(BaseModel):
    memories: list[MemoryView]
    next_page_token: str = Field(description="Pass as page_token for the next page; empty on the last page.")


class Forgotten(BaseModel):
    id: str
    forgotten: bool


class Version(BaseModel):
    version: int
    change: str
    created: str
    actor: str = Field(description="The API key id that made the change, or system:... for the service itself.")
    changed_fields: list[str]
    description: str
    content: str


class History(BaseModel):
    memory_id: str
    versions: list[Version] = Field(description="Oldest first.")
    next_page_token: str


def _enum_name(enum: Any, value: int, prefix: str) -> str:
    """`MEMORY_KIND_PREFERENCE` -> `preference`; the number itself for a value newer than these stubs."""
    try:
        return str(enum.Name(value)).removeprefix(prefix).lower()
    except ValueError:
        return str(value)


def _rfc3339(stamp: timestamp_pb2.Timestamp) -> str:
    return stamp.ToDatetime(tzinfo=UTC).isoformat() if stamp.seconds or stamp.nanos else ""


def _view_fields(m: memory_pb2.Memory) -> dict[str, Any]:
    return {
        "id": m.id,
        "content": m.content,
        "kind": _enum_name(memory_pb2.MemoryKind, m.kind, "MEMORY_KIND_"),
        "role": _enum_name(memory_pb2.Role, m.role, "ROLE_"),
        "created": _rfc3339(m.create_time),
        "session_id": m.session_id,
        "speaker": m.speaker_name,
        "tags": list(m.tags),
    }


def _stored(
    m: memory_pb2.Memory, stored_as: StoredAs, result: write_service_pb2.AddMemoryResult | None
) -> StoredMemory:
    outcome = _enum_name(write_service_pb2.WriteOutcome, result.outcome, "WRITE_OUTCOME_") if result else "created"
    return StoredMemory(**_view_fields(m), stored_as=stored_as, outcome=outcome, reason=result.reason if result else "")


# How the request fields of each RPC are named as tool arguments, for the error a tool reports.
ArgumentNames = Sequence[tuple[str, str]]
_MEMORY_ARGUMENTS: ArgumentNames = (("memories[0]", ""),)
_MEMORY_ID_ARGUMENT: ArgumentNames = (("id", "memory_id"),)


def argument_name(field: str, renames: ArgumentNames) -> str:
    """The tool argument a request field path stands for: `memories[0].content` -> `content`."""
    for prefix, argument in renames:
        if field == prefix:
            return argument or field
        rest = field.removeprefix(prefix)
        if rest != field and rest[:1] in (".", "["):
            return argument + rest if argument else rest.lstrip(".")
    return field


def tool_error(failure: CallFailed, address: str, renames: ArgumentNames = ()) -> ToolError:
    """A failed RPC as the tool error a model reads: each invalid argument by name, else the status."""
    if failure.violations:
        problems = "; ".join(f"{argument_name(v.field, renames)}: {v.description}" for v in failure.violations)
        return ToolError(f"invalid argument: {problems}")
    text = f"{failure.code}: {failure.message}"
    if failure.code == "UNAVAILABLE":
        text = f"memsvc at {address} is unavailable ({failure.message})"
    if failure.retry_after_s is not None:
        text += f" (retry after {failure.retry_after_s:g} s)"
    return ToolError(text)


def schema_problems(error: ValidationError) -> str:
    """Arguments that failed a tool's input schema, in the words the gRPC server uses for its own
    checks (`limit: must be at least 1`), so a model reads every invalid argument the same way."""
    problems = []
    for problem in error.errors():
        field = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in problem["loc"]).lstrip(".")
        problems.append(f"{field}: {_why(problem['type'], problem['msg'], problem.get('ctx') or {})}")
    return "; ".join(problems)


def _why(kind: str, message: str, ctx: Mapping[str, Any]) -> str:
    bounds = {"greater_than_equal": "at least", "less_than_equal": "at most", "greater_than": "more than"}
    if kind in bounds:
        return f"must be {bounds[kind]} {next(iter(ctx.values()))}"
    if kind == "less_than":
        return f"must be less than {next(iter(ctx.values()))}"
    if kind == "missing":
        return "is required"
    if kind == "literal_error":
        choices = str(ctx.get("expected", "")).replace("' or '", ", ").replace("', '", ", ").strip("'")
        return f"must be one of {choices}"
    return message.replace("Input should be", "must be", 1).removeprefix("Value error, ")


class MemoryToolServer(MCPServer[Any]):
    """The SDK's server, whose schema errors read as the gRPC server's: `invalid argument: <field>: <why>`."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            raise ToolError(f"invalid argument: {schema_problems(cause)}") from cause


ApiKeyOf = Callable[[Context], str]
Reply = TypeVar("Reply")


def fixed_api_key(api_key: str) -> ApiKeyOf:
    """Every call runs under the key the server was started with (stdio: one client, one key)."""
    return lambda _ctx: api_key


def bearer_token(headers: Mapping[str, str] | None) -> str:
    """The key of an `Authorization: Bearer <key>` header; empty when there is none."""
    value = (headers or {}).get("authorization", "")
    scheme, _, token = value.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def request_api_key(ctx: Context) -> str:
    """Every call runs under the key of its own HTTP request; nothing falls back to another key."""
    token = bearer_token(ctx.headers)
    if not token:
        raise ToolError("no API key: send it as 'Authorization: Bearer <key>'")
    return token


@dataclass(frozen=True)
class Tools:
    """The tool functions of one server: a gateway to memsvc and where each call's key comes from."""

    gateway: MemoryGateway
    api_key_of: ApiKeyOf

    async def _run(self, ctx: Context, call: Callable[[str], Awaitable[Reply]], renames: ArgumentNames = ()) -> Reply:
        try:
            return await call(self.api_key_of(ctx))
        except CallFailed as failure:
            raise tool_error(failure, self.gateway.address, renames) from failure

    async def remember(
        self,
        ctx: Context,
        user_id: UserId,
        content: Annotated[
            str | None, Field(description="One memory to store (1 to 32,768 characters). Give this or turns.")
        ] = None,
        turns: Annotated[
            list[Turn] | None,
            Field(
                description="New turns of a conversation, oldest first (1 to 256), with session_id: memsvc keeps "
                "each turn and remembers the facts, preferences, decisions and recommendations they state. "
                "Give this or content."
            ),
        ] = None,
        session_id: Annotated[
            str,
            Field(description="The conversation session (up to 128 of [A-Za-z0-9_.:/-]); required with turns."),
        ] = "",
        first_turn_index: Annotated[
            int, Field(ge=0, description="With turns: the index in the session of the first turn given.")
        ] = 0,
        kind: Annotated[
            Kind | None,
            Field(description="With content: what sort of knowledge it is; classified from its words when absent."),
        ] = None,
        tags: Annotated[list[str] | None, Field(description="With content: labels for filtering.")] = None,
        importance: Annotated[
            float | None, Field(description="With content: how much it matters, in [0, 1]; estimated when absent.")
        ] = None,
    ) -> Remembered:
        """Remember something about a user: one memory (content), or the new turns of a conversation (turns)."""
        if (content is None) == (turns is None):
            raise ToolError("invalid argument: content, turns: give exactly one of them")
        # Arguments of the other form would be dropped without a word; the caller should know.
        if turns is not None:
            given = (("kind", kind), ("tags", tags), ("importance", importance))
            misplaced = [name for name, value in given if value is not None]
        else:
            misplaced = ["first_turn_index"] if first_turn_index else []
        if misplaced:
            form = "content" if turns is not None else "turns"
            raise ToolError(f"invalid argument: {', '.join(misplaced)}: only apply with {form}")
        if turns is not None:
            new_turns = [NewTurn(f"ROLE_{t.role.upper()}", t.content, t.name, _stamp(t)) for t in turns]
            conversation: write_service_pb2.AddConversationResponse = await self._run(
                ctx,
                lambda key: self.gateway.add_conversation(key, user_id, session_id, new_turns, first_turn_index),
            )
            stored = [
                _stored(m, "turn", r) for m, r in zip(conversation.turns, conversation.turn_results, strict=False)
            ]
            stored += [
                _stored(m, "extracted", r)
                for m, r in zip(conversation.extracted, conversation.extracted_results, strict=False)
            ]
            if conversation.HasField("summary"):
                stored.append(_stored(conversation.summary, "summary", None))
            extractor = _enum_name(write_service_pb2.Extractor, conversation.extractor, "EXTRACTOR_")
            return Remembered(memories=stored, extractor=extractor)
        added: write_service_pb2.AddMemoriesResponse = await self._run(
            ctx,
            lambda key: self.gateway.add_memory(
                key,
                user_id,
                content or "",
                f"MEMORY_KIND_{kind.upper()}" if kind else "MEMORY_KIND_UNSPECIFIED",
                tags or [],
                session_id,
                importance,
            ),
            _MEMORY_ARGUMENTS,
        )
        return Remembered(
            memories=[_stored(m, "memory", r) for m, r in zip(added.memories, added.results, strict=False)]
        )

    async def recall(
        self,
        ctx: Context,
        user_id: UserId,
        query: Annotated[str, Field(description="What to recall memories for, usually the user's latest message.")],
        mode: Annotated[
            Mode,
            Field(
                description="direct: one ranked search (fast); multi_query and fusion: also search generated "
                "variations; applicability: a context block scored for what applies now; agent: multi-hop "
                "questions; auto: the server picks."
            ),
        ] = "direct",
        limit: Annotated[int, Field(ge=1, description="How many memories at most (the server allows up to 100).")] = 10,
    ) -> Annotated[CallToolResult, Recollection]:
        """Recall what is known about a user that matters for a query: a context block, best first."""
        response: query_service_pb2.QueryResponse = await self._run(
            ctx, lambda key: self.gateway.query(key, user_id, query, f"QUERY_MODE_{mode.upper()}", limit)
        )
        recollection = Recollection(
            context=response.context,
            memories=[
                RecalledMemory(
                    **_view_fields(r.memory),
                    score=r.score,
                    relevance=r.score_breakdown.relevance,
                    outdated=r.memory.outdated,
                )
                for r in response.memories
            ],
            mode=_enum_name(query_service_pb2.QueryMode, response.report.mode, "QUERY_MODE_"),
            request_id=response.request_id,
        )
        text = recollection.context or f"No memories of {user_id} match this query."
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=recollection.model_dump(mode="json")
        )

    async def forget(self, ctx: Context, user_id: UserId, memory_id: MemoryId) -> Forgotten:
        """Forget one memory of a user: its record, its vector and every cached result naming it."""
        await self._run(ctx, lambda key: self.gateway.delete(key, user_id, memory_id), _MEMORY_ID_ARGUMENT)
        return Forgotten(id=memory_id, forgotten=True)

    async def list_memories(
        self,
        ctx: Context,
        user_id: UserId,
        page_size: Annotated[
            int, Field(ge=1, description="How many memories per page (the server allows up to 500).")
        ] = 50,
        page_token: Annotated[str, Field(description="The next_page_token of the previous page.")] = "",
    ) -> Listing:
        """List a user's memories, newest first, a page at a time."""
        listed: write_service_pb2.ListMemoriesResponse = await self._run(
            ctx, lambda key: self.gateway.list_memories(key, user_id, page_size, page_token)
        )
        return Listing(
            memories=[MemoryView(**_view_fields(m)) for m in listed.memories], next_page_token=listed.next_page_token
        )

    async def history(
        self,
        ctx: Context,
        user_id: UserId,
        memory_id: MemoryId,
        page_size: Annotated[int, Field(ge=1, description="How many versions per page (up to 500).")] = 50,
        page_token: Annotated[str, Field(description="The next_page_token of the previous page.")] = "",
    ) -> History:
        """The versions of one memory, oldest first: who changed it, when, what, and its content after each change."""
        found: write_service_pb2.GetMemoryHistoryResponse = await self._run(
            ctx,
            lambda key: self.gateway.history(key, user_id, memory_id, page_size, page_token),
            _MEMORY_ID_ARGUMENT,
        )
        return History(
            memory_id=memory_id,
            versions=[
                Version(
                    version=v.version,
                    change=_enum_name(memory_pb2.MemoryChange, v.change, "MEMORY_CHANGE_"),
                    created=_rfc3339(v.create_time),
                    actor=v.actor,
                    changed_fields=list(v.changed_fields),
                    description=v.description,
                    content=v.content,
                )
                for v in found.versions
            ],
            next_page_token=found.next_page_token,
        )


def _stamp(turn: Turn) -> timestamp_pb2.Timestamp | None:
    if turn.time is None:
        return None
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(turn.time)
    return stamp


def build_server(gateway: MemoryGateway, api_key_of: ApiKeyOf) -> MCPServer:
    """The MCP server with the five memory tools."""
    server = MemoryToolServer("memsvc", version=__version__, instructions=INSTRUCTIONS)
    tools = Tools(gateway, api_key_of)
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    server.add_tool(tools.remember, name="remember", annotations=ToolAnnotations(destructive_hint=False))
    server.add_tool(tools.recall, name="recall", annotations=read_only)
    server.add_tool(tools.forget, name="forget", annotations=ToolAnnotations(destructive_hint=True))
    server.add_tool(tools.list_memories, name="list", annotations=read_only)
    server.add_tool(tools.history, name="history", annotations=read_only)
    return server


class RequireApiKey:
    """ASGI middleware: an HTTP request without `Authorization: Bearer <key>` is answered 401.

    Whether the key is valid is the gRPC server's to say, on the tool call that uses it.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            if not bearer_token(headers):
                body = b'{"error": "missing API key: send it as Authorization: Bearer <key>"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer realm="memsvc"'),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def http_app(server: MCPServer, host: str, path: str = "/mcp") -> ASGIApp:
    """The streamable HTTP app behind the key check. Stateless: a request carries everything it needs
    (its key included), so no session outlives it and any replica can answer it."""
    return RequireApiKey(server.streamable_http_app(streamable_http_path=path, stateless_http=True, host=host))


@dataclass(frozen=True)
class McpOptions:
    address: str
    transport: Literal["stdio", "http"]
    api_key: str = ""  # stdio only; HTTP takes each request's header
    host: str = "127.0.0.1"
    port: int = 8765
    timeout_s: float = 30.0
    tls: ClientTls | None = None  # how to reach memsvc; None: plaintext
    https: CertificateSource | None = None  # http only: serve HTTPS with this certificate


async def serve(options: McpOptions) -> None:
    """Serve until stdin closes (stdio) or the process is told to stop (http)."""
    import uvicorn

    gateway = MemoryGateway(options.address, options.timeout_s, options.tls)
    gateway.open()
    try:
        if options.transport == "stdio":
            await build_server(gateway, fixed_api_key(options.api_key)).run_stdio_async()
            return
        app = http_app(build_server(gateway, request_api_key), options.host)
        https = options.https
        log.info(
            "memsvc MCP server on %s://%s:%d/mcp, calling memsvc at %s",
            "https" if https else "http",
            options.host,
            options.port,
            options.address,
        )
        config = uvicorn.Config(
            app,
            host=options.host,
            port=options.port,
            log_level="warning",
            # The context that follows certificate rotation, built from the same files as the gRPC port's.
            ssl_context_factory=(lambda _config, _default: https.https_context) if https else None,
        )
        await uvicorn.Server(config).serve()
    finally:
        await gateway.close()


def run(options: McpOptions) -> None:
    anyio.run(serve, options)
