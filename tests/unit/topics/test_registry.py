"""The topic registry in process: creations and deletions are written by the writer task (group
committed), answered once durable, and what a restart loads is what was acknowledged."""

from __future__ import annotations

import json

import pytest
import trio

from corral.config.settings import Settings
from corral.errors import ErrorCode
from corral.topics import registry as topics_module
from corral.topics.registry import TopicError, TopicStore


def state(store: TopicStore) -> dict:
    return {
        name: (str(t.id), t.partitions, t.configs, t.internal) for name, t in store.by_name.items()
    }


async def with_writer(store: TopicStore, work) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.run)
        await work()
        nursery.cancel_scope.cancel()


def test_changes_are_durable_and_reload_identically(tmp_path, monkeypatch):
    monkeypatch.setattr(topics_module, "COMPACT_AFTER", 50)  # several compactions on the way
    store = TopicStore(tmp_path, Settings())
    deleted = []

    async def hook(topic):
        deleted.append(topic.name)

    store.on_delete.append(hook)

    async def work():
        for round_ in range(4):
            # One batch of creations queued together: one writer pass.
            pending = [
                store.create(f"t{round_}-{i}", 1 + i % 3, {"retention.ms": "1000"} if i % 2 else {})
                for i in range(40)
            ]
            assert all(store.get(f"t{round_}-{i}") is None for i in range(40)), (
                "visible before durable"
            )
            with pytest.raises(TopicError) as taken:
                store.check_new(f"t{round_}-0", 1, 1, {})
            assert taken.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
            for p in pending:
                await p
            for i in range(0, 40, 3):
                await store.delete(store.get(f"t{round_}-{i}"))

    trio.run(with_writer, store, work)
    assert len(deleted) == 4 * 14
    assert len(store.by_name) == 4 * 26
    reloaded = TopicStore(tmp_path, Settings())
    assert state(reloaded) == state(store)


def test_a_torn_journal_tail_is_cut(tmp_path):
    store = TopicStore(tmp_path, Settings())

    async def work():
        await store.create("a", 1)
        await store.create("b", 2)

    trio.run(with_writer, store, work)
    journal = tmp_path / TopicStore.JOURNAL
    whole = journal.read_bytes()
    with open(journal, "ab") as f:  # a crash in the middle of a third entry
        f.write(json.dumps({"op": "create", "topic": {"name": "c"}}).encode()[:20])
    reloaded = TopicStore(tmp_path, Settings())
    assert sorted(reloaded.by_name) == ["a", "b"]
    assert journal.read_bytes() == whole


def test_a_failed_write_fails_the_change_and_keeps_the_registry(tmp_path, monkeypatch):
    store = TopicStore(tmp_path, Settings())

    def broken_write(entries, snapshot=None):
        raise OSError(28, "No space left on device")

    async def work():
        await store.create("kept", 1)
        monkeypatch.setattr(store, "_write", broken_write)
        with pytest.raises(OSError):
            await store.create("lost", 1)
        with pytest.raises(OSError):
            await store.delete(store.get("kept"))
        assert store.get("lost") is None and store.get("kept") is not None
        assert store.changing("lost") is None and store.changing("kept") is None

    trio.run(with_writer, store, work)
    assert sorted(TopicStore(tmp_path, Settings()).by_name) == ["kept"]


def test_a_failed_fold_keeps_the_journal_and_the_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(topics_module, "COMPACT_AFTER", 3)

    def disk_full(path, content):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(topics_module, "replace_durably", disk_full)
    store = TopicStore(tmp_path, Settings())

    async def work():
        for i in range(10):
            await store.create(f"t{i}", 1)  # each one acknowledged although every fold fails

    trio.run(with_writer, store, work)
    assert sorted(TopicStore(tmp_path, Settings()).by_name) == [f"t{i}" for i in range(10)]
