"""The bundled sentence encoder as an ONNX graph, built from its safetensors weights.

The graph is the BERT encoder of the model folder (`config.json`, `model.safetensors`) followed by
the rest of its sentence-transformers pipeline: attention-masked mean pooling and L2
normalisation, so it returns finished unit vectors: the torch model's vectors (cosine above
0.9999 against sentence-transformers on every text of tests/fixtures; int8, against ONNX
Runtime's quantisation of torch's own ONNX export).

The int8 variant quantises, as ONNX Runtime's `quantize_dynamic` does (per output channel,
symmetric, activations quantised per pass), the weights of every linear layer except each feed-
forward output projection: that one reads the GELU activations, whose outliers dominate the int8
error. Kept in fp32, the worst cosine to torch rises from 0.966 to 0.981 and dense-only LoCoMo R@7
from 0.435 to 0.449 (torch: 0.444), at the cost of about a third of the int8 saving in CPU.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from memsvc.embeddings.onnx_file import FLOAT, INT64, Graph

Variant = Literal["fp32", "int8"]
Weights = Mapping[str, npt.NDArray[Any]]
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "sentence_embedding"
# Gelu (exact) is an operator from opset 20 on; ReduceL2 takes its axes as an input from 18.
OPSET = 20


@dataclass(frozen=True)
class BertShape:
    hidden: int
    heads: int
    layers: int
    epsilon: float

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> BertShape:
        expected = {"model_type": "bert", "hidden_act": "gelu", "position_embedding_type": "absolute"}
        found = {key: config.get(key, "absolute" if key == "position_embedding_type" else None) for key in expected}
        if found != expected:
            raise ValueError(f"the ONNX graph reproduces a BERT encoder with {expected}; config.json has {found}")
        return cls(
            int(config["hidden_size"]),
            int(config["num_attention_heads"]),
            int(config["num_hidden_layers"]),
            float(config["layer_norm_eps"]),
        )


def build_sentence_encoder(model_dir: Path, variant: Variant) -> bytes:
    """The ONNX model (serialised) of the sentence encoder in `model_dir`."""
    from safetensors.numpy import load_file

    shape = BertShape.of(json.loads((model_dir / "config.json").read_text()))
    # Checkpoints saved from a BertModel name their tensors "embeddings...", from a task model "bert.embeddings...".
    weights = {name.removeprefix("bert."): array for name, array in load_file(model_dir / "model.safetensors").items()}
    return _Encoder(Graph("sentence_encoder"), weights, shape, variant == "int8").build()


def quantize_per_column(weight: npt.NDArray[np.float32]) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]:
    """Symmetric int8 of a [in, out] weight with one scale per output column, as ONNX Runtime's
    quantize_dynamic computes it (the same bits: its scale in float64, stored as float32)."""
    absmax = np.maximum(np.abs(np.minimum(weight.min(axis=0), 0)), np.maximum(weight.max(axis=0), 0))
    scale = (absmax.astype(np.float64) * 2 / 254).astype(np.float32)
    scale = np.where(scale < np.finfo(np.float32).tiny, np.float32(1.0), scale)
    quantized = np.clip(np.round(weight / scale), -128, 127).astype(np.int8)
    return quantized, scale


class _Encoder:
    """Adds the encoder's nodes to a graph, a part of the model per method."""

    def __init__(self, graph: Graph, weights: Weights, shape: BertShape, int8: bool) -> None:
        self.g = graph
        self.w = weights
        self.shape = shape
        self.int8 = int8

    def const(self, hint: str, value: Any, dtype: type[np.generic] = np.float32) -> str:
        return self.g.constant(hint, np.asarray(value, dtype=dtype))

    def build(self) -> bytes:
        g = self.g
        ids, mask, types = (g.input(name, INT64, ["batch", "seq"]) for name in INPUTS)
        hidden = self.embeddings(ids, types)
        mask_f = g.node("Cast", [mask], to=FLOAT)
        # 0 where a token may be attended to, the lowest float where it is padding: [batch, 1, 1, seq].
        keep = g.node("Unsqueeze", [mask_f, self.const("axes", [1, 2], np.int64)])
        padding = g.node("Sub", [self.const("one", 1.0), keep])
        bias = g.node("Mul", [padding, self.const("lowest", np.finfo(np.float32).min)])
        for layer in range(self.shape.layers):
            hidden = self.layer(f"encoder.layer.{layer}", hidden, bias)
        return self.pool(hidden, mask_f)

    def embeddings(self, ids: str, types: str) -> str:
        g = self.g
        words = g.node("Gather", [self.const("word_embeddings", self.w["embeddings.word_embeddings.weight"]), ids])
        kinds = g.node(
            "Gather", [self.const("type_embeddings", self.w["embeddings.token_type_embeddings.weight"]), types]
        )
        # The positions 0..seq-1: the first `seq` rows of the position table.
        seq = g.node("Shape", [ids], start=1, end=2)
        table = self.const("position_embeddings", self.w["embeddings.position_embeddings.weight"])
        positions = g.node("Slice", [table, self.const("start", [0], np.int64), seq, self.const("axis", [0], np.int64)])
        # Shape inference cannot read `seq` off a value; declared, the hidden states keep [batch, seq,
        # hidden] through every layer, which ONNX Runtime's fusions (Add with LayerNorm) look for.
        g.shape(positions, FLOAT, ["seq", self.shape.hidden])
        summed = g.node("Add", [g.node("Add", [words, kinds]), positions])
        return self.layer_norm("embeddings.LayerNorm", summed)

    def layer_norm(self, prefix: str, x: str) -> str:
        scale, bias = (
            self.const("ln_scale", self.w[f"{prefix}.weight"]),
            self.const("ln_bias", self.w[f"{prefix}.bias"]),
        )
        return self.g.node("LayerNormalization", [x, scale, bias], axis=-1, epsilon=self.shape.epsilon)

    def linear(self, prefix: str, x: str, quantized_input: tuple[str, ...] | None) -> str:
        """x @ W^T + b; in int8 from `x` quantised once (DynamicQuantizeLinear), as ONNX Runtime does."""
        g = self.g
        weight = np.ascontiguousarray(self.w[f"{prefix}.weight"].T, dtype=np.float32)
        if quantized_input is None:
            product = g.node("MatMul", [x, self.const("weight", weight)])
        else:
            x_q, x_scale, x_zero = quantized_input
            w_q, w_scale = quantize_per_column(weight)
            w_zero = self.const("weight_zero", np.zeros(weight.shape[1]), np.int8)
            integers = g.node("MatMulInteger", [x_q, self.const("weight_q", w_q, np.int8), x_zero, w_zero])
            scale = g.node("Mul", [x_scale, self.const("weight_scale", w_scale)])
            product = g.node("Mul", [g.node("Cast", [integers], to=FLOAT), scale])
        return g.node("Add", [product, self.const("bias", self.w[f"{prefix}.bias"])])

    def quantized(self, x: str) -> tuple[str, ...] | None:
        return self.g.nodes("DynamicQuantizeLinear", [x], 3) if self.int8 else None

    def layer(self, prefix: str, hidden: str, attention_bias: str) -> str:
        g, heads = self.g, self.shape.heads
        head_dim = self.shape.hidden // heads
        split = self.const("split_heads", [0, 0, heads, head_dim], np.int64)
        x_q = self.quantized(hidden)

        def per_head(name: str, perm: list[int]) -> str:
            projected = self.linear(f"{prefix}.attention.self.{name}", hidden, x_q)
            return g.node("Transpose", [g.node("Reshape", [projected, split])], perm=perm)

        # Scaled as torch's scaled_dot_product_attention exports it, the query and the key each by
        # the square root of 1/sqrt(head_dim): int8 passes amplify a float's last bit, so the
        # graph computes the torch export's floats, not just the same function.
        root_scale = self.const("root_scale", math.sqrt(1 / math.sqrt(head_dim)))
        query = g.node("Mul", [per_head("query", [0, 2, 1, 3]), root_scale])
        key = g.node("Mul", [per_head("key", [0, 2, 3, 1]), root_scale])
        value = per_head("value", [0, 2, 1, 3])
        scores = g.node("MatMul", [query, key])
        weights = g.node("Softmax", [g.node("Add", [scores, attention_bias])], axis=-1)
        context = g.node("Transpose", [g.node("MatMul", [weights, value])], perm=[0, 2, 1, 3])
        context = g.node("Reshape", [context, self.const("merge_heads", [0, 0, self.shape.hidden], np.int64)])
        attended = self.linear(f"{prefix}.attention.output.dense", context, self.quantized(context))
        hidden = self.layer_norm(f"{prefix}.attention.output.LayerNorm", g.node("Add", [attended, hidden]))
        expanded = self.linear(f"{prefix}.intermediate.dense", hidden, self.quantized(hidden))
        # Each feed-forward output projection stays in fp32 (the module's docstring says why).
        projected = self.linear(f"{prefix}.output.dense", g.node("Gelu", [expanded]), None)
        return self.layer_norm(f"{prefix}.output.LayerNorm", g.node("Add", [projected, hidden]))

    def pool(self, hidden: str, mask_f: str) -> bytes:
        """Mean over the real tokens, then unit length, as sentence-transformers' Pooling and Normalize."""
        g = self.g
        weights = g.node("Unsqueeze", [mask_f, self.const("axes", [2], np.int64)])
        tokens_axis = self.const("axes", [1], np.int64)
        summed = g.node("ReduceSum", [g.node("Mul", [hidden, weights]), tokens_axis], keepdims=0)
        counted = g.node("Max", [g.node("ReduceSum", [weights, tokens_axis], keepdims=0), self.const("eps", 1e-9)])
        mean = g.node("Div", [summed, counted])
        norm = g.node("Max", [g.node("ReduceL2", [mean, tokens_axis], keepdims=1), self.const("eps", 1e-12)])
        g.node("Div", [mean, norm], output=OUTPUT)
        g.output(OUTPUT, FLOAT, ["batch", self.shape.hidden])
        return g.model(OPSET, "memsvc")
