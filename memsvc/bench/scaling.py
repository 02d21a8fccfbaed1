"""Scaling curves: query latency as memories per user and users grow (table and PNG plot)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from memsvc.bench.harness import (
    BenchServer,
    LatencySummary,
    add_milvus_uri_argument,
    load_memories,
    machine,
    milvus_server_uri,
    percentile,
    user_ids,
    vector_engine,
)


def _ints(text: str) -> list[int]:
    return [int(part.replace("_", "")) for part in text.split(",") if part.strip()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--memories", type=_ints, default=[1_000, 10_000], help="memories per user for the first curve (one user)"
    )
    parser.add_argument("--users", type=_ints, default=[10, 100, 1_000], help="user counts for the second curve")
    parser.add_argument("--fixed-memories", type=int, default=100, help="memories per user in the users curve")
    parser.add_argument("--queries", type=int, default=300, help="queries measured at each point")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument(
        "--embedding-cache",
        default="miss",
        choices=["hit", "miss"],
        help="whether measured queries find their embedding cached (the conversation curve asks the same "
        "questions at every point: miss runs it without the cache)",
    )
    parser.add_argument("--write-batch", type=int, default=128, help="memories per AddMemories call when loading")
    parser.add_argument("--plot", type=Path, default=Path("docs/scaling.png"), help="where to draw the PNG")
    parser.add_argument("--json", type=Path, help="write every point as JSON to this file")
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument(
        "--conversation-memories",
        type=_ints,
        default=[],
        help="memories of one user grown through AddConversation of real dialogue, for the third curve "
        "(memsvc/bench/grow.py; slow: about 2 ms of server CPU per memory written)",
    )
    parser.add_argument("--data", type=Path, default=Path("../shared/data"), help="LoCoMo and MemoryBank files")
    parser.add_argument("--probe-questions", type=int, default=100, help="LoCoMo questions asked at each point")
    parser.add_argument(
        "--add-sessions", type=int, default=10, help="20-turn AddConversation calls timed at each point"
    )
    add_milvus_uri_argument(parser)


def _point(curve: str, users: int, per_user: int, summary: LatencySummary, load_s: float) -> dict[str, Any]:
    return {
        "curve": curve,
        "users": users,
        "memories_per_user": per_user,
        "p50_ms": round(summary.p50_ms, 3),
        "p95_ms": round(summary.p95_ms, 3),
        "p99_ms": round(summary.p99_ms, 3),
        "qps": round(summary.qps, 1),
        "recall_p50_ms": round(summary.stages_ms.get("recall", 0.0), 3),
        "stages_ms": {k: round(v, 3) for k, v in summary.stages_ms.items()},
        "queries": summary.count,
        "errors": summary.errors,
        "load_s": round(load_s, 1),
        "load_avg_1m": machine()["load_avg_1m"],
    }


def _measure(bench: BenchServer, users: list[str], args: argparse.Namespace, seed: int) -> LatencySummary:
    from memsvc.bench.harness import drive_queries
    from memsvc.bench.query import query_requests

    warmup, measured = query_requests(users, args.queries, args.embedding_cache, seed)
    result = drive_queries(
        bench.address, bench.api_key, warmup, measured, concurrency=args.concurrency, max_seconds=120.0
    )
    return LatencySummary.of(result)


def stored_memories(bench: BenchServer, user: str) -> int:
    from memsvc.domain.models import Namespace

    namespace = Namespace("bench", "default", "development", user)  # BenchServer's key
    return int(bench.loop.run(bench.components.index.count(namespace)))


def memories_curve(args: argparse.Namespace, points: list[dict[str, Any]]) -> None:
    """One user whose partition grows through each size in --memories."""
    bench = BenchServer.start(milvus_uri=args.milvus_uri)
    try:
        user = user_ids(1)
        loaded = 0
        for step, target in enumerate(sorted(args.memories)):
            started = time.perf_counter()
            load_memories(
                bench.address,
                bench.api_key,
                user,
                target - loaded,
                batch=args.write_batch,
                seed=args.seed + step,
            )
            bench.settle()
            loaded = target
            summary = _measure(bench, user, args, args.seed + 100 + step)
            points.append(_point("memories", 1, target, summary, time.perf_counter() - started))
            # The synthetic texts repeat (templates): the write path confirms a repeat instead of
            # storing it again, so the user holds fewer memories than were written.
            points[-1]["stored"] = stored_memories(bench, user[0])
            _print_point(points[-1])
    finally:
        bench.stop()


def conversation_curve(args: argparse.Namespace, points: list[dict[str, Any]]) -> None:
    """One user whose history grows through AddConversation, measured at each --conversation-memories."""
    from memsvc.bench.grow import GrowingUser, measure_point

    # The probe questions are asked again at every point: with the embedding cache on, every
    # point after the first would skip the embedding that the first one pays.
    uncached: dict[str, Any] = {"embedding_cache_entries": 0} if args.embedding_cache == "miss" else {}
    bench = BenchServer.start(milvus_uri=args.milvus_uri, **uncached)
    grower = GrowingUser(bench, args.data, "grown-user", args.seed)
    try:
        # The empty store's AddConversation, the reference for every later point.
        empty_ms = grower.add_conversation_ms(args.add_sessions)
        grower.write_probe()
        bench.settle()
        for target in sorted(args.conversation_memories):
            before = grower.count()
            memories, load_s = grower.grow_to(target)
            growth = measure_point(
                grower, bench, memories, load_s, queries=args.probe_questions, sessions=args.add_sessions
            )
            summary = growth.query
            point = _point("conversation", 1, memories, summary, load_s)
            point.update(
                memories_per_s=round((memories - before) / load_s, 1) if load_s > 0 else 0.0,
                turns_written=growth.turns_written,
                probe_recall=growth.recall,
                add_conversation_p50_ms=round(growth.add_conversation_p50_ms, 1),
                add_conversation_p95_ms=round(growth.add_conversation_p95_ms, 1),
                add_conversation_empty_p50_ms=round(percentile(empty_ms, 50), 1),
                add_conversation_new_user_p50_ms=round(growth.add_conversation_new_user_p50_ms, 1),
                disk_bytes=growth.disk_bytes,
                disk_bytes_per_memory={k: round(v / max(memories, 1)) for k, v in growth.disk_bytes.items()},
            )
            points.append(point)
            _print_point(point)
            print(
                f"    recall {growth.recall}; AddConversation ({args.add_sessions} x 20 turns) p50 "
                f"{point['add_conversation_p50_ms']} ms (the same sessions for a new user "
                f"{point['add_conversation_new_user_p50_ms']} ms; the opening sessions on the empty store "
                f"{point['add_conversation_empty_p50_ms']} ms); "
                f"{point['memories_per_s']} memories/s written; bytes per memory {point['disk_bytes_per_memory']}",
                flush=True,
            )
    finally:
        grower.close()
        bench.stop()


def users_curve(args: argparse.Namespace, points: list[dict[str, Any]]) -> None:
    """Users added until each count in --users, every one with --fixed-memories memories."""
    bench = BenchServer.start(milvus_uri=args.milvus_uri)
    try:
        loaded = 0
        for step, target in enumerate(sorted(args.users)):
            started = time.perf_counter()
            load_memories(
                bench.address,
                bench.api_key,
                user_ids(target - loaded, start=loaded),
                args.fixed_memories,
                batch=args.write_batch,
                seed=args.seed,
            )
            bench.settle()
            loaded = target
            summary = _measure(bench, user_ids(target), args, args.seed + 200 + step)
            points.append(_point("users", target, args.fixed_memories, summary, time.perf_counter() - started))
            _print_point(points[-1])
    finally:
        bench.stop()


HEADER = f"{'curve':<13}{'users':>7}{'mem/user':>10}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'recall p50':>12}{'q/s':>8}"


def _row(p: dict[str, Any]) -> str:
    return (
        f"{p['curve']:<13}{p['users']:>7}{p['memories_per_user']:>10}{p['p50_ms']:>9.2f}{p['p95_ms']:>9.2f}"
        f"{p['p99_ms']:>9.2f}{p['recall_p50_ms']:>12.2f}{p['qps']:>8.1f}"
    )


def _print_point(p: dict[str, Any]) -> None:
    stored = f", {p['stored']:,} stored" if "stored" in p else ""
    print(f"  {_row(p)}  (loaded in {p['load_s']:.0f} s{stored})", flush=True)


def plot(points: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    for ax, curve, x_key, title in (
        (axes[0], "memories", "memories_per_user", "One user, growing partition"),
        (axes[1], "users", "users", "Growing users, fixed memories per user"),
        (axes[2], "conversation", "memories_per_user", "One user grown by AddConversation"),
    ):
        rows = sorted((p for p in points if p["curve"] == curve), key=lambda p: p[x_key])
        if not rows:
            ax.set_visible(False)
            continue
        xs = [p[x_key] for p in rows]
        for key, label, style in (
            ("p50_ms", "end-to-end p50", "o-"),
            ("p95_ms", "end-to-end p95", "s--"),
            ("p99_ms", "end-to-end p99", "^:"),
            ("recall_p50_ms", "recall stage p50", "d-"),
        ):
            ax.plot(xs, [p[key] for p in rows], style, label=label)
        ax.set_xscale("log")
        ax.minorticks_off()
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{x:,}" for x in xs])
        ax.set_xlabel(f"users ({rows[0]['memories_per_user']} each)" if curve == "users" else "memories per user")
        ax.set_ylabel("latency (ms)")
        ax.set_ylim(bottom=0)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("memsvc Query (direct mode, gRPC, embedded default)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    points: list[dict[str, Any]] = []
    args.milvus_uri = milvus_server_uri(args.milvus_uri)  # one engine for both curves and the report
    engine = vector_engine(args.milvus_uri)
    print(f"vector store: {engine['engine']} {engine['milvus_uri']}".rstrip())
    print(HEADER)
    if args.memories:
        memories_curve(args, points)
    if args.users:
        users_curve(args, points)
    if args.conversation_memories:
        conversation_curve(args, points)
    print()
    print(HEADER)
    for p in points:
        print(_row(p))
    plot(points, args.plot)
    print(f"plot: {args.plot}")
    if args.json:
        args.json.write_text(json.dumps([{**p, **engine} for p in points], indent=2) + "\n")
    return 0 if points and all(p["queries"] for p in points) else 1
