"""Makes clients/python importable when the memsvc-client package is not installed in the venv."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

CLIENT_DIR = Path(__file__).resolve().parents[2] / "clients" / "python"

if importlib.util.find_spec("memsvc_client") is None:
    sys.path.insert(0, str(CLIENT_DIR))
