"""Storage faults made on purpose in the compiled log store (rust/log/faults.rs): a full disk
refuses appends without writing anything, failing fsyncs fail whole flush passes and leave the
appends waiting for the next one, and nothing is lost: after the faults are cleared every append
that succeeded is flushed and read back, across a reopen of the store."""

from __future__ import annotations

import errno

import pytest
from wire_data import batch

from corral import _core


def open_store(path) -> _core.LogStore:
    store = _core.LogStore(str(path))
    store.open_partition("t", 0, 1 << 20, -1, -1)
    return store


def test_off_by_default(tmp_path):
    store = open_store(tmp_path)
    assert store.storage_faults == (False, 0, 0, 0)
    store.append("t", 0, batch(3))
    assert store.flush() == 3


def test_disk_full_refuses_appends_and_writes_nothing(tmp_path):
    store = open_store(tmp_path)
    store.append("t", 0, batch(2))
    store.set_storage_faults(disk_full=True)
    with pytest.raises(_core.StorageError) as refused:
        store.append("t", 0, batch(5))
    assert refused.value.errno == errno.ENOSPC
    assert store.flush() == 2, "what the disk holds is still made durable"
    store.set_storage_faults()
    assert store.append("t", 0, batch(1)).base_offset == 2, "the refused batch took no offsets"
    assert store.storage_faults[3] == 1


def test_failed_fsyncs_lose_nothing(tmp_path):
    store = open_store(tmp_path)
    store.set_storage_faults(failing_fsyncs=2)
    store.append("t", 0, batch(4))
    for _ in range(2):
        with pytest.raises(_core.StorageError):
            store.flush()
    store.append("t", 0, batch(3))
    assert store.flush() == 7, "the failed passes' appends wait for the next one"
    assert store.storage_faults == (False, 0, 0, 2)
    store.close()
    reopened = open_store(tmp_path)
    read = reopened.read("t", 0, 0, 1 << 20, True)
    assert read.high_watermark == 7
