"""Isolation as a property: whatever tenants, users, tags, sessions, filters and query strings
hypothesis invents, no call returns a memory outside the caller's namespace and no error names
another tenant's data. Many namespaces share ONE server, under both vector placements."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsvc.domain.models import Permission
from memsvc.v1 import memory_pb2, query_service_pb2, write_service_pb2
from tests.conftest import RunningServer, ServerFactory
from tests.milvus_server import MilvusServer
from tests.security.support import Failure, failure_of

pytestmark = pytest.mark.e2e

# Fragments that mean something to Milvus expressions, SQL, JSON or terminals.
HOSTILE = [
    '"',
    "'",
    "\\",
    '\\"',
    '" or "1"=="1',
    "' or '1'='1",
    '") or ("1"=="1',
    " || ",
    " or ",
    " and ",
    " not ",
    " in ",
    " like ",
    "%",
    "_",
    "*",
    'ns != ""',
    'id != ""',
    "ARRAY_CONTAINS_ANY(tags, [",
    "]",
    ")",
    "[",
    "\x1f",
    "\x00",
    "\n",
    "ß漢字🙂",
    "\u202e",
    "​",
    ";--",
    "$1",
    "{}",
]
NAME = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,12}", fullmatch=True)
TAG = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.:/-]{0,10}", fullmatch=True)
SESSION = st.from_regex(r"[A-Za-z0-9_.:/-]{1,12}", fullmatch=True)
HOSTILE_TEXT = st.lists(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=8)), min_size=1, max_size=6).map("".join)
USER = st.one_of(
    NAME,
    HOSTILE_TEXT.map(lambda t: f"u{t}x"),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40),
    st.sampled_from(["alice", 'alice" or "1"=="1', "alice\\", "ALICE", "alice ", "a" * 128, "a" * 129]),
)
QUERY = st.one_of(
    HOSTILE_TEXT,
    st.text(min_size=1, max_size=60),
    st.sampled_from(["bees", "what do I keep?", "x" * 4096, "y" * 5000, " ", ""]),
)


@dataclass(frozen=True)
class Scenario:
    caller: tuple[str, str, str]  # tenant, project, user
    other: tuple[str, str, str]
    tags: tuple[str, ...]
    session: str
    query: str
    filter_tags: tuple[str, ...]
    filter_session: str
    tier: int
    include_inactive: bool
    metadata_key: str


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    tenant = draw(st.one_of(st.sampled_from(["acme", "globex"]), NAME))
    project = draw(st.sampled_from(["default", "default", "other"]))
    user = draw(USER)
    # The other namespace differs in exactly one part, which is where isolation bugs hide.
    which = draw(st.sampled_from(["tenant", "project", "user"]))
    other_tenant = draw(NAME.filter(lambda t: t != tenant)) if which == "tenant" else tenant
    other_project = ("default" if project != "default" else "other") if which == "project" else project
    other_user = draw(USER.filter(lambda u: u != user)) if which == "user" else user
    tags = tuple(draw(st.lists(TAG, max_size=3)))
    session = draw(SESSION)
    # Filters: the written values (so something matches), hostile ones, or nothing.
    filter_tags = tuple(draw(st.lists(st.one_of(st.sampled_from(tags or ("t",)), HOSTILE_TEXT, TAG), max_size=3)))
    filter_session = draw(st.one_of(st.just(""), st.just(session), HOSTILE_TEXT))
    return Scenario(
        caller=(tenant, project, user),
        other=(other_tenant, other_project, other_user),
        tags=tags,
        session=session,
        query=draw(QUERY),
        filter_tags=filter_tags,
        filter_session=filter_session,
        tier=draw(st.sampled_from([0, 0, 1, 2, 3, 99])),
        include_inactive=draw(st.booleans()),
        metadata_key=draw(st.one_of(st.just(""), HOSTILE_TEXT)),
    )


@dataclass
class World:
    """Everything written into the one shared server, by namespace."""

    server: RunningServer
    keys: dict[tuple[str, str], str] = field(default_factory=dict)
    ids: dict[tuple[str, str, str], set[str]] = field(default_factory=dict)
    markers: dict[tuple[str, str, str], str] = field(default_factory=dict)
    calls: int = 0
    refused: int = 0
    returned: int = 0

    def key(self, tenant: str, project: str) -> str:
        if (tenant, project) not in self.keys:
            self.keys[tenant, project] = self.server.create_key(
                tenant=tenant, project=project, permissions=frozenset({Permission.WRITE})
            )
        return self.keys[tenant, project]

    def write(self, ns: tuple[str, str, str], sc: Scenario) -> None:
        marker = self.markers.setdefault(ns, f"mk{secrets.token_hex(5)}")
        request = write_service_pb2.AddMemoriesRequest(
            user_id=ns[2],
            memories=[
                write_service_pb2.NewMemory(
                    content=f"{marker} keeps bees and {word}", tags=list(sc.tags), session_id=sc.session
                )
                for word in ("honey", "wax")
            ],
        )
        try:
            response = self.server.writes.AddMemories(request, metadata=self.server.auth(self.key(*ns[:2])), timeout=60)
        except grpc.RpcError as error:
            failure = failure_of(error)
            assert failure.code == grpc.StatusCode.INVALID_ARGUMENT, failure
            return
        self.ids.setdefault(ns, set()).update(m.id for m in response.memories)

    def foreign(self, ns: tuple[str, str, str]) -> tuple[set[str], set[str], set[str]]:
        """Ids, markers and user ids of every namespace but `ns` (user ids long enough to be telling)."""
        others = [n for n in self.ids if n != ns]
        return (
            {i for n in others for i in self.ids[n]},
            {self.markers[n] for n in others},
            {n[2] for n in others if len(n[2]) >= 12 and n[2] != ns[2]},
        )

    def check_failure(self, ns: tuple[str, str, str], failure: Failure, what: str) -> None:
        assert failure.code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND), (what, failure)
        text = "\n".join(failure.texts)
        ids, markers, users = self.foreign(ns)
        for secret in (*ids, *markers, *users):
            assert secret not in text, f"{what}: an error names another namespace's data: {failure}"
        self.refused += 1

    def check_memories(self, ns: tuple[str, str, str], memories: list[Any], what: str) -> None:
        own = self.ids.get(ns, set())
        marker = self.markers.get(ns, "\x00")
        self.returned += len(memories)
        for m in memories:
            assert m.id in own, f"{what} returned {m.id}, not a memory of {ns}"
            assert m.user_id == ns[2] and m.content.startswith(marker), (what, m)

    def check(self, sc: Scenario) -> None:
        self.write(sc.caller, sc)
        self.write(sc.other, sc)
        ns = sc.caller
        md = self.server.auth(self.key(*ns[:2]))
        metadata = struct_pb2.Struct()
        if sc.metadata_key:
            metadata.update({sc.metadata_key: sc.query[:20]})
        memory_filter = memory_pb2.MemoryFilter(
            min_importance=0.0,
            tags_any=list(sc.filter_tags),
            session_id=sc.filter_session,
            tier=sc.tier,  # type: ignore[arg-type]
            include_inactive=sc.include_inactive,
            metadata=metadata,
        )
        for mode in (query_service_pb2.QUERY_MODE_DIRECT, query_service_pb2.QUERY_MODE_AUTO):
            request = query_service_pb2.QueryRequest(
                user_id=ns[2], query=sc.query, filter=memory_filter, mode=mode, skip_cache=True
            )
            self.calls += 1
            try:
                found = self.server.queries.Query(request, metadata=md, timeout=60)
            except grpc.RpcError as error:
                self.check_failure(ns, failure_of(error), "Query")
                continue
            self.check_memories(ns, [r.memory for r in found.memories], "Query")
            # The index itself stays in the namespace: hydration drops foreign ids too (a second
            # line of defence), so count what recall handed over, not only what came back.
            own = len(self.ids.get(ns, ()))
            assert found.report.candidates_recalled <= own * max(1, found.report.searches), (
                f"recall returned {found.report.candidates_recalled} candidates in {found.report.searches} searches "
                f"for a namespace of {own} memories"
            )
        listing = write_service_pb2.ListMemoriesRequest(user_id=ns[2], filter=memory_filter)
        self.calls += 1
        try:
            listed = self.server.writes.ListMemories(listing, metadata=md, timeout=60)
            self.check_memories(ns, list(listed.memories), "ListMemories")
        except grpc.RpcError as error:
            self.check_failure(ns, failure_of(error), "ListMemories")
        # Someone else's memory id, asked for by the caller under its own or the other's user id.
        for foreign_id in sorted(self.ids.get(sc.other, set()))[:1]:
            for user in {ns[2], sc.other[2]}:
                self.calls += 1
                try:
                    got = self.server.writes.GetMemory(
                        write_service_pb2.GetMemoryRequest(user_id=user, id=foreign_id), metadata=md, timeout=30
                    )
                except grpc.RpcError as error:
                    self.check_failure(ns, failure_of(error), "GetMemory")
                    continue
                # Only possible when the "other" namespace is the caller's own (same tenant, project, user).
                assert (ns[0], ns[1], user) == sc.other, f"GetMemory leaked {got.memory.id}"


PLACEMENTS = ["partition", "partition_key"]
# As many as on Milvus Lite: each example costs the server about a third of a second.
SERVER_EXAMPLES = 20


def _run(server_factory: ServerFactory, placement: str, examples: int, **overrides: object) -> None:
    world = World(server_factory(vector_placement=placement, **overrides))

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(scenarios())
    def property_holds(sc: Scenario) -> None:
        world.check(sc)

    property_holds()
    assert len(world.ids) >= 2, "too few namespaces were written to prove anything"
    assert world.calls > examples and world.returned > 0, (world.calls, world.returned)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_no_query_crosses_namespaces(server_factory: ServerFactory, placement: str) -> None:
    _run(server_factory, placement, examples=20)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_no_query_crosses_namespaces_on_a_milvus_server(
    server_factory: ServerFactory, milvus_server: MilvusServer, placement: str
) -> None:
    """The C++ server: its own filter parser, partition-key routing and HNSW index (not FLAT)."""
    _run(server_factory, placement, examples=SERVER_EXAMPLES, milvus_uri=milvus_server.uri)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("placement", PLACEMENTS)
def test_no_query_crosses_namespaces_at_length(server_factory: ServerFactory, placement: str) -> None:
    _run(server_factory, placement, examples=400)
