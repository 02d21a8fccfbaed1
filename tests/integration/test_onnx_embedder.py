"""The ONNX runtimes of the local embedder: the torch model's vectors, exported once, atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memsvc.embeddings import onnx as onnx_module
from memsvc.embeddings.local import TorchRuntime, bundled_model_path, model_version
from memsvc.embeddings.onnx import OnnxRuntime, cache_key, ensure_export, read_pipeline

pytestmark = pytest.mark.integration

LONG = " ".join(f"word{i} of a very long diary entry about trains, weather and cooking" for i in range(60))
MIDDLE = "We walked along the river and talked about the new job, the move and the garden. " * 8
TEXTS = [
    "",
    "   ",
    "hello",
    "I prefer window seats on long flights",
    "what did Caroline do on 7 May 2023?",
    "Ünïcödé café naïve — 東京で寿司を食べた 🎉",
    "a\nb\tc  d",
    "1234567890 !!! ??? $$$",
    "Melanie: I went camping with my kids last weekend, it was great!",
    "x" * 1000,
    MIDDLE,  # between 128 and 256 word pieces: tokenizer.json's own truncation (128) must not apply
    LONG,  # beyond 256 word pieces: truncated as sentence-transformers truncates
]


def cosines(a: list[Any], b: np.ndarray) -> np.ndarray:
    return np.asarray((np.vstack(a) * b).sum(axis=1))


@pytest.fixture(scope="module")
def torch_vectors() -> np.ndarray:
    return np.vstack(TorchRuntime(bundled_model_path(), batch_size=64).encode(TEXTS))


@pytest.fixture(scope="module")
def onnx_fp32(onnx_dir: Path) -> OnnxRuntime:
    return OnnxRuntime(bundled_model_path(), onnx_dir, variant="fp32", batch_size=64, threads=0)


@pytest.fixture(scope="module")
def onnx_int8(onnx_dir: Path) -> OnnxRuntime:
    return OnnxRuntime(bundled_model_path(), onnx_dir, variant="int8", batch_size=64, threads=0)


def test_the_texts_cross_both_truncation_limits() -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(bundled_model_path() / "tokenizer.json"))
    tokenizer.no_truncation()
    assert 128 < len(tokenizer.encode(MIDDLE).ids) < 256 < len(tokenizer.encode(LONG).ids)
    assert read_pipeline(bundled_model_path()).max_seq_length == 256


def test_onnx_fp32_vectors_are_the_torch_vectors(onnx_fp32: OnnxRuntime, torch_vectors: np.ndarray) -> None:
    # Measured: cosine >= 0.9999994 for every text, batched or alone.
    batched = cosines(onnx_fp32.encode(TEXTS), torch_vectors)
    alone = cosines([onnx_fp32.encode([t])[0] for t in TEXTS], torch_vectors)
    assert batched.min() > 0.9999 and alone.min() > 0.9999, (batched, alone)


@pytest.mark.parametrize("variant", ["fp32", "int8"])
def test_a_vector_does_not_depend_on_the_texts_encoded_beside_it(
    variant: str, onnx_fp32: OnnxRuntime, onnx_int8: OnnxRuntime
) -> None:
    # fp32: texts of different lengths go into different forward passes (memsvc/embeddings/onnx.py);
    # whichever pass a text lands in, its padding is masked and its vector is its own. int8
    # scales a pass's activations as a whole, so there every text runs alone.
    runtime = onnx_fp32 if variant == "fp32" else onnx_int8
    batched = np.vstack(runtime.encode(TEXTS))
    alone = np.vstack([runtime.encode([t])[0] for t in TEXTS])
    reversed_batch = np.vstack(runtime.encode(TEXTS[::-1])[::-1])
    assert float(np.abs(batched - alone).max()) < 1e-5
    assert float(np.abs(batched - reversed_batch).max()) < 1e-5


def test_onnx_int8_vectors_stay_close_to_torch(onnx_int8: OnnxRuntime, torch_vectors: np.ndarray) -> None:
    # Measured: 0.990-0.999; the shortest texts are the worst.
    vectors = cosines(onnx_int8.encode(TEXTS), torch_vectors)
    assert vectors.min() > 0.98 and vectors.mean() > 0.99, vectors


def test_the_export_is_cached(onnx_fp32: OnnxRuntime, onnx_dir: Path) -> None:
    path = onnx_fp32.export.path
    modified = path.stat().st_mtime_ns
    again = OnnxRuntime(bundled_model_path(), onnx_dir, variant="fp32", batch_size=64, threads=1)
    assert again.export == onnx_module.OnnxExport(path, created=False)
    assert path.stat().st_mtime_ns == modified
    # Only this export's own temporary files: the cache directory is the machine's, and another
    # checkout's server may be exporting its own model files into it at this very moment.
    assert not [p for p in onnx_dir.iterdir() if p.name.startswith(f".{path.stem}.") and p.name.endswith(".tmp")]


def test_the_cache_key_follows_the_model_files_and_the_variant(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"hidden_size": 384}')
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    first = cache_key(tmp_path, "fp32")
    assert cache_key(tmp_path, "fp32") == first
    assert cache_key(tmp_path, "int8") != first
    (tmp_path / "model.safetensors").write_bytes(b"new weights")
    assert cache_key(tmp_path, "fp32") != first


def test_a_failed_export_publishes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_export(model_dir: Path, out: Path) -> None:
        out.write_bytes(b"half a model")
        raise RuntimeError("killed mid-export")

    monkeypatch.setattr(onnx_module, "_export_fp32", broken_export)
    cache = tmp_path / "cache"
    with pytest.raises(RuntimeError, match="mid-export"):
        ensure_export(bundled_model_path(), cache, "fp32")
    assert list(cache.iterdir()) == []


def test_pipelines_the_export_does_not_reproduce_are_refused(tmp_path: Path) -> None:
    (tmp_path / "modules.json").write_text(
        '[{"path": "", "type": "sentence_transformers.models.Transformer"},'
        ' {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},'
        ' {"path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]'
    )
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(
        '{"word_embedding_dimension": 384, "pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}'
    )
    (tmp_path / "sentence_bert_config.json").write_text('{"max_seq_length": 256}')
    with pytest.raises(ValueError, match="mean pooling"):
        read_pipeline(tmp_path)


def test_only_int8_gets_its_own_embedding_version() -> None:
    assert model_version("m", "torch") == model_version("m", "onnx") == "m@1"
    assert model_version("m", "onnx-int8") == "m@1+int8"
