"""ONNX model files written directly: the part of onnx.proto that memsvc's graphs use.

An ONNX file is one Protocol Buffers message (`ModelProto`). The field numbers below are
onnx.proto's; writing the few messages here spares the service the `onnx` package, which it
would load once per machine to write one file.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

# TensorProto.DataType
FLOAT, INT8, INT64 = 1, 3, 7
_ELEMENT_TYPES = {np.dtype(np.float32): FLOAT, np.dtype(np.int8): INT8, np.dtype(np.int64): INT64}
# AttributeProto.AttributeType
_ATTRIBUTE_FLOAT, _ATTRIBUTE_INT, _ATTRIBUTE_STRING, _ATTRIBUTE_INTS = 1, 2, 3, 7
IR_VERSION = 10  # the file format version of opsets 20 and 21

Attribute = int | float | str | Sequence[int]


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # a negative int64 is its two's complement, ten bytes long
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if not value:
            out.append(low)
            return bytes(out)
        out.append(low | 0x80)


def _int(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value)


def _bytes(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _text(field: int, value: str) -> bytes:
    return _bytes(field, value.encode())


def _attribute(name: str, value: Attribute) -> bytes:
    if isinstance(value, bool | int):
        return _text(1, name) + _int(3, int(value)) + _int(20, _ATTRIBUTE_INT)
    if isinstance(value, float):
        return _text(1, name) + _varint(2 << 3 | 5) + struct.pack("<f", value) + _int(20, _ATTRIBUTE_FLOAT)
    if isinstance(value, str):
        return _text(1, name) + _text(4, value) + _int(20, _ATTRIBUTE_STRING)
    return _text(1, name) + b"".join(_int(8, v) for v in value) + _int(20, _ATTRIBUTE_INTS)


def _value_info(name: str, element_type: int, dims: Iterable[int | str]) -> bytes:
    shape = b"".join(_bytes(1, _int(1, d) if isinstance(d, int) else _text(2, d)) for d in dims)
    tensor_type = _int(1, element_type) + _bytes(2, shape)
    return _text(1, name) + _bytes(2, _bytes(1, tensor_type))


def tensor(name: str, array: npt.NDArray[Any]) -> bytes:
    """A TensorProto holding `array` as little-endian raw data."""
    data = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
    dims = b"".join(_int(1, d) for d in data.shape)
    return dims + _int(2, _ELEMENT_TYPES[data.dtype]) + _text(8, name) + _bytes(9, data.tobytes())


class Graph:
    """Nodes, constants, inputs and outputs of one graph, serialised as a model on demand."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._nodes: list[bytes] = []
        self._initializers: list[bytes] = []
        self._inputs: list[bytes] = []
        self._outputs: list[bytes] = []
        self._shapes: list[bytes] = []
        self._count = 0

    def _fresh(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def input(self, name: str, element_type: int, dims: Sequence[int | str]) -> str:
        self._inputs.append(_value_info(name, element_type, dims))
        return name

    def output(self, name: str, element_type: int, dims: Sequence[int | str]) -> None:
        self._outputs.append(_value_info(name, element_type, dims))

    def shape(self, name: str, element_type: int, dims: Sequence[int | str]) -> str:
        """Declare an intermediate value's shape where inference cannot tell it (a dimension that
        comes from another tensor's value); `name`, for chaining."""
        self._shapes.append(_value_info(name, element_type, dims))
        return name

    def constant(self, hint: str, array: npt.NDArray[Any]) -> str:
        name = self._fresh(hint)
        self._initializers.append(tensor(name, array))
        return name

    def node(self, op: str, inputs: Sequence[str], output: str = "", **attributes: Attribute) -> str:
        """Add an `op` node of one output (named `output`, or a fresh name); the output's name."""
        (produced,) = self.nodes(op, inputs, [output or self._fresh(op.lower())], **attributes)
        return produced

    def nodes(
        self, op: str, inputs: Sequence[str], outputs: int | Sequence[str], **attributes: Attribute
    ) -> tuple[str, ...]:
        """Add an `op` node with several outputs (a count of fresh names, or the names); their names."""
        produced = [self._fresh(op.lower()) for _ in range(outputs)] if isinstance(outputs, int) else list(outputs)
        self._nodes.append(
            b"".join(_text(1, i) for i in inputs)
            + b"".join(_text(2, o) for o in produced)
            + _text(3, self._fresh(op))
            + _text(4, op)
            + b"".join(_bytes(5, _attribute(k, v)) for k, v in sorted(attributes.items()))
        )
        return tuple(produced)

    def model(self, opset: int, producer: str) -> bytes:
        graph = (
            b"".join(_bytes(1, n) for n in self._nodes)
            + _text(2, self.name)
            + b"".join(_bytes(5, t) for t in self._initializers)
            + b"".join(_bytes(11, i) for i in self._inputs)
            + b"".join(_bytes(12, o) for o in self._outputs)
            + b"".join(_bytes(13, v) for v in self._shapes)
        )
        opset_import = _text(1, "") + _int(2, opset)
        return _int(1, IR_VERSION) + _text(2, producer) + _bytes(7, graph) + _bytes(8, opset_import)
