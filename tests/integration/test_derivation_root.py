"""The key derivation root: stored once, wrapped by the master key ring, kept by rotation."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsvc.crypto.derivation import load_key_derivation
from memsvc.crypto.keyring import MasterKeyRing
from memsvc.crypto.rotation import rotate_master_key
from memsvc.errors import FailedPrecondition
from memsvc.stores.records.base import RecordStore
from memsvc.stores.records.postgres import PostgresRecordStore
from memsvc.stores.records.sqlite import SqliteRecordStore
from tests.backends import fresh_schema
from tests.conftest import LoopThread

pytestmark = pytest.mark.integration


def _key() -> bytes:
    return os.urandom(32)


def _ring(*keys: tuple[int, bytes]) -> MasterKeyRing:
    return MasterKeyRing.parse(",".join(f"{v}:{base64.b64encode(k).decode()}" for v, k in keys))


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, loop_thread: LoopThread, tmp_path: Path) -> Iterator[RecordStore]:
    if request.param == "sqlite":
        opened: RecordStore = SqliteRecordStore(tmp_path / "root.db")
        loop_thread.run(opened.migrate())
        yield opened
        loop_thread.run(opened.close())
        return
    with fresh_schema() as url:
        opened = PostgresRecordStore(url)
        loop_thread.run(opened.migrate())
        yield opened
        loop_thread.run(opened.close())


def test_the_root_outlives_the_master_key_it_was_wrapped_by(store: RecordStore, loop_thread: LoopThread) -> None:
    old, new = _key(), _key()
    first = loop_thread.run(load_key_derivation(store, _ring((1, old))))
    # What keys were derived from before the root was stored: a store written then keeps its postings.
    assert first.derive("lexical") == hmac.new(old, b"memsvc/v1/derive|lexical", hashlib.sha256).digest()
    assert loop_thread.run(load_key_derivation(store, _ring((2, new), (1, old)))) == first  # stored once

    with pytest.raises(FailedPrecondition, match="master key version 1"):
        loop_thread.run(load_key_derivation(store, _ring((2, new))))  # retired before rotating

    report = loop_thread.run(rotate_master_key(store, _ring((2, new), (1, old))))
    assert report.root_rewrapped
    assert loop_thread.run(load_key_derivation(store, _ring((2, new)))) == first
    again = loop_thread.run(rotate_master_key(store, _ring((2, new))))
    assert not again.root_rewrapped  # already under key 2


def test_rotation_before_any_server_started_keeps_the_old_derivation(
    store: RecordStore, loop_thread: LoopThread
) -> None:
    """Upgrade, rotate at once, remove the old key, then start: the root still comes from the old key."""
    old, new = _key(), _key()
    loop_thread.run(rotate_master_key(store, _ring((2, new), (1, old))))
    derivation = loop_thread.run(load_key_derivation(store, _ring((2, new))))
    assert derivation.derive("lexical") == hmac.new(old, b"memsvc/v1/derive|lexical", hashlib.sha256).digest()
