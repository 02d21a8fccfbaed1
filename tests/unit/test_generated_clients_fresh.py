"""The checked-in client code and API reference match what proto/ generates today."""

from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Where each language's generated code lives, relative to the repository root.
GENERATED = {
    "typescript": Path("clients/typescript/src/gen"),
    "go": Path("clients/go/gen"),
}
# tools/gen_clients.sh exits with this when a code generator is not installed.
GENERATOR_MISSING = 3


def _tree(root: Path) -> dict[str, Path]:
    if not root.is_dir():
        return {}
    return {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}


def _differences(fresh: Path, current: Path) -> list[str]:
    """Relative paths that are missing, extra or different in current compared to fresh."""
    want, have = _tree(fresh), _tree(current)
    missing = [f"missing {name}" for name in sorted(want.keys() - have.keys())]
    extra = [f"extra {name}" for name in sorted(have.keys() - want.keys())]
    changed = [
        f"changed {name}"
        for name in sorted(want.keys() & have.keys())
        if not filecmp.cmp(want[name], have[name], shallow=False)
    ]
    return missing + extra + changed


@pytest.mark.parametrize("language", sorted(GENERATED))
def test_generated_client_code_is_fresh(language: str, tmp_path: Path) -> None:
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed, so buf cannot run (install Node.js 20+ and npm)")
    result = subprocess.run(
        [str(ROOT / "tools" / "gen_clients.sh"), "--out", str(tmp_path), "--lang", language],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    if result.returncode == GENERATOR_MISSING:
        pytest.skip(result.stderr.strip().splitlines()[-1])
    assert result.returncode == 0, f"generation failed:\n{result.stdout}\n{result.stderr}"
    generated = GENERATED[language]
    assert _tree(tmp_path / generated), f"buf generate wrote nothing under {generated}"
    stale = _differences(tmp_path / generated, ROOT / generated)
    assert not stale, f"{generated} is stale, run `make gen-clients`: {stale}"


def test_api_reference_is_fresh() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_api_docs.py"), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"{result.stderr.strip()} (run `make docs`)"
