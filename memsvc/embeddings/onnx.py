"""The bundled model on ONNX Runtime, fp32 or int8, its graph built once per machine and cached.

The graph (memsvc/embeddings/minilm_graph.py) is built from the model folder's weights, with the
rest of its sentence-transformers pipeline inside, so it returns finished unit vectors. Graphs
are cached on disk under a key of the model folder's files and the recipe; a changed model gets
a new file. Each file is written to a temporary name and renamed, so a crash or a concurrent
start never leaves a half-written model where a reader looks.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from memsvc.embeddings.base import Vector
from memsvc.embeddings.minilm_graph import INPUTS, build_sentence_encoder

log = logging.getLogger(__name__)

OnnxVariant = Literal["fp32", "int8"]

# Bump when the graph or the quantisation recipe changes: old cache files are ignored.
_RECIPE = "minilm-graph-v1;int8-matmul-per-channel-ffn-out-fp32-v1"
# The files that define the model's function; their names, sizes and mtimes key the cache.
_MODEL_FILES = (
    "config.json",
    "model.safetensors",
    "pytorch_model.bin",
    "modules.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
    "tokenizer.json",
    "tokenizer_config.json",
)


@dataclass(frozen=True)
class OnnxExport:
    path: Path
    created: bool  # False when an earlier export was reused


@dataclass(frozen=True)
class PipelineConfig:
    """What the sentence-transformers pipeline of the model folder does around the transformer."""

    max_seq_length: int
    dimension: int


def read_pipeline(model_dir: Path) -> PipelineConfig:
    """The folder's pipeline, checked to be the one the export reproduces (Transformer, mean, Normalize)."""
    modules = json.loads((model_dir / "modules.json").read_text())
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    if kinds != ["Transformer", "Pooling", "Normalize"]:
        raise ValueError(f"{model_dir}: the ONNX runtime reproduces Transformer, Pooling, Normalize; found {kinds}")
    pooling_dir = next(m["path"] for m in modules if m["type"].endswith("Pooling"))
    pooling = json.loads((model_dir / pooling_dir / "config.json").read_text())
    modes = sorted(k for k, v in pooling.items() if k.startswith("pooling_mode_") and v)
    if modes != ["pooling_mode_mean_tokens"]:
        raise ValueError(f"{model_dir}: the ONNX runtime reproduces mean pooling only; found {modes}")
    st_config = json.loads((model_dir / "sentence_bert_config.json").read_text())
    return PipelineConfig(int(st_config["max_seq_length"]), int(pooling["word_embedding_dimension"]))


def cache_key(model_dir: Path, variant: OnnxVariant) -> str:
    parts = [_RECIPE, variant, str(model_dir.resolve())]
    for name in _MODEL_FILES:
        path = model_dir / name
        if path.exists():
            stat = path.stat()
            parts.append(f"{name}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def ensure_export(model_dir: Path, cache_dir: Path, variant: OnnxVariant) -> OnnxExport:
    """The cached ONNX file of the model and variant, building it on a miss."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / f"{model_dir.name}-{variant}-{cache_key(model_dir, variant)}.onnx"
    if target.exists():
        return OnnxExport(target, created=False)
    log.info("preparing the embedding model for ONNX Runtime (%s), once per machine, in %s", variant, cache_dir)
    started = time.perf_counter()
    model = build_sentence_encoder(model_dir, variant)
    with _atomic_file(target) as tmp:
        tmp.write_bytes(model)
    log.info("prepared the embedding model (%s) in %.1f s", variant, time.perf_counter() - started)
    return OnnxExport(target, created=True)


@contextmanager
def _atomic_file(target: Path) -> Iterator[Path]:
    """A temporary path beside `target`, renamed onto it when the body succeeds, removed if not."""
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        tmp.chmod(0o644)  # mkstemp's 0600 would hide a graph built by root (an image build) from the service user
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


class OnnxRuntime:
    """Encodes with ONNX Runtime on the CPU; tokenises with the model folder's fast tokenizer."""

    def __init__(
        self, model_dir: Path, cache_dir: Path, *, variant: OnnxVariant, batch_size: int, threads: int
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        pipeline = read_pipeline(model_dir)
        self.export = ensure_export(model_dir, cache_dir, variant)
        self._dimension = pipeline.dimension
        # int8 quantises each pass's activations with one scale for the whole pass, so a text
        # batched with others got another vector than alone (cosine down to 0.99): a query's
        # results then depended on who else was asking. Each text runs alone, which costs no
        # more here (20 LoCoMo turns 83 ms alone against 89 ms in passes; 4 short queries 6.6
        # against 6.0 ms) and gives every text one vector.
        self._pass_size = 1 if variant == "int8" else batch_size
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        # tokenizer.json of this model carries truncation and fixed padding to 128; the ST pipeline
        # truncates at max_seq_length (256 word pieces, special tokens included) and pads per batch.
        tokenizer.enable_truncation(max_length=pipeline.max_seq_length)
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        options = ort.SessionOptions()
        # One thread per forward pass, and passes side by side on `lanes` threads (a session runs
        # concurrently from several threads). Splitting one short query's pass over two threads
        # cost 50% more CPU for no gain in latency (3.4 against 3.2 ms; 4.7 against 3.2 ms of
        # CPU); a batch of 64 split in two passes took 79 ms against 102 ms on two intra-op threads.
        self._lanes = threads or _usable_cpus()
        self._pool = (
            ThreadPoolExecutor(max_workers=self._lanes - 1, thread_name_prefix="embed-lane")
            if self._lanes > 1
            else None
        )
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Idle pool threads would spin on the cores Milvus Lite and gRPC need, as OpenMP's did
        # (memsvc/__init__.py); they sleep instead.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3  # warnings only, and those ONNX Runtime prints for fused initializers are noise
        self._session = ort.InferenceSession(str(self.export.path), options, providers=["CPUExecutionProvider"])

    @property
    def dimension(self) -> int:
        return self._dimension

    def encode(self, texts: Sequence[str]) -> list[Vector]:
        if not texts:
            return []
        encodings = self._tokenizer.encode_batch(list(texts))
        lengths = [len(e.ids) for e in encodings]
        out: list[Vector] = [np.empty(0, dtype=np.float32)] * len(texts)

        def run(passes: list[list[int]]) -> None:
            for chunk in passes:
                width = lengths[chunk[0]]
                feeds = {name: np.zeros((len(chunk), width), dtype=np.int64) for name in INPUTS}
                for row, i in enumerate(chunk):
                    e = encodings[i]
                    feeds["input_ids"][row, : lengths[i]] = e.ids
                    feeds["attention_mask"][row, : lengths[i]] = e.attention_mask
                    feeds["token_type_ids"][row, : lengths[i]] = e.type_ids
                matrix: npt.NDArray[Any] = self._session.run(None, feeds)[0]
                for row, i in enumerate(chunk):
                    out[i] = np.asarray(matrix[row], dtype=np.float32)

        first, *others = lanes_of(length_chunks(lengths, self._pass_size), lengths, self._lanes)
        # The calling thread takes one lane itself: a single query never changes threads.
        waiting = [self._pool.submit(run, lane) for lane in others] if self._pool is not None else []
        try:
            run(first)
        finally:
            wait(waiting)  # no lane outlives the call, even when one failed
        for future in waiting:
            future.result()
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


# A text joins a forward pass only if it fills at least this share of the pass's width.
_MIN_FILL = 0.8


def length_chunks(lengths: Sequence[int], batch_size: int, min_fill: float = _MIN_FILL) -> list[list[int]]:
    """Positions of texts (by token count) grouped into forward passes, longest first.

    Every row of a pass is padded to its longest text, and the CPU computes the padding like
    real tokens: in one pass over a LoCoMo session's 17 turns (4 to 102 word pieces), 60% of
    the tokens were padding. Texts of similar length go together, up to `batch_size`; the padding is masked,
    so a text's vector does not depend on its companions (within float rounding, 1e-7).
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    chunks: list[list[int]] = []
    for i in order:
        current = chunks[-1] if chunks else None
        if current is None or len(current) >= batch_size or lengths[i] < min_fill * lengths[current[0]]:
            chunks.append([i])
        else:
            current.append(i)
    return chunks


# A pass is split across lanes only while each part keeps at least this many texts: smaller
# passes cost more per text than the idle core saves.
_MIN_PASS_ROWS = 4


def lanes_of(passes: list[list[int]], lengths: Sequence[int], lanes: int) -> list[list[list[int]]]:
    """The passes dealt to at most `lanes` threads with about equal work (tokens, padding
    included), the largest first; a pass holding more than one lane's share is halved first."""

    def work(chunk: list[int]) -> int:
        return len(chunk) * lengths[chunk[0]]

    passes = [list(p) for p in passes]
    share = sum(work(p) for p in passes) / lanes
    while lanes > 1:
        largest = max(passes, key=work)
        if work(largest) <= share or len(largest) < 2 * _MIN_PASS_ROWS:
            break
        passes.remove(largest)
        half = len(largest) // 2
        passes += [largest[:half], largest[half:]]
    dealt: list[list[list[int]]] = [[] for _ in range(min(lanes, len(passes)))]
    load = [0] * len(dealt)
    for chunk in sorted(passes, key=work, reverse=True):
        lane = load.index(min(load))
        dealt[lane].append(chunk)
        load[lane] += work(chunk)
    return dealt


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
