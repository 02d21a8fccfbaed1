"""Regenerate memsvc_client/_gen from proto/memsvc/v1, or check that the checked-in code is fresh.

Run from anywhere: ``python clients/python/generate.py`` (needs grpcio-tools). ``--check``
exits 1 when the checked-in code differs from what the protos generate; ``--out DIR`` writes
the package tree (``memsvc_client/_gen/...``) under DIR instead of into the client.

protoc names imports after the proto path (``from memsvc.v1 import memory_pb2``), which would
import the server's package. The imports are rewritten to ``memsvc_client._gen.memsvc.v1``
after generation; the proto file names stay ``memsvc/v1/*.proto`` on purpose, so that the
descriptors are byte-identical to the server's and both sets of modules can live in one
process (the protobuf descriptor pool accepts an identical file twice, but not the same
message names from two differently named files, which an include-path mapping would give).
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


def generate(out_root: Path) -> Path:
    """Write the generated package tree under out_root; returns out_root/memsvc_client/_gen."""
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp)
        protos = sorted(str(p.relative_to(PROTO_DIR)) for p in (PROTO_DIR / "memsvc" / "v1").glob("*.proto"))
        well_known = str(resources.files("grpc_tools") / "_proto")
        args = [
            "protoc",
            f"-I{PROTO_DIR}",
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
            text = _IMPORT.sub(lambda m: f"{m.group(1)} {IMPORT_PREFIX}{m.group(2)}", source.read_text())
            target.write_text(text)
        for package in [gen, *sorted(p for p in gen.rglob("*") if p.is_dir())]:
            (package / "__init__.py").write_text(INIT_TEXT)
        return gen


def differences(fresh: Path, current: Path) -> list[str]:
    """Files missing, extra or changed in current compared to fresh (ignoring caches)."""

    def tree(root: Path) -> dict[str, Path]:
        if not root.is_dir():
            return {}
        return {
            str(p.relative_to(root)): p
            for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        }

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
    options = parser.parse_args()
    if options.out is not None:
        print(f"generated {generate(options.out)}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp))
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
