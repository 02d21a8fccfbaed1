"""Unit tests are pure logic: they load no embedding model (the suite-wide model fixture is off here)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
MODEL_RUNTIMES = ("onnxruntime", "torch", "sentence_transformers")


@pytest.fixture(scope="session", autouse=True)
def model_ready() -> None:
    """Overrides the suite's autouse fixture of the same name, which builds the shared model."""


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A run of unit tests alone that imported a model runtime fails: a unit test grew a model."""
    only_unit = bool(session.items) and all(Path(item.path).is_relative_to(HERE) for item in session.items)
    loaded = [name for name in MODEL_RUNTIMES if name in sys.modules]
    if only_unit and loaded:
        print(f"\nunit tests imported {', '.join(loaded)}: move the test that needs a model to tests/integration")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
