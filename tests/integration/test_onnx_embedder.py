"""The local embedder on ONNX Runtime: the torch model's vectors, from a graph built once, atomically.

The reference vectors in tests/fixtures were computed once by the embedders this one replaced
(sentence-transformers on torch for fp32; the torch.onnx export quantised by ONNX Runtime for
int8), on a few hundred varied texts; tests/fixtures/minilm_reference.json says how.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memsvc.embeddings import onnx as onnx_module
from memsvc.embeddings.local import bundled_model_path, model_version
from memsvc.embeddings.minilm_graph import BertShape, build_sentence_encoder
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


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REFERENCE = json.loads((FIXTURES / "minilm_reference.json").read_text(encoding="utf-8"))
SESSIONS: dict[Path, Any] = {}
# The CPU features that pick ONNX Runtime's int8 matrix kernels, best first; they round differently.
INT8_KERNELS = ("amx_int8", "avx512_vnni", "avx_vnni", "avx512bw", "avx2")


@pytest.fixture(scope="module")
def reference() -> dict[str, np.ndarray]:
    with np.load(FIXTURES / "minilm_reference_vectors.npz") as stored:
        vectors = {name: stored[name].astype(np.float32) for name in stored.files}
    return {name: v / np.linalg.norm(v, axis=1, keepdims=True) for name, v in vectors.items()}


def one_pass(model: Path, text: str) -> np.ndarray:
    """`text`'s vector from the ONNX file `model`, run as the embedder runs it (one thread, one text)."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(bundled_model_path() / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=256)
    tokenizer.no_padding()
    encoding = tokenizer.encode(text)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = SESSIONS.setdefault(model, ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"]))
    feeds = {
        "input_ids": [encoding.ids],
        "attention_mask": [encoding.attention_mask],
        "token_type_ids": [encoding.type_ids],
    }
    return np.asarray(session.run(None, {k: np.asarray(v, dtype=np.int64) for k, v in feeds.items()})[0][0])


def int8_kernels() -> str:
    flags = set(re.findall(r"^flags\s*:(.*)$", Path("/proc/cpuinfo").read_text(), re.MULTILINE)[0].split())
    return next((kernel for kernel in INT8_KERNELS if kernel in flags), "")


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


def test_fp32_vectors_are_the_torch_vectors(onnx_fp32: OnnxRuntime, reference: dict[str, np.ndarray]) -> None:
    texts = REFERENCE["texts"]
    assert len(texts) >= 300
    # Measured: cosine >= 0.9999995 for every text, batched or alone (the reference is float16).
    batched = cosines(onnx_fp32.encode(texts), reference["fp32"])
    alone = cosines([onnx_fp32.encode([t])[0] for t in texts], reference["fp32"])
    assert batched.min() >= 0.9999 and alone.min() >= 0.9999, (batched.min(), alone.min())


def test_int8_vectors_are_the_vectors_of_the_torch_export_quantised(
    onnx_int8: OnnxRuntime, reference: dict[str, np.ndarray]
) -> None:
    kernels = int8_kernels()
    if kernels != REFERENCE["int8_kernels"]:
        pytest.skip(f"int8 reference made with {REFERENCE['int8_kernels']} kernels; this CPU uses {kernels}")
    # Measured: cosine >= 0.99999 for every text. int8 passes amplify a float's last bit (one
    # rounding flipped by a fusion moves a short text's vector by 0.003), so this holds because
    # the graph computes the export's very floats; test_int8_is_... below holds on every CPU.
    vectors = cosines(onnx_int8.encode(REFERENCE["texts"]), reference["int8"])
    assert vectors.min() >= 0.9999, (vectors.min(), REFERENCE["texts"][int(vectors.argmin())])


@pytest.mark.slow  # quantises the whole graph again: half a minute of both cores
def test_int8_is_onnx_runtime_s_dynamic_quantisation_of_the_fp32_graph(onnx_int8: OnnxRuntime, tmp_path: Path) -> None:
    # The recipe the int8 model was made with, applied to the fp32 graph: the same int8 weights
    # and scales, and the same vectors on this CPU, whatever its kernels.
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper
    from onnxruntime.quantization import QuantType, quantize_dynamic

    fp32 = tmp_path / "fp32.onnx"
    fp32.write_bytes(build_sentence_encoder(bundled_model_path(), "fp32"))
    graph = onnx.load(str(fp32)).graph
    producer = {output: node.op_type for node in graph.node for output in node.output}
    ffn_out = [n.name for n in graph.node if n.op_type == "MatMul" and producer.get(n.input[0]) == "Gelu"]
    assert len(ffn_out) == 6
    quantised = tmp_path / "int8.onnx"
    quantize_dynamic(
        str(fp32),
        str(quantised),
        op_types_to_quantize=["MatMul"],
        per_channel=True,
        weight_type=QuantType.QInt8,
        nodes_to_exclude=ffn_out,
    )

    def int8_weights(path: Path) -> list[tuple[str, tuple[int, ...], bytes]]:
        """The int8 weights of each quantised product and every constant a Mul scales by, in any order."""
        model = onnx.load(str(path)).graph
        values = {t.name: numpy_helper.to_array(t) for t in model.initializer}
        integer = [values[n.input[1]] for n in model.node if n.op_type == "MatMulInteger"]
        scales = [values[i] for n in model.node if n.op_type == "Mul" for i in n.input if i in values]
        assert len(integer) == 30  # six layers: query, key, value, attention output, feed-forward input
        return sorted((str(a.dtype), a.shape, a.tobytes()) for a in integer + scales)

    assert int8_weights(onnx_int8.export.path) == int8_weights(quantised)
    texts = REFERENCE["texts"]
    vectors = cosines(onnx_int8.encode(texts), np.vstack([one_pass(quantised, t) for t in texts]))
    assert vectors.min() >= 0.9999, (vectors.min(), texts[int(vectors.argmin())])


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


def test_the_graph_is_cached(onnx_fp32: OnnxRuntime, onnx_dir: Path) -> None:
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


def test_a_failed_build_publishes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def killed(source: str, target: str) -> None:
        raise RuntimeError("killed before the rename")

    monkeypatch.setattr(onnx_module.os, "replace", killed)
    cache = tmp_path / "cache"
    with pytest.raises(RuntimeError, match="before the rename"):
        ensure_export(bundled_model_path(), cache, "int8")
    assert list(cache.iterdir()) == []


def test_models_the_graph_does_not_reproduce_are_refused() -> None:
    config = json.loads((bundled_model_path() / "config.json").read_text())
    assert BertShape.of(config) == BertShape(hidden=384, heads=12, layers=6, epsilon=1e-12)
    with pytest.raises(ValueError, match="hidden_act"):
        BertShape.of({**config, "hidden_act": "gelu_new"})
    with pytest.raises(ValueError, match="model_type"):
        BertShape.of({**config, "model_type": "roberta"})


def test_pipelines_the_graph_does_not_reproduce_are_refused(tmp_path: Path) -> None:
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
    assert model_version("m", "onnx") == "m@1"  # the version the torch runtime of earlier releases wrote
    assert model_version("m", "onnx-int8") == "m@1+int8"
