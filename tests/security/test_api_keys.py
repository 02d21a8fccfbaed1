"""API keys over gRPC: hashed with a pepper, constant-time checked, scoped, revocable, expiring."""

from __future__ import annotations

import hashlib
import hmac
import sqlite3
import time
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from memsvc.domain.models import Permission
from memsvc.v1 import query_service_pb2, write_service_pb2
from tests.conftest import RunningServer, ServerFactory
from tests.security.support import add, everything, expect_failure, get

pytestmark = pytest.mark.e2e

READ = frozenset({Permission.READ})
WRITE = frozenset({Permission.WRITE})
ADMIN = frozenset({Permission.ADMIN})
ABSENT_ID = "0" * 32


def secret_of(token: str) -> str:
    return token.split("_", 2)[2]


def test_the_key_table_holds_no_secret(server: RunningServer) -> None:
    tokens = [server.api_key] + [server.create_key(permissions=p) for p in (READ, WRITE, ADMIN)]
    pepper = server.components.keys._pepper  # the server-side pepper, never stored with the keys
    path = server.components.settings.sqlite_path
    with sqlite3.connect(path) as conn:
        rows = {r[0]: r for r in conn.execute("SELECT * FROM api_keys")}
    for token in tokens:
        key_id, secret = token.split("_")[1], secret_of(token)
        row = rows[key_id]
        for column in row:
            text = (
                column if isinstance(column, str) else bytes(column or b"").hex() if isinstance(column, bytes) else ""
            )
            assert secret not in text
            if isinstance(column, bytes):
                assert secret.encode() not in column
                # Not a bare hash either: the stored value needs the pepper to be recomputed.
                assert column != hashlib.sha256(secret.encode()).digest()
        assert hmac.new(pepper, secret.encode(), hashlib.sha256).digest() in row
    blob = b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))  # the database, WAL and SHM
    for token in tokens:
        assert secret_of(token).encode() not in blob
    assert pepper not in blob


def test_right_id_with_a_wrong_secret_is_rejected_by_a_constant_time_compare(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = server.create_key()
    key_id, secret = key.split("_")[1], secret_of(key)
    forged = f"msk_{key_id}_{secret[:-1]}{'A' if secret[-1] != 'A' else 'B'}"
    unknown = f"msk_{'f' * 16}_{secret}"
    compared: list[int] = []
    real = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        compared.append(1)
        return real(a, b)

    monkeypatch.setattr("memsvc.keys.hmac.compare_digest", spy)
    request = query_service_pb2.QueryRequest(user_id="u", query="hello")
    forged_failure = expect_failure(lambda: server.queries.Query(request, metadata=server.auth(forged)))
    unknown_failure = expect_failure(lambda: server.queries.Query(request, metadata=server.auth(unknown)))
    assert forged_failure.code == unknown_failure.code == grpc.StatusCode.UNAUTHENTICATED
    # A wrong secret and an unknown id read the same: the answer does not confirm the id exists.
    assert forged_failure.message == unknown_failure.message
    assert compared, "the secret was not checked with hmac.compare_digest"
    server.queries.Query(request, metadata=server.auth(key))  # the genuine key still works


Call = Callable[[RunningServer, str, str], Any]


def _rpcs(memory_id: str) -> dict[str, tuple[Permission, Call]]:
    """Every RPC of the API with the permission it needs and a call of it by one key."""
    w = write_service_pb2

    def unary(stub: str, method: str, request: Any) -> Call:
        return lambda s, key, user: getattr(getattr(s, stub), method)(request(user), metadata=s.auth(key), timeout=30)

    def export(s: RunningServer, key: str, user: str) -> Any:
        stream = s.writes.ExportMemories(w.ExportMemoriesRequest(user_id=user), metadata=s.auth(key), timeout=30)
        return list(stream)

    record = {"memory": {"content": "imported memory"}}
    return {
        "AddMemories": (
            Permission.WRITE,
            unary("writes", "AddMemories", lambda u: w.AddMemoriesRequest(user_id=u, memories=[{"content": "x y"}])),
        ),
        "UpdateMemory": (
            Permission.WRITE,
            unary(
                "writes",
                "UpdateMemory",
                lambda u: w.UpdateMemoryRequest(
                    user_id=u, id=memory_id, memory={"importance": 0.9}, update_mask={"paths": ["importance"]}
                ),
            ),
        ),
        "DeleteMemory": (
            Permission.WRITE,
            unary("writes", "DeleteMemory", lambda u: w.DeleteMemoryRequest(user_id=u, id=ABSENT_ID)),
        ),
        "ForgetUser": (Permission.WRITE, unary("writes", "ForgetUser", lambda u: w.ForgetUserRequest(user_id=u + "x"))),
        "GetMemory": (
            Permission.READ,
            unary("writes", "GetMemory", lambda u: w.GetMemoryRequest(user_id=u, id=memory_id)),
        ),
        "AddConversation": (
            Permission.WRITE,
            unary(
                "writes",
                "AddConversation",
                lambda u: w.AddConversationRequest(
                    user_id=u, session_id="s1", turns=[query_service_pb2.ConversationTurn(content="I love maps")]
                ),
            ),
        ),
        "ListMemories": (Permission.READ, unary("writes", "ListMemories", lambda u: w.ListMemoriesRequest(user_id=u))),
        # Feedback reports on what Query returned, so reading suffices (pipeline/history.py).
        "Feedback": (
            Permission.READ,
            unary(
                "writes", "Feedback", lambda u: w.FeedbackRequest(user_id=u, request_id="req_x", used_ids=[memory_id])
            ),
        ),
        "GetMemoryHistory": (
            Permission.READ,
            unary("writes", "GetMemoryHistory", lambda u: w.GetMemoryHistoryRequest(user_id=u, id=memory_id)),
        ),
        "ExportMemories": (Permission.READ, export),
        "ImportMemories": (
            Permission.WRITE,
            unary("writes", "ImportMemories", lambda u: w.ImportMemoriesRequest(user_id=u, records=[record])),
        ),
        "Query": (
            Permission.READ,
            unary("queries", "Query", lambda u: query_service_pb2.QueryRequest(user_id=u, query="memory")),
        ),
    }


def test_every_rpc_requires_its_permission(server: RunningServer) -> None:
    memory_id = add(server, server.api_key, "pat", "Pat collects vintage maps")[0].id
    rpcs = _rpcs(memory_id)
    declared = {
        m.name
        for service in (write_service_pb2, query_service_pb2)
        for s in service.DESCRIPTOR.services_by_name.values()
        for m in s.methods
    }
    assert declared == set(rpcs), "classify every RPC's permission in this test"
    keys = {p: server.create_key(permissions=frozenset({p})) for p in Permission}
    implies = {Permission.READ: {Permission.READ}, Permission.WRITE: {Permission.READ, Permission.WRITE}}
    for name, (needed, call) in rpcs.items():
        for held, key in keys.items():
            allowed = held is Permission.ADMIN or needed in implies[held]
            try:
                call(server, key, "pat")
            except grpc.RpcError as error:
                code = error.code()  # type: ignore[attr-defined]
                if code == grpc.StatusCode.UNIMPLEMENTED:
                    break  # declared in the contract but not served by this build yet
                if allowed:
                    assert code != grpc.StatusCode.PERMISSION_DENIED, f"{name} refused a {held.value} key"
                else:
                    assert code == grpc.StatusCode.PERMISSION_DENIED, f"{name} with a {held.value} key gave {code}"
                continue
            assert allowed, f"{name} accepted a {held.value} key; it needs {needed.value}"


def test_permission_denied_is_decided_before_not_found(server: RunningServer) -> None:
    read_only = server.create_key(permissions=READ)
    w = write_service_pb2
    for call in (
        lambda: server.writes.DeleteMemory(
            w.DeleteMemoryRequest(user_id="nobody", id=ABSENT_ID), metadata=server.auth(read_only)
        ),
        lambda: server.writes.UpdateMemory(
            w.UpdateMemoryRequest(
                user_id="nobody", id=ABSENT_ID, memory={"tags": ["t"]}, update_mask={"paths": ["tags"]}
            ),
            metadata=server.auth(read_only),
        ),
    ):
        assert expect_failure(call).code == grpc.StatusCode.PERMISSION_DENIED


def test_another_tenants_memory_is_exactly_as_absent_as_a_missing_one(server: RunningServer) -> None:
    victim = add(server, server.api_key, "alice", "Alice's door code is 4821")[0]
    intruder = server.create_key(tenant="globex")
    same_tenant_other_project = server.create_key(project="other")
    w = write_service_pb2

    def calls(key: str) -> list[Callable[[str], Callable[[], Any]]]:
        md = server.auth(key)
        update = {"memory": {"content": "pwned"}, "update_mask": {"paths": ["content"]}}
        return [
            lambda i: lambda: get(server, key, "alice", i),
            lambda i: lambda: server.writes.DeleteMemory(w.DeleteMemoryRequest(user_id="alice", id=i), metadata=md),
            lambda i: (
                lambda: server.writes.UpdateMemory(w.UpdateMemoryRequest(user_id="alice", id=i, **update), metadata=md)
            ),
        ]

    for key in (intruder, same_tenant_other_project):
        for make in calls(key):
            existing, missing = expect_failure(make(victim.id)), expect_failure(make(ABSENT_ID))
            assert existing.code == missing.code == grpc.StatusCode.NOT_FOUND
            assert (existing.message, existing.reason, existing.fields) == (
                missing.message,
                missing.reason,
                missing.fields,
            )
            assert victim.id not in " ".join(existing.texts)
    assert get(server, server.api_key, "alice", victim.id).content == "Alice's door code is 4821"


def test_keys_expire_and_revocation_takes_effect_within_the_cache_ttl(server_factory: ServerFactory) -> None:
    s = server_factory(auth_cache_ttl_s=0.5)
    request = query_service_pb2.QueryRequest(user_id="u", query="hello")
    short = s.create_key(ttl_s=1.5)
    s.queries.Query(request, metadata=s.auth(short))
    time.sleep(1.6)
    failure = expect_failure(lambda: s.queries.Query(request, metadata=s.auth(short)))
    assert failure.code == grpc.StatusCode.UNAUTHENTICATED and "expired" in failure.message
    revoked = s.create_key()
    s.queries.Query(request, metadata=s.auth(revoked))
    assert s.run(s.components.keys.revoke(revoked.split("_")[1]))
    time.sleep(0.6)
    failure = expect_failure(lambda: s.queries.Query(request, metadata=s.auth(revoked)))
    assert failure.code == grpc.StatusCode.UNAUTHENTICATED and "revoked" in failure.message


def _tampered(token: str) -> str:
    """`token` with one character changed in the middle: the last characters of base64 may carry
    only padding bits, so a change there can decode to the same bytes."""
    middle = len(token) // 2
    return token[:middle] + ("A" if token[middle] != "A" else "B") + token[middle + 1 :]


def test_page_tokens_are_bound_to_the_callers_namespace(server: RunningServer) -> None:
    add(server, server.api_key, "paula", "Paula one", "Paula two", "Paula three")
    listing = write_service_pb2.ListMemoriesRequest(user_id="paula", page_size=1)
    first = server.writes.ListMemories(listing, metadata=server.md)
    token = first.next_page_token
    assert token and len(first.memories) == 1
    # Another key of the same namespace may continue the listing: the token names no key.
    same_namespace = server.create_key(permissions=READ)
    follow = write_service_pb2.ListMemoriesRequest(user_id="paula", page_size=1, page_token=token)
    assert server.writes.ListMemories(follow, metadata=server.auth(same_namespace)).memories
    others = {
        "other project": server.create_key(project="other"),
        "other environment": server.create_key(environment="production"),
        "other tenant": server.create_key(tenant="globex"),
    }
    for what, key in others.items():
        failure = expect_failure(lambda k=key: server.writes.ListMemories(follow, metadata=server.auth(k)))
        assert failure.code == grpc.StatusCode.INVALID_ARGUMENT and failure.fields == ["page_token"], what
    variants = [
        write_service_pb2.ListMemoriesRequest(user_id="peter", page_size=1, page_token=token),
        write_service_pb2.ListMemoriesRequest(user_id="paula", page_size=1, page_token=token, filter=everything()),
        write_service_pb2.ListMemoriesRequest(user_id="paula", page_size=1, page_token=_tampered(token)),
    ]
    for request in variants:
        failure = expect_failure(lambda r=request: server.writes.ListMemories(r, metadata=server.md))
        assert failure.code == grpc.StatusCode.INVALID_ARGUMENT and failure.fields == ["page_token"]
