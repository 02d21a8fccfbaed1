"""Query latency and throughput through gRPC, per stage, against the floor measured in the same run."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from memsvc.bench.cpu import CpuBreakdown, ms_per, ms_per_unit, process_tree_cpu
from memsvc.bench.harness import (
    QUERY_MODES,
    BenchServer,
    Floor,
    LatencySummary,
    add_milvus_uri_argument,
    drive_queries,
    load_memories,
    machine,
    measure_connections,
    measure_floor,
    milvus_server_uri,
    percentile,
    user_ids,
    vector_engine,
)
from memsvc.bench.synthetic import unique_queries
from memsvc.config import load_settings
from memsvc.tls import add_client_tls_arguments, client_tls_of

STAGES = ("scope", "embed", "recall", "hydrate", "rank", "bookkeep")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--users", type=int, default=100, help="users to create")
    parser.add_argument("--memories-per-user", type=int, default=1000, help="memories written per user")
    parser.add_argument("--concurrency", type=int, default=1, help="queries in flight at once")
    parser.add_argument("--mode", default="direct", choices=QUERY_MODES, help="query mode")
    parser.add_argument(
        "--embedding-cache",
        default="miss",
        choices=["hit", "miss"],
        help="hit: repeat query texts embedded before; miss: a fresh text every query",
    )
    parser.add_argument("--queries", type=int, default=1000, help="queries to measure (after a warm-up)")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="stop measuring after this long")
    parser.add_argument("--floor-samples", type=int, default=200, help="direct calls measured for the floor")
    parser.add_argument("--limit", type=int, default=10, help="results per query")
    parser.add_argument("--write-batch", type=int, default=64, help="memories per AddMemories call when loading")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, help="write the summary as JSON to this file")
    add_milvus_uri_argument(parser)
    parser.add_argument(
        "--address",
        help="drive a running server (host:port) instead of starting one, such as `memsvc serve` with "
        "MEMSVC_WORKERS over a --data-dir an earlier run loaded; latency and throughput only",
    )
    parser.add_argument("--api-key", help="with --address: a key of tenant `bench` that may read (or $MEMSVC_API_KEY)")
    parser.add_argument(
        "--server-pid", type=int, help="with --address: the server's process; its CPU and its workers' is reported"
    )
    parser.add_argument(
        "--milvus-pid",
        type=int,
        help="with --address: the Milvus server's process (and its children) on this machine; its CPU per "
        "query is reported beside the service's and this client's, the machine's whole cost of a query",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="keep the server's data here; a later run with the same users, memories and seed reuses the load",
    )
    # With --address: reach the server over TLS (the connections' set-up cost is then reported too).
    add_client_tls_arguments(parser)


def query_requests(
    users: list[str], count: int, embedding_cache: str, seed: int, hot_texts: int = 100
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(warm-up, measured) request lists of (user, text).

    On a miss every measured text is new. On a hit the measured texts come from a small set the
    warm-up embedded, each asked for a random user (the embedding cache is keyed by text alone).
    """
    rng = random.Random(seed)
    texts = unique_queries(seed)
    if embedding_cache == "hit":
        hot = list(itertools.islice(texts, hot_texts))
        warmup = [(rng.choice(users), t) for t in hot]
        measured = [(rng.choice(users), rng.choice(hot)) for _ in range(count)]
    else:
        warmup = [(rng.choice(users), t) for t in itertools.islice(texts, 20)]
        measured = [(rng.choice(users), t) for t in itertools.islice(texts, count)]
    return warmup, measured


def measure(
    bench: BenchServer,
    users: list[str],
    *,
    queries: int,
    concurrency: int,
    embedding_cache: str,
    mode: str = "direct",
    limit: int = 10,
    max_seconds: float = 60.0,
    floor_samples: int = 200,
    seed: int = 7,
) -> tuple[LatencySummary, Floor, CpuBreakdown]:
    """Drive queries over `users` already loaded, then measure the floor on fresh texts."""
    warmup, measured = query_requests(users, queries, embedding_cache, seed)
    bench.rpc_times.query_ms.clear()
    bench.cpu.open_after(len(warmup))
    result = drive_queries(
        bench.address,
        bench.api_key,
        warmup,
        measured,
        concurrency=concurrency,
        mode=mode,
        limit=limit,
        max_seconds=max_seconds,
    )
    # Server-side time of the measured calls (the warm-up calls come first).
    server_ms = bench.rpc_times.query_ms[len(warmup) :]
    cpu = bench.cpu.close()
    summary = replace(LatencySummary.of(result), server_p50_ms=percentile(server_ms, 50))
    rng = random.Random(seed + 1)
    floor_texts = itertools.islice(unique_queries(seed + 1_000), floor_samples)
    pairs = [(rng.choice(users), t) for t in floor_texts]
    k = max(bench.components.settings.recall_candidates, limit * 3)
    floor = measure_floor(bench, pairs, embed=embedding_cache == "miss", k=k)
    return summary, floor, cpu


def cpu_per_query(cpu: CpuBreakdown, concurrency: int) -> dict[str, Any]:
    """Milliseconds of server CPU per query: in all, per thread group, and per stage plus what
    lies outside the stages (gRPC, the interceptor and its span, request and response
    conversion) where a stage's window holds its own work alone: one query at a time, in a mode
    that runs its stages one after another."""
    if not cpu.queries:
        return {"total": 0.0, "threads": {}, "stages": {}}

    stages: dict[str, float] = {}
    if concurrency == 1 and cpu.stages:
        ordered = [s for s in STAGES if s in cpu.stages] + sorted(s for s in cpu.stages if s not in STAGES)
        stages = {s: ms_per(cpu.stages[s], cpu.queries) for s in ordered}
        stages["outside the stages"] = ms_per(cpu.seconds - sum(cpu.stages.values()), cpu.queries)
    threads = ms_per_unit(cpu.threads, cpu.queries)
    return {"total": ms_per(cpu.seconds, cpu.queries), "threads": threads, "stages": stages}


def latency_fields(summary: LatencySummary) -> dict[str, Any]:
    """What the client measured: latency percentiles, throughput, stage p50s, calls, errors."""
    return {
        "p50_ms": round(summary.p50_ms, 3),
        "p95_ms": round(summary.p95_ms, 3),
        "p99_ms": round(summary.p99_ms, 3),
        "qps": round(summary.qps, 1),
        "stages_ms": {k: round(v, 3) for k, v in summary.stages_ms.items()},
        "queries": summary.count,
        "errors": summary.errors,
    }


def latency_line(data: dict[str, Any]) -> str:
    return (
        f"  latency  p50 {data['p50_ms']:.2f} ms  p95 {data['p95_ms']:.2f} ms  p99 {data['p99_ms']:.2f} ms  "
        f"({data['queries']} queries, {data['qps']:.1f} queries/s)"
    )


def report(
    summary: LatencySummary,
    floor: Floor,
    cpu: CpuBreakdown,
    *,
    users: int,
    memories_per_user: int,
    concurrency: int,
    mode: str,
    embedding_cache: str,
) -> dict[str, Any]:
    return {
        **latency_fields(summary),
        "floor_p50_ms": round(floor.p50_ms, 3),
        "ratio_p50": round(summary.p50_ms / floor.p50_ms, 3) if floor.p50_ms > 0 else None,
        "server_p50_ms": round(summary.server_p50_ms, 3),
        # CPU the server process spent per measured query (all its threads): unlike latency, this
        # does not grow when other processes share the cores.
        "server_cpu_ms_per_query": cpu_per_query(cpu, concurrency),
        "users": users,
        "memories_per_user": memories_per_user,
        "concurrency": concurrency,
        "mode": mode,
        "embedding_cache": embedding_cache,
        "floor_ms": {
            "embed_p50": round(floor.embed_p50_ms, 3),
            "search_p50": round(floor.search_p50_ms, 3),
            "fetch_p50": round(floor.fetch_p50_ms, 3),
            "samples": floor.samples,
        },
        "machine": machine(),
    }


def print_report(data: dict[str, Any], out: Any = None) -> None:
    out = out or sys.stdout
    print(
        f"query {data['mode']} | {data.get('engine', 'milvus-lite')} | "
        f"{data['users']} users x {data['memories_per_user']} memories | "
        f"concurrency {data['concurrency']} | embedding cache {data['embedding_cache']}",
        file=out,
    )
    print(latency_line(data), file=out)
    stages = data["stages_ms"]
    ordered = [s for s in STAGES if s in stages] + [s for s in stages if s not in STAGES]
    print("  stages p50  " + "  ".join(f"{s} {stages[s]:.2f}" for s in ordered) + " (ms)", file=out)
    cpu = data["server_cpu_ms_per_query"]
    print(
        f"  server-side p50 {data['server_p50_ms']:.2f} ms (the Query span; the rest is gRPC and the client); "
        f"server CPU {cpu['total']:.2f} ms per query",
        file=out,
    )
    if data["concurrency"] == 1 and not cpu["stages"]:
        print("  CPU by stage   not measured: this mode runs stages side by side", file=out)
    for label, parts in (("thread", cpu["threads"]), ("stage", cpu["stages"])):
        if parts:
            shares = "  ".join(f"{k} {ms:.2f}" for k, ms in parts.items())
            print(f"  CPU by {label:<7}{shares} (ms/query)", file=out)
    f = data["floor_ms"]
    print(
        f"  floor    p50 {data['floor_p50_ms']:.2f} ms (embed {f['embed_p50']:.2f} + search {f['search_p50']:.2f} "
        f"+ fetch {f['fetch_p50']:.2f}); service / floor = {data['ratio_p50']}",
        file=out,
    )
    if data["errors"]:
        print(f"  errors   {data['errors']}", file=out)


def machine_budget(server_ms: float | None, milvus_ms: float | None, client_ms: float) -> dict[str, float]:
    """What a query costs the whole machine when the service, Milvus and the load generator
    share its cores, and the throughput that cost allows them (empty without both servers' CPU)."""
    if server_ms is None or milvus_ms is None:
        return {}
    total = server_ms + milvus_ms + client_ms
    cores = os.cpu_count() or 1
    return {
        "machine_cpu_ms_per_query": round(total, 3),
        "machine_qps_ceiling": round(cores * 1000 / total, 1) if total > 0 else 0.0,
    }


def run_against(args: argparse.Namespace) -> int:
    """Drive a server someone else started (`--address`): its latency, throughput and, with
    `--server-pid` and `--milvus-pid`, the CPU of their process trees per query; the client's
    own CPU always (warm-up included in each)."""
    key = args.api_key or os.environ.get("MEMSVC_API_KEY", "")
    if not key:
        print("--address needs --api-key or MEMSVC_API_KEY", file=sys.stderr)
        return 2
    users = user_ids(args.users)
    warmup, measured = query_requests(users, args.queries, args.embedding_cache, args.seed)
    tls = client_tls_of(args, load_settings(args.config))
    connections = measure_connections(args.address, tls)
    before = process_tree_cpu(args.server_pid) if args.server_pid else 0.0
    milvus_before = process_tree_cpu(args.milvus_pid) if args.milvus_pid else 0.0
    result = drive_queries(
        args.address,
        key,
        warmup,
        measured,
        concurrency=args.concurrency,
        mode=args.mode,
        limit=args.limit,
        max_seconds=args.max_seconds,
        tls=tls,
    )
    summary = LatencySummary.of(result)
    calls = len(warmup) + len(result.samples)
    cpu_ms = ms_per(process_tree_cpu(args.server_pid) - before, calls) if args.server_pid and calls else None
    milvus_ms = ms_per(process_tree_cpu(args.milvus_pid) - milvus_before, calls) if args.milvus_pid else None
    client_ms = ms_per(result.client_cpu_s, calls)
    data: dict[str, Any] = {
        "address": args.address,
        "tls": tls is not None,
        **latency_fields(summary),
        "server_cpu_ms_per_query": cpu_ms,
        "milvus_cpu_ms_per_query": milvus_ms,
        "client_cpu_ms_per_query": client_ms,
        "connection_first_call_p50_ms": round(connections.first_call_p50_ms, 3),
        "connection_next_call_p50_ms": round(connections.next_call_p50_ms, 3),
        **machine_budget(cpu_ms, milvus_ms, client_ms),
        "users": args.users,
        "concurrency": args.concurrency,
        "mode": args.mode,
        "embedding_cache": args.embedding_cache,
        "machine": machine(),
    }
    print(
        f"query {args.mode} | the server at {args.address} ({'TLS' if tls else 'plaintext'}) | {args.users} users | "
        f"concurrency {args.concurrency} | embedding cache {args.embedding_cache}"
    )
    print(latency_line(data))
    print(
        f"  a new connection's first call {connections.first_call_p50_ms:.2f} ms p50, its next "
        f"{connections.next_call_p50_ms:.2f} ms: {connections.setup_ms:.2f} ms to set it up"
    )
    if cpu_ms is not None:
        print(f"  server CPU {cpu_ms:.2f} ms per query (process {args.server_pid} and its children)")
    if milvus_ms is not None:
        print(f"  Milvus CPU {milvus_ms:.2f} ms per query (process {args.milvus_pid} and its children)")
    print(f"  client CPU {client_ms:.2f} ms per query (this benchmark's load generator)")
    if "machine_cpu_ms_per_query" in data:
        print(
            f"  the machine's CPU per query {data['machine_cpu_ms_per_query']:.2f} ms (service + Milvus + client): "
            f"at most {data['machine_qps_ceiling']:.0f} queries/s on its {os.cpu_count()} cores"
        )
    if summary.errors:
        print(f"  errors   {summary.errors}")
    if args.json:
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    return 0 if summary.count and not summary.errors else 1


def run(args: argparse.Namespace) -> int:
    if args.address:
        return run_against(args)
    milvus_uri = milvus_server_uri(args.milvus_uri)
    marker = {
        "users": args.users,
        "memories_per_user": args.memories_per_user,
        "seed": args.seed,
        "milvus_uri": milvus_uri,
    }
    marker_path = args.data_dir / "bench-load.json" if args.data_dir else None
    reuse = marker_path is not None and marker_path.exists() and json.loads(marker_path.read_text()) == marker
    engine = vector_engine(milvus_uri)
    print(
        f"starting an in-process server with {args.users} x {args.memories_per_user} memories on "
        f"{engine['engine']} {engine['milvus_uri']}".rstrip(),
        flush=True,
    )
    bench = BenchServer.start(args.data_dir, milvus_uri=milvus_uri)
    try:
        users = user_ids(args.users)
        if reuse:
            print(f"  reusing the memories loaded in {args.data_dir}", flush=True)
        else:
            load = load_memories(
                bench.address, bench.api_key, users, args.memories_per_user, batch=args.write_batch, seed=args.seed
            )
            print(f"  loaded {load.memories} memories in {load.seconds:.1f} s ({load.rate:.0f}/s)", flush=True)
            if marker_path is not None:
                marker_path.write_text(json.dumps(marker))
        bench.settle()
        summary, floor, cpu = measure(
            bench,
            users,
            queries=args.queries,
            concurrency=args.concurrency,
            embedding_cache=args.embedding_cache,
            mode=args.mode,
            limit=args.limit,
            max_seconds=args.max_seconds,
            floor_samples=args.floor_samples,
            seed=args.seed,
        )
    finally:
        bench.stop()
    data = report(
        summary,
        floor,
        cpu,
        users=args.users,
        memories_per_user=args.memories_per_user,
        concurrency=args.concurrency,
        mode=args.mode,
        embedding_cache=args.embedding_cache,
    )
    data.update(engine)
    print_report(data)
    if args.json:
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    return 0 if summary.count else 1
