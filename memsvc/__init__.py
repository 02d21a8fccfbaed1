"""memsvc: a long-term memory service for AI assistants, served over gRPC."""

import os

# faiss (inside Milvus Lite) keeps an OpenMP thread pool in this process, and idle OpenMP threads
# spin by default, stealing the cores the embedder and the event loop need: on two cores a query's
# embedding took 200-600 ms instead of ~15 ms beside another spinning pool (docs/performance.md).
# Passive waiting yields the core. It must be set before faiss loads; an explicit value wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# NumPy's OpenBLAS splits a matrix product (Milvus Lite's search of several vectors at once, as
# the write review does) over every core, and its threads spin between calls, on the cores the
# embedder's passes need: writes of 64-memory batches 337-364 memories/s with it, 400-413 on one
# thread (docs/performance.md). The products here are small; one thread each is enough.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# gRPC's C core logs through absl straight to stderr, INFO included (a client's GOAWAY, for one);
# errors are what an operator needs. GRPC_VERBOSITY=INFO or DEBUG brings the rest back. It is
# read when grpc loads.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

__version__ = "0.1.0"
