"""Encode latency and throughput of the local embedder's runtimes: onnx (fp32) and onnx-int8.

Calls the blocking `encode` of each runtime directly (no service, no micro-batching queue):
the p50 of single short queries, and texts per second in batches of 16 and 64 synthetic
memories. The 1-minute load average is recorded beside every runtime, because other jobs
may share the cores; so is this process's CPU time per text, which contention inflates far
less than wall-clock time.

    .venv/bin/python tools/bench_embedder_runtimes.py [--runtimes onnx,onnx-int8] [--rounds 2]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runtimes", default="onnx,onnx-int8")
    parser.add_argument("--calls", type=int, default=300, help="single-query encodes per runtime")
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each batch measurement")
    parser.add_argument("--rounds", type=int, default=1, help="repeat every runtime this often, interleaved")
    parser.add_argument("--onnx-dir", type=Path, help="graph cache (default: a temporary directory)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    from memsvc.bench.harness import machine, percentile
    from memsvc.bench.synthetic import memory_texts, unique_queries
    from memsvc.embeddings.local import LocalEmbedder

    onnx_dir = args.onnx_dir or Path(tempfile.mkdtemp(prefix="memsvc-onnx-"))
    runtimes = args.runtimes.split(",")
    embedders = {r: LocalEmbedder(runtime=r, onnx_dir=onnx_dir) for r in runtimes}
    queries = unique_queries(11)
    memories = memory_texts(12, 64)
    rows: list[dict[str, Any]] = []
    for round_no, runtime in itertools.product(range(args.rounds), runtimes):
        embedder = embedders[runtime]
        load_before = os.getloadavg()[0]
        for _ in range(20):  # warm-up: first calls allocate
            embedder.encode([next(queries)])
        single: list[float] = []
        cpu_started = time.process_time()
        for _ in range(args.calls):
            text = next(queries)
            started = time.perf_counter()
            embedder.encode([text])
            single.append((time.perf_counter() - started) * 1000)
        single_cpu_ms = (time.process_time() - cpu_started) * 1000 / args.calls
        rates: dict[int, float] = {}
        cpu_per_text: dict[int, float] = {}
        for size in (16, 64):
            batch = memories[:size]
            embedder.encode(batch)
            count, started, cpu_started = 0, time.perf_counter(), time.process_time()
            while time.perf_counter() - started < args.seconds:
                embedder.encode(batch)
                count += size
            rates[size] = count / (time.perf_counter() - started)
            cpu_per_text[size] = (time.process_time() - cpu_started) * 1000 / count
        row = {
            "runtime": runtime,
            "round": round_no,
            "single_p50_ms": round(percentile(single, 50), 2),
            "single_p95_ms": round(percentile(single, 95), 2),
            "single_cpu_ms": round(single_cpu_ms, 2),
            "batch16_per_s": round(rates[16], 1),
            "batch64_per_s": round(rates[64], 1),
            "batch16_cpu_ms_per_text": round(cpu_per_text[16], 2),
            "batch64_cpu_ms_per_text": round(cpu_per_text[64], 2),
            "load_avg_1m": f"{load_before:.1f}-{os.getloadavg()[0]:.1f}",
        }
        rows.append(row)
        print(
            f"{runtime:10} p50 {row['single_p50_ms']:6.2f} ms (cpu {row['single_cpu_ms']:5.2f})  "
            f"p95 {row['single_p95_ms']:6.2f} ms  batch16 {row['batch16_per_s']:6.1f}/s "
            f"(cpu {row['batch16_cpu_ms_per_text']:5.2f} ms/text)  batch64 {row['batch64_per_s']:6.1f}/s "
            f"(cpu {row['batch64_cpu_ms_per_text']:5.2f} ms/text)  load {row['load_avg_1m']}",
            flush=True,
        )
    measures = [k for k in rows[0] if k not in ("runtime", "round", "load_avg_1m")]
    summary = {
        r: {k: statistics.median(float(x[k]) for x in rows if x["runtime"] == r) for k in measures} for r in runtimes
    }
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "rows": rows, "median": summary}, indent=2))


if __name__ == "__main__":
    main()
