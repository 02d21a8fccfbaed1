"""The memory lifecycle over gRPC: supersession, confirmation, decay and tiers, expiry, history,
feedback, a maintenance job safe on two replicas, and export/import between deployments."""

from __future__ import annotations

import asyncio
import io
import json
import time
from typing import Any

import grpc
import pytest

from memsvc import cli
from memsvc.domain.models import Namespace
from memsvc.pipeline.jobs.maintenance import LEASE_NAME, Maintenance, MaintenanceReport
from memsvc.stores.records.sqlite import SqliteRecordStore
from memsvc.stores.sql import Program, q
from memsvc.v1 import memory_pb2, query_service_pb2, write_service_pb2
from tests.conftest import RunningServer, ServerFactory

pytestmark = pytest.mark.e2e

DAY_S = 86_400.0


def add(s: RunningServer, user: str, *contents: str, **fields: Any) -> write_service_pb2.AddMemoriesResponse:
    request = write_service_pb2.AddMemoriesRequest(
        user_id=user, memories=[write_service_pb2.NewMemory(content=c, **fields) for c in contents]
    )
    response: write_service_pb2.AddMemoriesResponse = s.writes.AddMemories(request, metadata=s.md)
    return response


def query(s: RunningServer, user: str, text: str, **filter_fields: Any) -> Any:
    request = query_service_pb2.QueryRequest(
        user_id=user,
        query=text,
        filter=memory_pb2.MemoryFilter(min_importance=0.0, **filter_fields),
        skip_cache=True,
    )
    return s.queries.Query(request, metadata=s.md)


def get(s: RunningServer, user: str, memory_id: str) -> memory_pb2.Memory:
    response = s.writes.GetMemory(write_service_pb2.GetMemoryRequest(user_id=user, id=memory_id), metadata=s.md)
    memory: memory_pb2.Memory = response.memory
    return memory


def history(s: RunningServer, user: str, memory_id: str) -> list[memory_pb2.MemoryVersion]:
    request = write_service_pb2.GetMemoryHistoryRequest(user_id=user, id=memory_id)
    return list(s.writes.GetMemoryHistory(request, metadata=s.md).versions)


def listing(s: RunningServer, user: str) -> list[memory_pb2.Memory]:
    request = write_service_pb2.ListMemoriesRequest(
        user_id=user, page_size=500, filter=memory_pb2.MemoryFilter(include_inactive=True)
    )
    return list(s.writes.ListMemories(request, metadata=s.md).memories)


def maintain(s: RunningServer, now: float) -> MaintenanceReport:
    assert s.components.maintenance is not None
    return s.run(s.components.maintenance.run_once(now))


def test_a_changed_preference_supersedes_the_old_one(server: RunningServer) -> None:
    old = add(server, "alice", "I prefer window seats on long flights", kind=memory_pb2.MEMORY_KIND_PREFERENCE)
    lisbon = add(server, "alice", "I live in Lisbon").memories[0]
    add(server, "alice", "My sister is an architect")
    new = add(server, "alice", "I now prefer aisle seats on long flights", kind=memory_pb2.MEMORY_KIND_PREFERENCE)
    assert new.created == [True]
    assert list(new.results[0].superseded_ids) == [old.memories[0].id]
    assert new.results[0].outcome == write_service_pb2.WRITE_OUTCOME_CREATED

    found = query(server, "alice", "which seat do I like on a plane?")
    contents = [m.memory.content for m in found.memories]
    assert contents[0] == "I now prefer aisle seats on long flights"
    assert "I prefer window seats on long flights" not in contents

    history_view = query(server, "alice", "which seat do I like on a plane?", include_inactive=True)
    by_id = {m.memory.id: m.memory for m in history_view.memories}
    superseded = by_id[old.memories[0].id]
    assert superseded.retention_status == memory_pb2.RETENTION_STATUS_SUPERSEDED
    assert superseded.superseded_by == new.memories[0].id
    assert superseded.consistency < 1.0
    assert "contradicted by" in superseded.score_reasons["consistency"]

    # A moved residence: "I moved to Berlin" after "I live in Lisbon".
    berlin = add(server, "alice", "I moved to Berlin last spring")
    assert list(berlin.results[0].superseded_ids) == [lisbon.id]
    where = [m.memory.id for m in query(server, "alice", "which city do I live in?").memories]
    assert berlin.memories[0].id in where and lisbon.id not in where
    assert get(server, "alice", lisbon.id).retention_status == memory_pb2.RETENTION_STATUS_SUPERSEDED

    versions = history(server, "alice", old.memories[0].id)
    assert [v.change for v in versions] == [memory_pb2.MEMORY_CHANGE_CREATE, memory_pb2.MEMORY_CHANGE_SUPERSEDE]
    assert [v.version for v in versions] == [1, 2]
    assert versions[0].content == "I prefer window seats on long flights"
    assert versions[1].actor and new.memories[0].id in versions[1].description
    assert versions[1].retention_status == memory_pb2.RETENTION_STATUS_SUPERSEDED


def test_a_duplicate_statement_raises_confirmation_instead_of_adding_a_row(server: RunningServer) -> None:
    first = add(server, "bob", "I am allergic to peanuts").memories[0]
    assert first.confirmation_count == 1
    assert set(first.score_reasons) >= {"importance", "quality"}
    again = add(server, "bob", "I am allergic to peanuts")
    assert again.created == [False]
    assert again.results[0].outcome == write_service_pb2.WRITE_OUTCOME_CONFIRMED_EXISTING
    assert first.id in again.results[0].reason
    assert again.memories[0].id == first.id and again.memories[0].confirmation_count == 2
    # Same fact in other words; a different fact is stored.
    third = add(server, "bob", "I'm allergic to peanuts.")
    assert third.created == [False] and third.memories[0].confirmation_count == 3
    other = add(server, "bob", "I am allergic to shellfish")
    assert other.created == [True]
    assert len(listing(server, "bob")) == 2
    assert [v.change for v in history(server, "bob", first.id)] == [
        memory_pb2.MEMORY_CHANGE_CREATE,
        memory_pb2.MEMORY_CHANGE_CONFIRM,
        memory_pb2.MEMORY_CHANGE_CONFIRM,
    ]
    # A retry with an idempotency key is a replay, not another confirmation.
    keyed = add(server, "bob", "I play the oboe", idempotency_key="k1")
    replay = add(server, "bob", "I play the oboe", idempotency_key="k1")
    assert replay.results[0].outcome == write_service_pb2.WRITE_OUTCOME_IDEMPOTENT_REPLAY
    assert get(server, "bob", keyed.memories[0].id).confirmation_count == 1


def test_one_call_is_reviewed_in_one_vector_search_and_one_record_fetch(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    add(server, "lee", "I am allergic to peanuts", "I live in Lisbon", "My sister is called Ana")
    milvus, store = server.components.index.client, server.components.store
    searches: list[int] = []
    fetches: list[int] = []
    real_search, real_fetch = milvus.search, store.fetch_memories

    def counting_search(*args: Any, **kwargs: Any) -> Any:
        searches.append(len(kwargs["data"]))
        return real_search(*args, **kwargs)

    async def counting_fetch(*args: Any, **kwargs: Any) -> Any:
        fetches.append(len(args[1]))
        return await real_fetch(*args, **kwargs)

    monkeypatch.setattr(milvus, "search", counting_search)
    monkeypatch.setattr(store, "fetch_memories", counting_fetch)
    contents = [f"I visited museum number {n} in Porto" for n in range(10)]
    response = add(server, "lee", "I am allergic to peanuts", "I moved to Berlin", *contents)
    # Every item is checked against the stored memories, all in one round trip per store.
    assert searches == [12] and len(fetches) == 1
    assert response.results[0].outcome == write_service_pb2.WRITE_OUTCOME_CONFIRMED_EXISTING
    assert response.results[1].outcome == write_service_pb2.WRITE_OUTCOME_CREATED
    lisbon = next(m for m in listing(server, "lee") if m.content == "I live in Lisbon")
    assert lisbon.superseded_by == response.memories[1].id
    assert response.created == [False, True, *([True] * 10)]


@pytest.mark.parametrize("placement", ["partition", "partition_key"])
def test_a_superseded_memory_keeps_its_stored_vector(server_factory: ServerFactory, placement: str) -> None:
    s = server_factory(vector_placement=placement)
    old = add(s, "max", "I live in Lisbon", "I play the cello").memories[0]
    embedded: list[list[str]] = []
    embedder = s.components.embedder
    real_embed = embedder.embed

    async def counting_embed(texts: Any) -> Any:
        embedded.append(list(texts))
        return await real_embed(texts)

    embedder.embed = counting_embed  # type: ignore[method-assign]
    try:
        new = add(s, "max", "I moved to Berlin").memories[0]
    finally:
        embedder.embed = real_embed  # type: ignore[method-assign]
    assert get(s, "max", old.id).superseded_by == new.id
    # Only the new statement was embedded: the superseded one was re-indexed with its stored vector.
    assert embedded == [["I moved to Berlin"]]
    found = query(s, "max", "which city in Portugal did I live in", include_inactive=True)
    assert old.id in [r.memory.id for r in found.memories]
    active = query(s, "max", "which city in Portugal did I live in")
    assert old.id not in [r.memory.id for r in active.memories]


def test_repeats_and_contradictions_within_one_call_and_back_dated_statements(server: RunningServer) -> None:
    response = add(
        server, "kim", "I am allergic to peanuts", "I am allergic to peanuts", "I live in Lisbon", "I moved to Berlin"
    )
    outcomes = [r.outcome for r in response.results]
    assert outcomes == [
        write_service_pb2.WRITE_OUTCOME_CREATED,
        write_service_pb2.WRITE_OUTCOME_CONFIRMED_EXISTING,
        write_service_pb2.WRITE_OUTCOME_CREATED,
        write_service_pb2.WRITE_OUTCOME_CREATED,
    ]
    peanuts, repeat, lisbon, berlin = response.memories
    assert repeat.id == peanuts.id and repeat.confirmation_count == 2
    assert list(response.results[3].superseded_ids) == [lisbon.id]
    assert get(server, "kim", lisbon.id).superseded_by == berlin.id
    assert [v.change for v in history(server, "kim", peanuts.id)] == [
        memory_pb2.MEMORY_CHANGE_CREATE,
        memory_pb2.MEMORY_CHANGE_CONFIRM,
    ]
    # A statement dated before the current truth it contradicts is stored as history.
    old = add(server, "kim", "I live in Madrid", create_time=_ts(time.time() - 30 * DAY_S))
    assert old.created == [True] and not old.results[0].superseded_ids
    assert old.memories[0].retention_status == memory_pb2.RETENTION_STATUS_SUPERSEDED
    assert old.memories[0].superseded_by == berlin.id
    assert get(server, "kim", berlin.id).retention_status == memory_pb2.RETENTION_STATUS_ACTIVE
    found = [m.memory.id for m in query(server, "kim", "which city do I live in now?").memories]
    assert berlin.id in found and lisbon.id not in found and old.memories[0].id not in found


def test_after_a_simulated_month_without_recall_decay_falls_and_the_tier_moves(server: RunningServer) -> None:
    now = time.time()
    idle = add(server, "carol", "Carol's bicycle is a green Brompton").memories[0]
    vital = add(server, "carol", "Carol must never be given penicillin", importance=0.95).memories[0]
    assert idle.tier == memory_pb2.TIER_HOT and idle.decay == 1.0

    report = maintain(server, now + 10 * DAY_S)
    assert report.ran and report.tier_moves == {"warm": 1}
    after_10 = get(server, "carol", idle.id)
    assert after_10.tier == memory_pb2.TIER_WARM and 0.7 < after_10.decay < 0.85

    maintain(server, now + 31 * DAY_S)
    after_31 = get(server, "carol", idle.id)
    assert after_31.tier == memory_pb2.TIER_COLD
    assert after_31.decay < after_10.decay and after_31.decay < 0.5
    important = get(server, "carol", vital.id)
    assert important.tier == memory_pb2.TIER_HOT and important.decay < 0.5
    # The vector carries the tier: recall by tier filter agrees with the record.
    assert not query(server, "carol", "what bike does Carol ride?", tier=memory_pb2.TIER_HOT).memories or all(
        m.memory.id != idle.id for m in query(server, "carol", "bike", tier=memory_pb2.TIER_HOT).memories
    )
    cold = query(server, "carol", "what bike does Carol ride?", tier=memory_pb2.TIER_COLD)
    assert [m.memory.id for m in cold.memories] == [idle.id]
    assert cold.memories[0].score_breakdown.decay == pytest.approx(after_31.decay, abs=1e-3)
    moves = [v for v in history(server, "carol", idle.id) if v.change == memory_pb2.MEMORY_CHANGE_TIER_MOVE]
    assert [v.tier for v in moves] == [memory_pb2.TIER_WARM, memory_pb2.TIER_COLD]
    assert moves[0].actor == "system:maintenance" and "days without recall" in moves[0].description


def test_recall_keeps_memories_hot_and_usage_is_normalised_per_tenant(server: RunningServer) -> None:
    ids = [m.id for m in add(server, "dan", "Dan's cat is called Miso", "Dan collects vinyl records").memories]
    for _ in range(3):
        query(server, "dan", "what is the name of Dan's cat?")
    deadline = time.time() + 5
    while get(server, "dan", ids[0]).usage_count < 3 and time.time() < deadline:
        time.sleep(0.05)
    recalled = get(server, "dan", ids[0])
    assert recalled.usage_count >= 3
    # A month on, the memory recalled a week before the run is still hot; the other cooled.
    report = maintain(server, recalled.last_access_time.seconds + 6 * DAY_S)
    assert report.tenants_with_usage >= 1
    assert get(server, "dan", ids[0]).tier == memory_pb2.TIER_HOT
    stats = server.run(server.components.store.get_usage_stats("acme"))
    assert stats is not None and stats.p90 >= 1


def test_recall_events_past_their_retention_are_pruned_and_feedback_stays(server: RunningServer) -> None:
    memory = add(server, "ida", "Ida's boat is called Heron").memories[0]
    request_ids = [query(server, "ida", "what is Ida's boat called?").request_id for _ in range(3)]
    deadline = time.time() + 5
    while get(server, "ida", memory.id).usage_count < 3 and time.time() < deadline:
        time.sleep(0.05)
    server.writes.Feedback(
        write_service_pb2.FeedbackRequest(user_id="ida", request_id=request_ids[0], used_ids=[memory.id]),
        metadata=server.md,
    )
    ns = Namespace("acme", "default", "development", "ida").digest

    def events() -> Program[list[tuple[str, str]]]:
        rows = (yield q("SELECT event, request_id FROM memory_events WHERE ns = %s ORDER BY id", (ns,))).rows
        return [(str(r[0]), str(r[1])) for r in rows]

    store = server.components.store
    recalls = [("recall", r) for r in request_ids]
    assert server.run(store._read(events())) == [*recalls, ("used", request_ids[0])]
    # Within the retention (30 days by default) nothing goes; past it, the recall events do.
    assert maintain(server, time.time() + 29 * DAY_S).recall_events_pruned == 0
    assert server.run(store._read(events())) == [*recalls, ("used", request_ids[0])]
    assert maintain(server, time.time() + 31 * DAY_S).recall_events_pruned == 3
    assert server.run(store._read(events())) == [("used", request_ids[0])]
    # The counts they added stay on the memory.
    assert get(server, "ida", memory.id).usage_count == 3


def test_expiry_deletes_rows_and_vectors(server_factory: ServerFactory) -> None:
    s = server_factory(retention_days_by_kind={"episode": 30})
    now = time.time()
    expiring = add(s, "erin", "Erin's hotel door code is 4711", expire_time=_ts(now + 3600)).memories[0]
    assert expiring.expire_time.seconds == int(now + 3600)
    episode = add(s, "erin", "Erin watched a film on Tuesday", kind=memory_pb2.MEMORY_KIND_EPISODE).memories[0]
    kept = add(s, "erin", "Erin speaks Portuguese and Dutch").memories[0]
    namespace = Namespace("acme", "default", "development", "erin")
    assert s.run(s.components.index.count(namespace)) == 3

    report = maintain(s, now + 2 * 3600)
    assert report.expired_deleted == 1 and report.retention_deleted == 0
    with pytest.raises(grpc.RpcError) as info:
        get(s, "erin", expiring.id)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    assert s.run(s.components.index.count(namespace)) == 2
    assert not any(m.memory.id == expiring.id for m in query(s, "erin", "hotel door code").memories)
    trail = history(s, "erin", expiring.id)
    assert [v.change for v in trail] == [memory_pb2.MEMORY_CHANGE_DELETE]
    assert trail[0].content == "" and "expired" in trail[0].description

    report = maintain(s, now + 31 * DAY_S)
    assert report.retention_deleted == 1
    assert [m.id for m in listing(s, "erin")] == [kept.id]
    assert s.run(s.components.index.count(namespace)) == 1
    assert episode.id not in {m.memory.id for m in query(s, "erin", "film").memories}


def test_the_maintenance_job_is_idempotent_and_safe_on_two_replicas(server: RunningServer) -> None:
    now = time.time()
    ids = [m.id for m in add(server, "fay", *[f"Fay note {i}: she grows {w}" for i, w in enumerate("abcdef")]).memories]
    components = server.components
    assert components.maintenance is not None

    # Each replica has its own connections to the one database file, as separate processes would.
    second_store = SqliteRecordStore(components.settings.sqlite_path)

    def replica(holder: str, own_store: bool = False) -> Maintenance:
        return Maintenance(
            store=second_store if own_store else components.store,
            writes=components.writes,
            codec=components.codec,
            indexer=components.indexer,
            changes=components.changes,
            policy=components.maintenance._policy,
            holder=holder,
        )

    async def both(a: Maintenance, b: Maintenance, at: float) -> list[MaintenanceReport]:
        return list(await asyncio.gather(a.run_once(at), b.run_once(at)))

    # Two replicas at once: while one holds the lease (as it does through its pass), the other
    # stands down. The lease is taken first so the runs overlap for certain: two passes merely
    # started together may also run one after the other, which is safe and not this case.
    policy = components.maintenance._policy
    assert server.run(components.store.acquire_lease(LEASE_NAME, "replica-a", time.time(), policy.lease_ttl_s))
    reports = [server.run(replica("replica-b", own_store=True).run_once(now + 40 * DAY_S))]
    reports.append(server.run(replica("replica-a").run_once(now + 40 * DAY_S)))
    assert [r.ran for r in reports] == [False, True]
    assert sum(r.moved for r in reports) == len(ids)

    # Even without the lease (both claim to be the same holder), compare-and-set on the row
    # revision applies each change once.
    reports = server.run(both(replica("same"), replica("same", own_store=True), now + 80 * DAY_S))
    assert all(r.ran for r in reports)
    for memory_id in ids:
        moves = [v for v in history(server, "fay", memory_id) if v.change == memory_pb2.MEMORY_CHANGE_TIER_MOVE]
        assert [v.tier for v in moves] == [memory_pb2.TIER_COLD], memory_id
    decays = {m.id: m.decay for m in listing(server, "fay")}

    server.run(second_store.close())

    # Idempotent: a rerun at the same clock changes nothing.
    again = maintain(server, now + 80 * DAY_S)
    assert again.ran and again.moved == 0 and again.decay_updated == 0
    assert {m.id: m.decay for m in listing(server, "fay")} == decays


def test_feedback_lowers_the_vitality_of_unused_memories(server: RunningServer) -> None:
    used, unused = add(server, "gus", "Gus drinks oat milk", "Gus dislikes oat cookies").memories
    response = query(server, "gus", "what does Gus drink with oats?")
    request_id = response.request_id
    fb = server.writes.Feedback(
        write_service_pb2.FeedbackRequest(
            user_id="gus", request_id=request_id, used_ids=[used.id], unused_ids=[unused.id]
        ),
        metadata=server.md,
    )
    assert fb.recorded_count == 2 and not fb.ignored_ids
    repeat = server.writes.Feedback(
        write_service_pb2.FeedbackRequest(user_id="gus", request_id=request_id, unused_ids=[unused.id]),
        metadata=server.md,
    )
    assert repeat.recorded_count == 0 and list(repeat.ignored_ids) == [unused.id]
    for i in range(3):
        server.writes.Feedback(
            write_service_pb2.FeedbackRequest(user_id="gus", request_id=f"req_other{i}", unused_ids=[unused.id]),
            metadata=server.md,
        )
    assert get(server, "gus", used.id).vitality > get(server, "gus", unused.id).vitality
    assert get(server, "gus", unused.id).vitality < 0.6
    ranked = {m.memory.id: m for m in query(server, "gus", "oat").memories}
    assert ranked[unused.id].score_breakdown.decay < ranked[used.id].score_breakdown.decay
    with pytest.raises(grpc.RpcError) as info:
        server.writes.Feedback(
            write_service_pb2.FeedbackRequest(user_id="gus", request_id=request_id, used_ids=["nope"]),
            metadata=server.md,
        )
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_forget_user_erases_history(server: RunningServer) -> None:
    m = add(server, "hal", "Hal's locker is number 12").memories[0]
    assert history(server, "hal", m.id)
    server.writes.ForgetUser(write_service_pb2.ForgetUserRequest(user_id="hal"), metadata=server.md)
    with pytest.raises(grpc.RpcError) as info:
        history(server, "hal", m.id)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


def test_export_then_import_into_an_empty_deployment_reproduces_every_memory(
    server_factory: ServerFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = server_factory()
    created = time.time() - 5 * DAY_S
    add(source, "ivy", "Ivy's favourite colour is blue", create_time=_ts(created))
    add(source, "ivy", "Ivy's favourite colour is green now")
    add(source, "ivy", "Ivy works at a bakery in Porto", "Ivy has two cats named Salt and Pepper")
    add(source, "ivy", "Ivy has two cats named Salt and Pepper")  # a confirmation
    add(source, "ivy", "Ivy is training for a half marathon", expire_time=_ts(time.time() + 90 * DAY_S))
    before = {m.id: m for m in listing(source, "ivy")}
    assert len(before) == 5

    # memsvc export --user ivy > file.jsonl
    assert cli.main(["export", "--user", "ivy", "--address", source.address, "--api-key", source.api_key]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert len(lines) == 5
    first = json.loads(lines[0])
    assert set(first) == {"memory", "versions"} and first["memory"]["content"]

    # memsvc import --user ivy < file.jsonl, into an empty deployment, twice (idempotent).
    target = server_factory()
    for expected_imported in (5, 0):
        monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
        args = ["import", "--user", "ivy", "--address", target.address, "--api-key", target.api_key, "--batch", "2"]
        assert cli.main(args) == 0
        assert f"imported {expected_imported}," in capsys.readouterr().err

    after = {m.id: m for m in listing(target, "ivy")}
    assert set(after) == set(before)
    for memory_id, old in before.items():
        new = after[memory_id]
        for name in (
            "content",
            "kind",
            "role",
            "tier",
            "importance",
            "quality",
            "consistency",
            "retention_status",
            "superseded_by",
            "confirmation_count",
            "create_time",
            "expire_time",
        ):
            assert getattr(new, name) == getattr(old, name), (name, old.content)
    for text in ("what colour does Ivy like?", "where does Ivy work?", "pets", "what is Ivy training for?"):
        want = [m.memory.id for m in query(source, "ivy", text).memories]
        got = [m.memory.id for m in query(target, "ivy", text).memories]
        assert got == want, text
    blue = next(m for m in before.values() if m.content.endswith("blue"))
    trail = history(target, "ivy", blue.id)
    assert [v.change for v in trail] == [
        memory_pb2.MEMORY_CHANGE_CREATE,
        memory_pb2.MEMORY_CHANGE_SUPERSEDE,
        memory_pb2.MEMORY_CHANGE_IMPORT,
    ]
    assert trail[0].content == "Ivy's favourite colour is blue"


def _ts(seconds: float) -> Any:
    from google.protobuf import timestamp_pb2

    ts = timestamp_pb2.Timestamp()
    ts.FromSeconds(int(seconds))
    return ts


@pytest.mark.slow  # loads its own embedding model, as the CronJob's process does
def test_memsvc_maintain_is_a_one_shot_for_a_cronjob(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMSVC_DATA_DIR", str(tmp_path / "cron"))
    monkeypatch.setenv("MEMSVC_BOOTSTRAP_DEV_KEY", "false")
    assert cli.main(["maintain"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ran"] is True and report["scanned"] == 0 and report["expired_deleted"] == 0


def test_history_and_reasons_keep_no_plaintext_at_rest(server: RunningServer) -> None:
    canaries = ["Zqxvilleberg", "Kwoploramberg", "Fumbleberry", "Glorptangerine"]
    add(server, "nia", f"I live in {canaries[0]}", f"My favourite fruit is {canaries[2]}")
    moved = add(server, "nia", f"I moved to {canaries[1]}", f"My favourite fruit is {canaries[3]} now")
    assert all(r.superseded_ids for r in moved.results)
    versions = history(server, "nia", moved.results[0].superseded_ids[0])
    assert versions[-1].change == memory_pb2.MEMORY_CHANGE_SUPERSEDE and canaries[0] in versions[-1].content
    server.run(server.components.index.close())  # flush what Milvus Lite holds to disk
    files = [p for p in server.components.settings.data_dir.rglob("*") if p.is_file()]
    for path in files:
        data = path.read_bytes().lower()
        for canary in canaries:
            assert canary.lower().encode() not in data, f"{canary} in plain text in {path}"


def test_an_import_stops_at_a_line_that_is_not_a_record_and_says_which(
    server_factory: ServerFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = server_factory()
    for text in ("Uri plays the cello", "Uri lives in Ghent", "Uri is vegetarian", "Uri cycles to work"):
        add(source, "uri", text)
    assert cli.main(["export", "--user", "uri", "--address", source.address, "--api-key", source.api_key]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert len(lines) == 4

    target = server_factory()
    args = ["import", "--user", "uri", "--address", target.address, "--api-key", target.api_key, "--batch", "2"]
    broken = [*lines[:3], '{"memory": {"content": "cut off', lines[3]]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(broken) + "\n"))
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert "error: line 4 is not a memory record" in err
    assert "Traceback" not in err
    assert "imported 3, skipped 0 (imported before) before it" in err  # the lines before it went in
    assert len(listing(target, "uri")) == 3

    # Fixed, the same import completes and skips what the first run brought in.
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    assert cli.main(args) == 0
    assert "imported 1, skipped 3" in capsys.readouterr().err
    assert {m.content for m in listing(target, "uri")} == {m.content for m in listing(source, "uri")}
