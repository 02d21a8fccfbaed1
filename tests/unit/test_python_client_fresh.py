"""The Python client's checked-in stubs (clients/python/memsvc_client/_gen) match what proto/ generates."""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "python"
GEN = Path("memsvc_client") / "_gen"


def _tree(root: Path) -> dict[str, Path]:
    return {
        str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts
    }


def _same(a: Path, b: Path) -> bool:
    return filecmp.cmp(a, b, shallow=False)


def test_python_client_stubs_are_fresh(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(CLIENT / "generate.py"), "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"generation failed:\n{result.stdout}\n{result.stderr}"
    fresh, current = _tree(tmp_path / GEN), _tree(CLIENT / GEN)
    assert fresh, "generate.py wrote nothing"
    stale = sorted(
        [f"missing {n}" for n in fresh.keys() - current.keys()]
        + [f"extra {n}" for n in current.keys() - fresh.keys()]
        + [f"changed {n}" for n in fresh.keys() & current.keys() if not _same(fresh[n], current[n])]
    )
    assert not stale, f"{CLIENT / GEN} is stale, run `python clients/python/generate.py`: {stale}"


def test_python_client_stubs_stay_out_of_the_server_package_and_default_pool() -> None:
    modules = sorted((CLIENT / GEN).rglob("*_pb2*.py*"))
    assert modules
    for path in modules:
        text = path.read_text()
        assert "from memsvc.v1" not in text and "import memsvc.v1" not in text, path
        if path.name.endswith("_pb2.py"):
            assert "from memsvc_client._gen import _pool as _descriptor_pool" in text, path
