"""What each worker process is told: the shared address, the count, a metrics port of its own."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from memsvc.config import Settings
from memsvc.workers import reserve_port, worker_settings


def test_each_worker_gets_the_shared_address_and_its_own_metrics_port() -> None:
    base = Settings(milvus_uri="http://127.0.0.1:19530", metrics_listen="0.0.0.0:9464", data_dir=Path("/tmp/x"))
    second = worker_settings(base, "127.0.0.1:50051", 1, 3)
    assert (second.listen, second.workers, second.metrics_listen) == ("127.0.0.1:50051", 3, "0.0.0.0:9465")
    assert worker_settings(base.model_copy(update={"metrics_listen": ""}), "h:1", 2, 3).metrics_listen == ""


def test_workers_default_to_one_on_milvus_lite_and_more_are_refused() -> None:
    assert Settings(milvus_uri="").resolved_workers == 1
    assert Settings(milvus_uri="http://m:19530", workers=3).resolved_workers == 3
    with pytest.raises(ValidationError, match="workers > 1 needs a Milvus server"):
        Settings(milvus_uri="", workers=2)


def test_a_reserved_port_is_chosen_once_and_shared_not_taken() -> None:
    held, listen = reserve_port("127.0.0.1:0")
    try:
        host, port = listen.rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        again, same = reserve_port(listen)  # a worker binding the same port with SO_REUSEPORT
        again.close()
        assert same == listen
    finally:
        held.close()
