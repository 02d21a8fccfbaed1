"""Stop a loaded server again and again while its bookkeeping and writes are in flight.

Run as a program (`python -m tests.fault.shutdown_rounds DATA_DIR ROUNDS`) so that a crash in
shutdown is a dead child process the test sees, not the end of the test session. Each round
builds the server on the same data directory, starts queries (whose recall events the
bookkeeping flushes every few milliseconds) and writes, stops the server with no grace period
while they run, and records which writes were acknowledged. At the end one more server reads
every acknowledged write back. Exit 0 means every round stopped cleanly and nothing
acknowledged was lost.
"""

from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path

import grpc
from grpc import aio

from memsvc.config import Settings
from memsvc.domain.models import Permission
from memsvc.embeddings.base import Embedder
from memsvc.server import Service, build_components, build_local_embedder
from memsvc.v1 import memory_pb2, query_service_pb2, query_service_pb2_grpc, write_service_pb2, write_service_pb2_grpc

USER = "shutdown-user"
SEED_MEMORIES = 120
QUERIES = 48
WRITES = 8


def settings_for(data_dir: Path) -> Settings:
    return Settings(
        data_dir=data_dir,
        listen="127.0.0.1:0",
        bootstrap_dev_key=False,
        grace_period_s=0.0,
        # Flush recall events as often as possible, so a flush is under way at every stop.
        bookkeeping_flush_interval_ms=1.0,
        reconcile_interval_s=0.05,
        index_flush_delay_s=0.01,
    )


async def start(data_dir: Path, embedder: Embedder) -> tuple[Service, aio.Channel, tuple[tuple[str, str]]]:
    components = await build_components(settings_for(data_dir), embedder=embedder)
    server = Service(components)
    port = await server.start("127.0.0.1:0")
    key = await components.keys.create("acme", "default", "development", frozenset(Permission))
    channel = aio.insecure_channel(f"127.0.0.1:{port}")
    return server, channel, (("authorization", f"Bearer {key.token}"),)


async def one_round(data_dir: Path, embedder: Embedder, round_no: int, acknowledged: dict[str, str]) -> None:
    server, channel, md = await start(data_dir, embedder)
    writes = write_service_pb2_grpc.WriteServiceStub(channel)
    queries = query_service_pb2_grpc.QueryServiceStub(channel)
    if round_no == 0:
        seed = [write_service_pb2.NewMemory(content=f"seed note {i} about topic {i % 7}") for i in range(SEED_MEMORIES)]
        reply = await writes.AddMemories(write_service_pb2.AddMemoriesRequest(user_id=USER, memories=seed), metadata=md)
        acknowledged.update({m.id: m.content for m in reply.memories})

    async def query(i: int) -> None:
        request = query_service_pb2.QueryRequest(
            user_id=USER,
            query=f"what about topic {i % 7}?",
            limit=50,
            skip_cache=True,
            filter=memory_pb2.MemoryFilter(min_importance=0.0),
        )
        await queries.Query(request, metadata=md, timeout=30)

    async def write(i: int) -> None:
        content = f"round {round_no} write {i}"
        request = write_service_pb2.AddMemoriesRequest(
            user_id=USER, memories=[write_service_pb2.NewMemory(content=content)]
        )
        reply = await writes.AddMemories(request, metadata=md, timeout=30)
        acknowledged.update({m.id: m.content for m in reply.memories})

    calls = [asyncio.ensure_future(write(i)) for i in range(WRITES)]
    calls += [asyncio.ensure_future(query(i)) for i in range(QUERIES)]
    # Stop while some calls have finished (their events are being flushed) and others run;
    # every other round lets in-flight calls finish within a short grace period.
    await asyncio.sleep(random.uniform(0.05, 1.0))
    await server.stop(0.0 if round_no % 2 == 0 else 0.3)
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not (
            isinstance(outcome, grpc.aio.AioRpcError)
            and outcome.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
        ):
            raise AssertionError(f"a call cut by the stop failed otherwise: {outcome!r}")
    await channel.close()


async def verify(data_dir: Path, embedder: Embedder, acknowledged: dict[str, str]) -> None:
    server, channel, md = await start(data_dir, embedder)
    writes = write_service_pb2_grpc.WriteServiceStub(channel)
    for memory_id, content in acknowledged.items():
        reply = await writes.GetMemory(write_service_pb2.GetMemoryRequest(user_id=USER, id=memory_id), metadata=md)
        assert reply.memory.content == content, f"acknowledged write {memory_id} came back as {reply.memory.content!r}"
    await channel.close()
    await server.stop(0)


async def main(data_dir: Path, rounds: int) -> None:
    embedder = build_local_embedder(Settings(data_dir=data_dir))
    acknowledged: dict[str, str] = {}
    for round_no in range(rounds):
        await one_round(data_dir, embedder, round_no, acknowledged)
    await verify(data_dir, embedder, acknowledged)
    await embedder.close()
    print(f"{rounds} rounds stopped cleanly; {len(acknowledged)} acknowledged writes read back", flush=True)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2])))
