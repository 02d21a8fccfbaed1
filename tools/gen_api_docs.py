"""Render the API reference docs/api.md from the comments in proto/, or check it is current."""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from google.protobuf import descriptor_pb2
from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
OUTPUT = ROOT / "docs" / "api.md"

# Field numbers inside descriptor.proto that SourceCodeInfo paths are made of.
_FILE_MESSAGE = 4
_FILE_ENUM = 5
_FILE_SERVICE = 6
_MESSAGE_FIELD = 2
_MESSAGE_NESTED = 3
_MESSAGE_ENUM = 4
_ENUM_VALUE = 2
_SERVICE_METHOD = 2

_FDP = descriptor_pb2.FieldDescriptorProto
_SCALAR_NAMES = {
    _FDP.TYPE_DOUBLE: "double",
    _FDP.TYPE_FLOAT: "float",
    _FDP.TYPE_INT64: "int64",
    _FDP.TYPE_UINT64: "uint64",
    _FDP.TYPE_INT32: "int32",
    _FDP.TYPE_FIXED64: "fixed64",
    _FDP.TYPE_FIXED32: "fixed32",
    _FDP.TYPE_BOOL: "bool",
    _FDP.TYPE_STRING: "string",
    _FDP.TYPE_BYTES: "bytes",
    _FDP.TYPE_UINT32: "uint32",
    _FDP.TYPE_SFIXED32: "sfixed32",
    _FDP.TYPE_SFIXED64: "sfixed64",
    _FDP.TYPE_SINT32: "sint32",
    _FDP.TYPE_SINT64: "sint64",
}

# Integer types that the proto3 JSON mapping writes as strings (JavaScript numbers lose precision past 2^53).
_JSON_STRINGS = frozenset({_FDP.TYPE_INT64, _FDP.TYPE_UINT64, _FDP.TYPE_SINT64, _FDP.TYPE_FIXED64, _FDP.TYPE_SFIXED64})

HEADER = """\
# memsvc API reference

<!-- Generated from proto/ by tools/gen_api_docs.py (`make docs`); do not edit by hand. -->

Package `{package}`. Every call carries the API key in the `authorization: Bearer <key>`
metadata; errors carry a `google.rpc.Status` with `google.rpc.ErrorInfo` and, for invalid
requests, `google.rpc.BadRequest` field violations.

In JSON (grpcurl, `buf curl`, `memsvc ... --json`) messages follow the proto3 JSON mapping:
enums are their names, timestamps RFC 3339 strings, and 64-bit integers (`int64`, `uint64`:
`deleted_count`, `usage_count`, `version`, ...) are strings, so a ForgetUser reply reads
`{{"deletedCount": "3"}}` (grpcurl and `buf curl` name fields in lowerCamelCase, the CLI as in the
proto). Requests may give them as numbers or strings.
"""


@dataclass(frozen=True)
class _Comments:
    """Comments of one file, keyed by SourceCodeInfo path."""

    by_path: dict[tuple[int, ...], str]

    def get(self, *path: int) -> str:
        return self.by_path.get(tuple(path), "")


def _clean(comment: str) -> str:
    lines = [line[1:] if line.startswith(" ") else line for line in comment.splitlines()]
    return "\n".join(lines).strip()


def _comments(file: descriptor_pb2.FileDescriptorProto) -> _Comments:
    found: dict[tuple[int, ...], str] = {}
    for location in file.source_code_info.location:
        parts = [_clean(location.leading_comments), _clean(location.trailing_comments)]
        text = "\n\n".join(p for p in parts if p)
        if text:
            found[tuple(location.path)] = text
    return _Comments(found)


def _anchor(full_name: str) -> str:
    return full_name.replace(".", "").lower()


def _one_line(text: str) -> str:
    """Fit a comment into a Markdown table cell: paragraphs become line breaks."""
    paragraphs = [" ".join(p.split()) for p in text.split("\n\n")]
    return "<br>".join(p for p in paragraphs if p).replace("|", "\\|")


class _Renderer:
    """Turns a set of file descriptors into one Markdown document."""

    def __init__(self, files: Sequence[descriptor_pb2.FileDescriptorProto]) -> None:
        self.files = files
        self.local_types: set[str] = set()
        for file in files:
            for name in self._type_names(file):
                self.local_types.add(name)

    @staticmethod
    def _type_names(file: descriptor_pb2.FileDescriptorProto) -> Iterable[str]:
        def walk(prefix: str, message: descriptor_pb2.DescriptorProto) -> Iterable[str]:
            name = f"{prefix}.{message.name}"
            yield name
            for nested in message.nested_type:
                yield from walk(name, nested)
            for enum in message.enum_type:
                yield f"{name}.{enum.name}"

        for message in file.message_type:
            yield from walk(file.package, message)
        for enum in file.enum_type:
            yield f"{file.package}.{enum.name}"

    def _type_ref(self, type_name: str) -> str:
        name = type_name.lstrip(".")
        if name in self.local_types:
            return f"[`{name}`](#{_anchor(name)})"
        return f"`{name}`"

    def _field_type(self, field: descriptor_pb2.FieldDescriptorProto) -> str:
        if field.type in (_FDP.TYPE_MESSAGE, _FDP.TYPE_ENUM):
            shown = self._type_ref(field.type_name)
        else:
            shown = f"`{_SCALAR_NAMES[field.type]}`"
            if field.type in _JSON_STRINGS:
                shown += " (a string in JSON)"
        if field.label == _FDP.LABEL_REPEATED:
            return f"repeated {shown}"
        if field.proto3_optional:
            return f"optional {shown}"
        return shown

    def render(self) -> str:
        packages = sorted({f.package for f in self.files})
        out = [HEADER.format(package="`, `".join(packages))]
        out.append("## Contents\n")
        for file in self.files:
            for service in file.service:
                full = f"{file.package}.{service.name}"
                out.append(f"- Service [`{full}`](#{_anchor(full)})")
        out.append("- [Messages](#messages)")
        out.append("- [Enums](#enums)\n")
        for file in self.files:
            out.extend(self._services(file))
        out.append("## Messages\n")
        for file in self.files:
            comments = _comments(file)
            for index, message in enumerate(file.message_type):
                out.extend(self._message(file, comments, message, (_FILE_MESSAGE, index), ""))
        out.append("## Enums\n")
        for file in self.files:
            comments = _comments(file)
            for index, enum in enumerate(file.enum_type):
                out.extend(self._enum(file, comments, enum, (_FILE_ENUM, index), ""))
        return "\n".join(out).rstrip() + "\n"

    def _services(self, file: descriptor_pb2.FileDescriptorProto) -> list[str]:
        comments = _comments(file)
        out: list[str] = []
        for s_index, service in enumerate(file.service):
            full = f"{file.package}.{service.name}"
            out.append(f"## {full}\n")
            out.append(f"Defined in `{file.name}`.\n")
            text = comments.get(_FILE_SERVICE, s_index)
            if text:
                out.append(text + "\n")
            for m_index, method in enumerate(service.method):
                out.append(f"### {service.name}.{method.name}\n")
                stream_in = "stream " if method.client_streaming else ""
                stream_out = "stream " if method.server_streaming else ""
                out.append(
                    f"`rpc {method.name}({stream_in}{method.input_type.lstrip('.')}) returns "
                    f"({stream_out}{method.output_type.lstrip('.')})`\n"
                )
                text = comments.get(_FILE_SERVICE, s_index, _SERVICE_METHOD, m_index)
                if text:
                    out.append(text + "\n")
                out.append(
                    f"Request: {self._type_ref(method.input_type)}. Response: {self._type_ref(method.output_type)}.\n"
                )
        return out

    def _message(
        self,
        file: descriptor_pb2.FileDescriptorProto,
        comments: _Comments,
        message: descriptor_pb2.DescriptorProto,
        path: tuple[int, ...],
        parent: str,
    ) -> list[str]:
        scope = parent or file.package
        full = f"{scope}.{message.name}"
        out = [f"### {full}\n", f"Defined in `{file.name}`.\n"]
        text = comments.get(*path)
        if text:
            out.append(text + "\n")
        if message.field:
            out.append("| Field | Number | Type | Description |")
            out.append("| --- | --- | --- | --- |")
            for index, field in enumerate(message.field):
                note = _one_line(comments.get(*path, _MESSAGE_FIELD, index))
                if field.HasField("oneof_index") and not field.proto3_optional:
                    oneof = message.oneof_decl[field.oneof_index].name
                    note = f"Member of oneof `{oneof}`. {note}".strip()
                out.append(f"| `{field.name}` | {field.number} | {self._field_type(field)} | {note} |")
            out.append("")
        else:
            out.append("This message has no fields.\n")
        for index, nested in enumerate(message.nested_type):
            out.extend(self._message(file, comments, nested, (*path, _MESSAGE_NESTED, index), full))
        for index, enum in enumerate(message.enum_type):
            out.extend(self._enum(file, comments, enum, (*path, _MESSAGE_ENUM, index), full))
        return out

    @staticmethod
    def _enum(
        file: descriptor_pb2.FileDescriptorProto,
        comments: _Comments,
        enum: descriptor_pb2.EnumDescriptorProto,
        path: tuple[int, ...],
        parent: str,
    ) -> list[str]:
        full = f"{parent or file.package}.{enum.name}"
        out = [f"### {full}\n", f"Defined in `{file.name}`.\n"]
        text = comments.get(*path)
        if text:
            out.append(text + "\n")
        out.append("| Value | Number | Description |")
        out.append("| --- | --- | --- |")
        for index, value in enumerate(enum.value):
            note = _one_line(comments.get(*path, _ENUM_VALUE, index))
            out.append(f"| `{value.name}` | {value.number} | {note} |")
        out.append("")
        return out


def load_descriptors(proto_dir: Path = PROTO_DIR) -> list[descriptor_pb2.FileDescriptorProto]:
    """Compile every .proto under proto_dir with its comments; files in name order."""
    protos = sorted(str(p.relative_to(proto_dir)) for p in proto_dir.rglob("*.proto"))
    well_known = str(resources.files("grpc_tools") / "_proto")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "descriptors.pb"
        args = [
            "protoc",
            f"-I{proto_dir}",
            f"-I{well_known}",
            "--include_source_info",
            f"--descriptor_set_out={out}",
            *protos,
        ]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        descriptor_set = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    return sorted(descriptor_set.file, key=lambda f: f.name)


def render(proto_dir: Path = PROTO_DIR) -> str:
    """The Markdown API reference of every service, message and enum under proto_dir."""
    return _Renderer(load_descriptors(proto_dir)).render()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if docs/api.md is stale")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="where to write the docs")
    args = parser.parse_args()
    text = render()
    output: Path = args.output
    if args.check:
        current = output.read_text(encoding="utf-8") if output.exists() else None
        if current != text:
            print(f"{output} is stale; run `make docs`", file=sys.stderr)
            return 1
        print(f"{output} is up to date")
        return 0
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
