"""Load and soak: mixed reads and writes from many users, latency per RPC, errors, lost and crossed writes.

Runs against a running server (`--address` and `--api-key`), or starts an in-process one like the
other benchmarks. Each user's memories carry the user's marker word, so a query result belonging to
someone else is caught twice: by its user_id and by its content. With `--soak` (or `--verify`) the
run ends with a check of every acknowledged write (GetMemory of each id, and a query per user for
its own content) and prints `lost writes: N, cross-user results: M`.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import multiprocessing
import os
import random
import threading
import time
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memsvc.bench.harness import BenchServer, percentile, user_ids
from memsvc.bench.synthetic import memory_texts, unique_queries

SOAK_DURATION_S = 240.0
SOAK_USERS = 100


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--address", default="", help="host:port of a running server; none starts one in-process")
    parser.add_argument(
        "--api-key",
        default=os.environ.get("MEMSVC_API_KEY", ""),
        help="API key with read and write (or $MEMSVC_API_KEY)",
    )
    parser.add_argument("--concurrency", type=int, default=8, help="calls in flight at once")
    parser.add_argument(
        "--duration-s",
        type=float,
        default=0.0,
        help=f"length of the mixed phase (default 20; soak {SOAK_DURATION_S:.0f})",
    )
    parser.add_argument(
        "--read-ratio", type=float, default=0.7, help="share of operations that read (Query, GetMemory)"
    )
    parser.add_argument("--users", type=int, default=0, help=f"users (default 20; soak {SOAK_USERS})")
    parser.add_argument("--memories-per-user", type=int, default=10, help="memories written per user before the mix")
    parser.add_argument("--write-batch", type=int, default=4, help="memories per AddMemories call in the mix")
    parser.add_argument("--soak", action="store_true", help="several minutes, then check every acknowledged write")
    parser.add_argument("--verify", action="store_true", help="check acknowledged writes and isolation at the end")
    parser.add_argument("--timeout-s", type=float, default=30.0, help="deadline of each call")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--json", type=Path, help="write the summary as JSON to this file")


def marker(user: str) -> str:
    """A word only this user's memories contain."""
    return "mk" + hashlib.sha256(user.encode()).hexdigest()[:10]


@dataclass
class Ledger:
    """What the run observed: latencies, statuses, acknowledged writes and isolation breaches."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    latencies_ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    codes: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    acknowledged: dict[str, dict[str, str]] = field(default_factory=lambda: defaultdict(dict))  # user -> id -> text
    cross_user: int = 0
    cross_examples: list[str] = field(default_factory=list)
    # Latencies and statuses count during the mixed phase only, not the preload or the final check.
    measuring: bool = False

    def record(self, rpc: str, latency_ms: float, code: str) -> None:
        with self.lock:
            if not self.measuring:
                return
            self.codes[rpc][code] += 1
            if code == "OK":
                self.latencies_ms[rpc].append(latency_ms)

    def crossed(self, asked: str, got_user: str, content: str) -> None:
        with self.lock:
            self.cross_user += 1
            if len(self.cross_examples) < 5:
                self.cross_examples.append(f"asked {asked}, got a memory of {got_user}: {content[:60]!r}")


class Client:
    """The three RPCs the load uses, each timed and recorded in the ledger."""

    def __init__(self, address: str, api_key: str, ledger: Ledger, timeout_s: float) -> None:
        import grpc

        from memsvc.v1 import query_service_pb2_grpc, write_service_pb2_grpc

        self._grpc = grpc
        self.channel = grpc.insecure_channel(address, options=[("grpc.max_receive_message_length", 64 << 20)])
        self.writes = write_service_pb2_grpc.WriteServiceStub(self.channel)  # type: ignore[no-untyped-call]
        self.queries = query_service_pb2_grpc.QueryServiceStub(self.channel)  # type: ignore[no-untyped-call]
        self.md = (("authorization", f"Bearer {api_key}"),)
        self.ledger = ledger
        self.timeout_s = timeout_s

    def _call(self, rpc: str, fn: Any, request: Any) -> Any:
        started = time.perf_counter()
        try:
            reply = fn(request, metadata=self.md, timeout=self.timeout_s)
        except self._grpc.RpcError as exc:
            self.ledger.record(rpc, (time.perf_counter() - started) * 1000, exc.code().name)
            return None
        self.ledger.record(rpc, (time.perf_counter() - started) * 1000, "OK")
        return reply

    def add(self, user: str, texts: list[str]) -> None:
        from memsvc.v1 import write_service_pb2

        request = write_service_pb2.AddMemoriesRequest(
            user_id=user, memories=[write_service_pb2.NewMemory(content=t, importance=0.8) for t in texts]
        )
        reply = self._call("AddMemories", self.writes.AddMemories, request)
        if reply is not None:
            with self.ledger.lock:
                for memory in reply.memories:
                    self.ledger.acknowledged[user][memory.id] = memory.content

    def query(self, user: str, text: str, limit: int = 10) -> list[Any]:
        from memsvc.v1 import memory_pb2, query_service_pb2

        request = query_service_pb2.QueryRequest(
            user_id=user, query=text, limit=limit, filter=memory_pb2.MemoryFilter(min_importance=0.0)
        )
        reply = self._call("Query", self.queries.Query, request)
        if reply is None:
            return []
        mark = marker(user)
        for ranked in reply.memories:
            if ranked.memory.user_id != user or mark not in ranked.memory.content:
                self.ledger.crossed(user, ranked.memory.user_id, ranked.memory.content)
        return list(reply.memories)

    def get(self, user: str, memory_id: str) -> Any:
        from memsvc.v1 import write_service_pb2

        reply = self._call(
            "GetMemory", self.writes.GetMemory, write_service_pb2.GetMemoryRequest(user_id=user, id=memory_id)
        )
        return None if reply is None else reply.memory

    def close(self) -> None:
        self.channel.close()


def user_text(user: str, text: str) -> str:
    return f"{text} ({marker(user)})"


@dataclass(frozen=True)
class Plan:
    address: str
    api_key: str
    users: list[str]
    memories_per_user: int
    duration_s: float
    concurrency: int
    read_ratio: float
    write_batch: int
    timeout_s: float
    seed: int
    verify: bool


@dataclass
class Outcome:
    """Picklable summary of a run (the driver may run in a child process)."""

    seconds: float
    operations: int
    latencies_ms: dict[str, list[float]]
    codes: dict[str, dict[str, int]]
    acknowledged: int
    lost: int
    cross_user: int
    cross_examples: list[str]
    lost_examples: list[str]
    users_without_own_result: int


def preload(client: Client, plan: Plan) -> None:
    def one(user: str) -> None:
        texts = memory_texts(plan.seed * 1_000_003 + zlib.crc32(user.encode()), plan.memories_per_user)
        for start in range(0, len(texts), 16):
            client.add(user, [user_text(user, t) for t in texts[start : start + 16]])

    with concurrent.futures.ThreadPoolExecutor(max_workers=plan.concurrency) as pool:
        list(pool.map(one, plan.users))


def mix(client: Client, plan: Plan) -> tuple[int, float]:
    """The measured phase: `concurrency` workers issuing reads and writes until the time is up."""
    stop_at = time.perf_counter() + plan.duration_s
    counter = [0]
    lock = threading.Lock()

    def worker(index: int) -> None:
        rng = random.Random(plan.seed * 7919 + index)
        queries = unique_queries(plan.seed * 31 + index)
        written = 0
        while time.perf_counter() < stop_at:
            user = rng.choice(plan.users)
            if rng.random() < plan.read_ratio:
                with client.ledger.lock:
                    known = list(client.ledger.acknowledged[user])
                if known and rng.random() < 0.2:
                    client.get(user, rng.choice(known))
                else:
                    client.query(user, f"{next(queries)} {marker(user)}")
            else:
                texts = memory_texts(plan.seed * 104_729 + index * 1_000_003 + written, plan.write_batch)
                written += 1
                client.add(user, [user_text(user, t) for t in texts])
            with lock:
                counter[0] += 1

    started = time.perf_counter()
    client.ledger.measuring = True
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=plan.concurrency) as pool:
            for f in [pool.submit(worker, i) for i in range(plan.concurrency)]:
                f.result()
    finally:
        client.ledger.measuring = False
    return counter[0], time.perf_counter() - started


def verify(client: Client, plan: Plan) -> tuple[int, list[str], int]:
    """(lost writes, examples, users whose own query found nothing): every acknowledged id must read back."""
    with client.ledger.lock:
        items = [(u, i, c) for u, ids in client.ledger.acknowledged.items() for i, c in ids.items()]
    lost: list[str] = []
    lost_lock = threading.Lock()

    def check(item: tuple[str, str, str]) -> None:
        user, memory_id, content = item
        for _ in range(3):  # a transient UNAVAILABLE is retried; NOT_FOUND or other content is a loss
            memory = client.get(user, memory_id)
            if memory is not None:
                break
            time.sleep(0.2)
        if memory is None or memory.content != content or memory.user_id != user:
            with lost_lock:
                lost.append(f"{user}/{memory_id}")

    def own(user: str) -> bool:
        with client.ledger.lock:
            contents = list(client.ledger.acknowledged[user].values())
        if not contents:
            return True
        probe = contents[len(contents) // 2]
        found = client.query(user, probe, limit=10)  # cross-user results are counted by query()
        return bool(found) and all(marker(user) in r.memory.content for r in found)

    with concurrent.futures.ThreadPoolExecutor(max_workers=plan.concurrency) as pool:
        list(pool.map(check, items))
        missing_own = sum(1 for ok in pool.map(own, plan.users) if not ok)
    return len(lost), lost[:5], missing_own


def drive(plan: Plan) -> Outcome:
    ledger = Ledger()
    client = Client(plan.address, plan.api_key, ledger, plan.timeout_s)
    try:
        preload(client, plan)
        operations, seconds = mix(client, plan)
        with ledger.lock:
            latencies = {rpc: list(v) for rpc, v in ledger.latencies_ms.items()}
            codes = {rpc: dict(c) for rpc, c in ledger.codes.items()}
        lost, lost_examples, missing_own = verify(client, plan) if plan.verify else (0, [], 0)
        acknowledged = sum(len(ids) for ids in ledger.acknowledged.values())
        return Outcome(
            seconds=seconds,
            operations=operations,
            latencies_ms=latencies,
            codes=codes,
            acknowledged=acknowledged,
            lost=lost,
            cross_user=ledger.cross_user,
            cross_examples=list(ledger.cross_examples),
            lost_examples=lost_examples,
            users_without_own_result=missing_own,
        )
    finally:
        client.close()


def drive_in_child(plan: Plan) -> Outcome:
    """Run the driver in its own process, so it never competes with an in-process server's GIL."""
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(drive, plan).result()


def summary(outcome: Outcome, plan: Plan) -> dict[str, Any]:
    rpcs: dict[str, Any] = {}
    for rpc in sorted(set(outcome.codes) | set(outcome.latencies_ms)):
        values = outcome.latencies_ms.get(rpc, [])
        rpcs[rpc] = {
            "ok": len(values),
            "per_s": round(len(values) / outcome.seconds, 1) if outcome.seconds > 0 else 0.0,
            "p50_ms": round(percentile(values, 50), 2),
            "p95_ms": round(percentile(values, 95), 2),
            "p99_ms": round(percentile(values, 99), 2),
            "errors": {code: n for code, n in outcome.codes.get(rpc, {}).items() if code != "OK"},
        }
    return {
        "users": len(plan.users),
        "memories_per_user": plan.memories_per_user,
        "concurrency": plan.concurrency,
        "read_ratio": plan.read_ratio,
        "write_batch": plan.write_batch,
        "duration_s": round(outcome.seconds, 2),
        "operations": outcome.operations,
        "operations_per_s": round(outcome.operations / outcome.seconds, 1) if outcome.seconds > 0 else 0.0,
        "rpcs": rpcs,
        "acknowledged_writes": outcome.acknowledged,
        "verified": plan.verify,
        "lost_writes": outcome.lost,
        "cross_user_results": outcome.cross_user,
        "users_without_own_result": outcome.users_without_own_result,
    }


def report(data: dict[str, Any], outcome: Outcome) -> str:
    lines = [
        f"load | {data['users']} users, {data['memories_per_user']} memories each before the mix | "
        f"concurrency {data['concurrency']} | read ratio {data['read_ratio']} | write batch {data['write_batch']}",
        f"  {data['operations']} operations in {data['duration_s']} s: {data['operations_per_s']} ops/s",
    ]
    for rpc, r in data["rpcs"].items():
        errors = ", ".join(f"{code} {n}" for code, n in sorted(r["errors"].items())) or "none"
        lines.append(
            f"  {rpc:<12} {r['ok']:>7} ok  {r['per_s']:>7}/s  p50 {r['p50_ms']:>8.1f} ms  "
            f"p95 {r['p95_ms']:>8.1f} ms  p99 {r['p99_ms']:>8.1f} ms  errors: {errors}"
        )
    lines.append(f"  acknowledged writes: {data['acknowledged_writes']}")
    if data["verified"]:
        lines.append(f"  users whose own query found nothing of theirs: {data['users_without_own_result']}")
        lines += [f"    lost: {e}" for e in outcome.lost_examples]
        lines += [f"    crossed: {e}" for e in outcome.cross_examples]
        lines.append(f"lost writes: {data['lost_writes']}, cross-user results: {data['cross_user_results']}")
    elif data["cross_user_results"]:
        lines.append(f"cross-user results: {data['cross_user_results']}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    duration_s = args.duration_s or (SOAK_DURATION_S if args.soak else 20.0)
    users = user_ids(args.users or (SOAK_USERS if args.soak else 20))
    bench = None if args.address else BenchServer.start()
    try:
        plan = Plan(
            address=args.address or (bench.address if bench else ""),
            api_key=args.api_key if args.address else (bench.api_key if bench else ""),
            users=users,
            memories_per_user=args.memories_per_user,
            duration_s=duration_s,
            concurrency=args.concurrency,
            read_ratio=args.read_ratio,
            write_batch=args.write_batch,
            timeout_s=args.timeout_s,
            seed=args.seed,
            verify=args.soak or args.verify,
        )
        outcome = drive_in_child(plan) if bench is not None else drive(plan)
    finally:
        if bench is not None:
            bench.stop()
    data = summary(outcome, plan)
    print(report(data, outcome), flush=True)
    if args.json:
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    failed = data["lost_writes"] or data["cross_user_results"] or data["users_without_own_result"]
    return 1 if failed else 0
