"""The process's log records: memsvc's own from INFO up, every library's from WARNING up."""

from __future__ import annotations

import logging


def configure(prefix: str = "") -> None:
    """A library's INFO records (ONNX tooling, the vector engine, the MCP SDK) are its own
    progress, which a person starting memsvc does not need; memsvc says what it is doing itself."""
    logging.basicConfig(level=logging.WARNING, format=f"%(asctime)s %(levelname)s {prefix}%(name)s: %(message)s")
    logging.getLogger("memsvc").setLevel(logging.INFO)
