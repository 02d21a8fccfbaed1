"""Regenerate memsvc_client/_gen from proto/memsvc/v1, or check that the checked-in code is fresh.

Run from anywhere: ``python clients/python/generate.py`` (needs grpcio-tools). ``--check``
exits 1 when the checked-in code differs from what the protos generate; ``--out DIR`` writes
the package tree (``memsvc_client/_gen/...``) under DIR instead of into the client.

Two rewrites follow protoc, so that the client never touches the server's package:
- imports: protoc names them after the proto path (``from memsvc.v1 import memory_pb2``), which
  would import the server's modules; they become ``memsvc_client._gen.memsvc.v1``.
- descriptor pool: the modules register their descriptors in a private pool
  (``memsvc_client/_gen/_pool.py``) instead of protobuf's default one. The default pool refuses
  a second, different ``memsvc/v1/memory.proto``, so a client generated from other protos than
  the server package (or any other memsvc stubs) loaded in the same process would fail to
  import. The private pool also holds the well-known types the protos use; their message
  classes are the pool's own, so set such fields in place (``msg.metadata.update(...)``,
  ``msg.create_time.FromDatetime(...)``) rather than with ``CopyFrom`` of a ``struct_pb2`` value.
"""

from __future__ import annotations

import argparse
import filecmp
import re
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path

from grpc_tools import protoc

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PROTO_DIR = ROOT / "proto"
GEN_PACKAGE = Path("memsvc_client") / "_gen"
IMPORT_PREFIX = "memsvc_client._gen."
# Every package on the way from memsvc_client/_gen down to the generated modules.
INIT_TEXT = '"""Generated from proto/ by clients/python/generate.py; do not edit."""\n'
_IMPORT = re.compile(r"^(from|import) (memsvc\.v1)\b", re.MULTILINE)
_DEFAULT_POOL_IMPORT = "from google.protobuf import descriptor_pool as _descriptor_pool\n"
_PRIVATE_POOL_IMPORT = "from memsvc_client._gen import _pool as _descriptor_pool\n"
POOL_TEXT = '''"""The private descriptor pool of the generated modules; written by clients/python/generate.py."""

from google.protobuf import descriptor_pool, field_mask_pb2, struct_pb2, timestamp_pb2

_POOL = descriptor_pool.DescriptorPool()
# The well-known types the memsvc protos import must be in the same pool.
for _dependency in (field_mask_pb2, struct_pb2, timestamp_pb2):
    _POOL.AddSerializedFile(_dependency.DESCRIPTOR.serialized_pb)


def Default() -> descriptor_pool.DescriptorPool:
    """Stands in for descriptor_pool.Default() in the generated modules."""
    return _POOL
'''


def _rewrite(text: str) -> str:
    text = _IMPORT.sub(lambda m: f"{m.group(1)} {IMPORT_PREFIX}{m.group(2)}", text)
    return text.replace(_DEFAULT_POOL_IMPORT, _PRIVATE_POOL_IMPORT)


def generate(out_root: Path, proto_dir: Path = PROTO_DIR) -> Path:
    """Write the generated package tree under out_root; returns out_root/memsvc_client/_gen."""
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp)
        protos = sorted(str(p.relative_to(proto_dir)) for p in (proto_dir / "memsvc" / "v1").glob("*.proto"))
        well_known = str(resources.files("grpc_tools") / "_proto")
        args = [
            "protoc",
            f"-I{proto_dir}",
            f"-I{well_known}",
            f"--python_out={raw}",
            f"--pyi_out={raw}",
            f"--grpc_python_out={raw}",
            *protos,
        ]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        gen = out_root / GEN_PACKAGE
        if gen.exists():
            shutil.rmtree(gen)
        gen.mkdir(parents=True)
        for source in sorted(raw.rglob("*")):
            if source.is_dir():
                continue
            target = gen / source.relative_to(raw)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(_rewrite(source.read_text()))
        for package in [gen, *sorted(p for p in gen.rglob("*") if p.is_dir())]:
            (package / "__init__.py").write_text(INIT_TEXT)
        (gen / "_pool.py").write_text(POOL_TEXT)
        return gen


def differences(fresh: Path, current: Path) -> list[str]:
    """Files missing, extra or changed in current compared to fresh (ignoring caches)."""

    def tree(root: Path) -> dict[str, Path]:
        if not root.is_dir():
            return {}
        return {str(p.relative_to(root)): p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}

    want, have = tree(fresh), tree(current)
    missing = [f"missing {n}" for n in sorted(want.keys() - have.keys())]
    extra = [f"extra {n}" for n in sorted(have.keys() - want.keys())]
    changed = [
        f"changed {n}" for n in sorted(want.keys() & have.keys()) if not filecmp.cmp(want[n], have[n], shallow=False)
    ]
    return missing + extra + changed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if memsvc_client/_gen is stale")
    parser.add_argument("--out", type=Path, help="write the package tree under this directory instead")
    parser.add_argument("--proto-dir", type=Path, default=PROTO_DIR, help="the proto root (default: proto/)")
    options = parser.parse_args()
    if options.out is not None:
        print(f"generated {generate(options.out, options.proto_dir)}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp), options.proto_dir)
        current = HERE / GEN_PACKAGE
        if options.check:
            stale = differences(fresh, current)
            if stale:
                print(f"{current} is stale ({stale}); run `python clients/python/generate.py`", file=sys.stderr)
                return 1
            print(f"{current} is up to date")
            return 0
        if current.exists():
            shutil.rmtree(current)
        shutil.copytree(fresh, current)
        print(f"generated {current}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
