"""Batch write throughput through gRPC (memories/s) against its floor, the embedding alone."""

from __future__ import annotations

import argparse
import json
import time
import zlib
from pathlib import Path
from typing import Any

from memsvc.bench.cpu import ThreadCpu, ms_per, ms_per_unit
from memsvc.bench.harness import BenchServer, load_memories, machine, user_ids
from memsvc.bench.synthetic import memory_texts


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--users", type=int, default=10, help="users to write for")
    parser.add_argument("--memories-per-user", type=int, default=500, help="memories written per user")
    parser.add_argument("--batch", type=int, default=64, help="memories per AddMemories call")
    parser.add_argument("--concurrency", type=int, default=2, help="AddMemories calls in flight at once")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--json", type=Path, help="write the summary as JSON to this file")


def embedding_floor(bench: BenchServer, texts: list[str], batch: int) -> float:
    """Seconds the embedder alone takes for `texts` in batches of `batch`, called directly."""
    embedder: Any = bench.components.embedder
    started = time.perf_counter()
    for start in range(0, len(texts), batch):
        chunk = texts[start : start + batch]
        if hasattr(embedder, "encode"):
            embedder.encode(chunk)
        else:
            bench.loop.run(embedder.embed(chunk))
    return time.perf_counter() - started


def run(args: argparse.Namespace) -> int:
    bench = BenchServer.start()
    try:
        users = user_ids(args.users)
        # The client runs in another process, so every thread measured here is the server's.
        cpu_before = ThreadCpu.now()
        load = load_memories(
            bench.address,
            bench.api_key,
            users,
            args.memories_per_user,
            batch=args.batch,
            concurrency=args.concurrency,
            seed=args.seed,
        )
        cpu_threads = ThreadCpu.now().since(cpu_before)
        settle_started = time.perf_counter()
        bench.settle()
        settle_s = time.perf_counter() - settle_started
        # The same texts again (a different seed would change their lengths), embedded directly.
        texts = [
            t
            for u in users
            for t in memory_texts(args.seed * 1_000_003 + zlib.crc32(u.encode()), args.memories_per_user)
        ]
        floor_s = embedding_floor(bench, texts, args.batch)
    finally:
        bench.stop()
    floor_rate = len(texts) / floor_s if floor_s > 0 else 0.0
    data = {
        "memories_per_s": round(load.rate, 1),
        "floor_memories_per_s": round(floor_rate, 1),
        "ratio": round(floor_rate / load.rate, 3) if load.rate > 0 else None,
        # Server CPU per memory written, by thread group, over the load (the settle excluded).
        "server_cpu_ms_per_memory": {
            "total": ms_per(sum(cpu_threads.values()), load.memories),
            "threads": ms_per_unit(cpu_threads, load.memories),
        },
        "memories": load.memories,
        "seconds": round(load.seconds, 3),
        "settle_s": round(settle_s, 3),
        "users": args.users,
        "memories_per_user": args.memories_per_user,
        "batch": args.batch,
        "concurrency": args.concurrency,
        "machine": machine(),
    }
    print(
        f"write | {args.users} users x {args.memories_per_user} memories | batch {args.batch} | "
        f"concurrency {args.concurrency}\n"
        f"  {load.memories} memories in {load.seconds:.2f} s: {load.rate:.0f} memories/s "
        f"(floor, embedding alone: {floor_rate:.0f}/s; floor / service = {data['ratio']})"
    )
    cpu = data["server_cpu_ms_per_memory"]
    print(f"  server CPU {cpu['total']:.2f} ms per memory")
    for group, ms in cpu["threads"].items():
        print(f"    {group:<48} {ms:7.3f} ms")
    if args.json:
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    return 0 if load.memories == args.users * args.memories_per_user else 1
