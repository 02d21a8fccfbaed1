"""memsvc: a long-term memory service for AI assistants, served over gRPC."""

import os

# Torch (the embedder) and faiss (inside Milvus Lite) each keep an OpenMP thread pool in this
# process, and idle OpenMP threads spin by default, stealing the cores the other pool needs: on
# two cores a query's embedding took 200-600 ms instead of ~15 ms (docs/performance.md). Passive
# waiting yields the core. It must be set before either library loads; an explicit value wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
