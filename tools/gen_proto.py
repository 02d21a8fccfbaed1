"""Regenerate the Python code of proto/ into memsvc/v1, or check that it is up to date."""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
OUT_PACKAGE = Path("memsvc") / "v1"
INIT_TEXT = '"""Generated from proto/memsvc/v1 by tools/gen_proto.py; do not edit."""\n'


def generate(out_root: Path) -> None:
    protos = sorted(str(p.relative_to(PROTO_DIR)) for p in (PROTO_DIR / "memsvc" / "v1").glob("*.proto"))
    well_known = str(resources.files("grpc_tools") / "_proto")
    args = [
        "protoc",
        f"-I{PROTO_DIR}",
        f"-I{well_known}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    (out_root / OUT_PACKAGE / "__init__.py").write_text(INIT_TEXT)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if memsvc/v1 is stale")
    check = parser.parse_args().check
    with tempfile.TemporaryDirectory() as tmp:
        out_root = Path(tmp)
        generate(out_root)
        fresh = out_root / OUT_PACKAGE
        current = ROOT / OUT_PACKAGE
        if check:
            names = {p.name for p in fresh.iterdir()}
            existing = {p.name for p in current.iterdir() if p.is_file()} if current.exists() else set()
            stale = sorted(
                n for n in names if not (current / n).exists() or not filecmp.cmp(fresh / n, current / n, shallow=False)
            )
            extra = sorted(existing - names)
            if stale or extra:
                print(f"generated code is stale: {stale + extra}; run `make gen`", file=sys.stderr)
                return 1
            print("generated code is up to date")
            return 0
        if current.exists():
            shutil.rmtree(current)
        shutil.copytree(fresh, current)
        print(f"generated {sorted(p.name for p in current.iterdir())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
