"""The two engines behind cluster mode, started by the test (tests/kits/engines.py): etcd and
PostgreSQL keep the same rules, which tests/kits/memory_engine.py copies for the in-process
tests. Expiry is the engine's, fencing its conditional writes."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from engines import EngineProcess, free_port, start_engine
from memory_engine import MemoryEngine

from corral.cluster.engine import Engine, EngineError, Fenced, Lease, Node
from corral.cluster.engines import connect

TTL_MS = 1000


@pytest.fixture(scope="module", params=["postgres", "etcd"])
def engine_process(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EngineProcess]:
    with start_engine(request.param, tmp_path_factory.mktemp(request.param)) as started:
        yield started


@pytest.fixture
def engine(engine_process: EngineProcess) -> Iterator[Engine]:
    engine_process.reset()
    client = connect(engine_process.url)
    yield client
    client.close()


def expire() -> None:
    # etcd rounds a lease's TTL up to whole seconds and checks expiry every ~500 ms.
    time.sleep(TTL_MS / 1000 * 2 + 0.6)


def test_nodes_are_live_while_they_renew(engine: Engine) -> None:
    engine.register(Node(2, "127.0.0.1", 9093, "r1"), TTL_MS)
    engine.register(Node(1, "127.0.0.1", 9092), 60_000)
    assert engine.live_nodes() == [Node(1, "127.0.0.1", 9092), Node(2, "127.0.0.1", 9093, "r1")]
    expire()
    assert [n.node_id for n in engine.live_nodes()] == [1]
    engine.deregister(1)
    assert engine.live_nodes() == []


def test_a_shard_is_leased_to_one_node_and_its_epoch_bumps_on_every_take(engine: Engine) -> None:
    for node in (1, 2):
        engine.register(Node(node, "h", node), 60_000)
    first = engine.acquire(0, 1, TTL_MS)
    assert first == Lease(0, 1, 1)
    assert engine.acquire(0, 2, TTL_MS) is None  # held by node 1
    assert engine.owners() == {0: first}
    assert engine.renew([first], 60_000) == [first]
    again = engine.acquire(0, 1, 60_000)  # a node may take its own shard over
    assert again == Lease(0, 1, 2)
    assert engine.renew([first, again], 60_000) == [again]  # the old epoch is lost
    engine.release(again)
    assert engine.owners() == {}
    assert engine.acquire(0, 2, 60_000) == Lease(0, 2, 3)


def test_an_expired_lease_is_taken_and_its_old_owner_fenced(engine: Engine) -> None:
    """Node 1 stops renewing (paused); node 2 takes the shard; node 1's writes are refused and
    leave nothing, whatever node 1 believes."""
    engine.register(Node(1, "h", 1), TTL_MS)
    old = engine.acquire(3, 1, TTL_MS)
    assert old is not None
    engine.append(old, (old.epoch, 0), b"before")
    expire()
    engine.register(Node(2, "h", 2), 60_000)
    new = engine.acquire(3, 2, 60_000)
    assert new == Lease(3, 2, old.epoch + 1)
    with pytest.raises(Fenced):
        engine.append(old, (old.epoch, 1), b"stale")
    with pytest.raises(Fenced):
        engine.put_snapshot(old, (old.epoch, 1), b"stale snapshot")
    assert engine.renew([old], 60_000) == []
    engine.append(new, (new.epoch, 0), b"after")
    image = engine.load(3)
    assert image.snapshot is None
    assert image.batches == [((old.epoch, 0), b"before"), ((new.epoch, 0), b"after")]


def test_a_snapshot_drops_the_batches_before_it(engine: Engine) -> None:
    engine.register(Node(1, "h", 1), 60_000)
    lease = engine.acquire(1, 1, 60_000)
    assert lease is not None
    for offset in range(5):
        engine.append(lease, (1, offset * 10), b"batch%d" % offset)
    big = bytes(range(256)) * (5 << 12)  # 5 MiB: above etcd's request limit
    engine.put_snapshot(lease, (1, 30), big)
    image = engine.load(1)
    assert image.snapshot == big and image.snapshot_position == (1, 30)
    assert image.batches == [((1, 30), b"batch3"), ((1, 40), b"batch4")]
    engine.put_snapshot(lease, (1, 50), b"small")
    image = engine.load(1)
    assert (image.snapshot, image.snapshot_position, image.batches) == (b"small", (1, 50), [])
    assert engine.load(2).snapshot is None  # another shard: nothing


def test_metadata_changes_only_by_compare_and_set(engine: Engine) -> None:
    assert engine.put_meta("topics/a", b"1", None)
    assert not engine.put_meta("topics/a", b"x", None)  # exists
    assert not engine.put_meta("topics/a", b"2", b"wrong")
    assert engine.put_meta("topics/a", b"2", b"1")
    assert engine.put_meta("topics/b", b"3", None)
    assert engine.put_meta("other", b"4", None)
    assert engine.get_meta("topics/") == {"topics/a": b"2", "topics/b": b"3"}
    assert engine.put_meta("topics/a", None, b"2")
    assert engine.get_meta("topics/") == {"topics/b": b"3"}


def test_the_engine_restarted_keeps_everything_acknowledged(
    engine: Engine, engine_process: EngineProcess
) -> None:
    engine.register(Node(1, "h", 1), 60_000)
    lease = engine.acquire(4, 1, 60_000)
    assert lease is not None
    for offset in range(20):
        engine.append(lease, (1, offset), b"%d" % offset)
    engine_process.kill()
    with pytest.raises(EngineError):
        engine.append(lease, (1, 20), b"while down")
    engine_process.start()
    # The first call after the restart may still find a dead connection.
    for _ in range(20):
        try:
            image = engine.load(4)
            break
        except EngineError:
            time.sleep(0.2)
    assert [data for _, data in image.batches] == [b"%d" % i for i in range(20)]
    assert engine.renew([lease], 60_000) == [lease]  # still ours: nobody took it
    engine.append(lease, (1, 20), b"20")


def test_the_memory_engine_follows_the_same_rules() -> None:
    """The in-process tests' engine, on the fencing case above."""
    engine = MemoryEngine()
    old = engine.acquire(0, 1, TTL_MS)
    assert old is not None
    engine.leases.clear()  # expired
    new = engine.acquire(0, 2, TTL_MS)
    assert new == Lease(0, 2, 2)
    with pytest.raises(Fenced):
        engine.append(old, (1, 0), b"stale")


def test_an_unknown_engine_is_refused_with_the_two_it_knows() -> None:
    with pytest.raises(ValueError, match="etcd://HOST:PORT or postgresql://"):
        connect("zookeeper://127.0.0.1:2181")


def test_a_missing_etcd_endpoint_list_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        connect("etcd://")


CHUNK = 1 << 20  # etcd.py writes values above this in parts


def test_big_batches_and_snapshots_round_trip_and_replace_each_other(engine: Engine) -> None:
    """Step by step, the image after each write: a batch above etcd's request limit, snapshots
    dropping what is before them, one replaced at the same position (ported from the engine
    branch's table)."""
    engine.register(Node(1, "h", 1), 60_000)
    lease = engine.acquire(5, 1, 60_000)
    assert lease is not None
    big = bytes(range(256)) * (CHUNK * 5 // 256 + 3)
    steps: list[tuple[str, tuple[int, int], bytes]] = [
        ("append", (1, 0), b"b0"),
        ("append", (1, 1), b"b1"),
        ("append", (1, 2), b"B" * (2 * CHUNK + 5)),
        ("snapshot", (1, 2), b"snap-1"),
        ("append", (1, 3), b"b3"),
        ("snapshot", (1, 4), big),
        ("snapshot", (1, 4), big[::-1]),
        ("append", (1, 4), b"b4"),
    ]
    expected = [
        (None, (0, 0), [(1, 0)]),
        (None, (0, 0), [(1, 0), (1, 1)]),
        (None, (0, 0), [(1, 0), (1, 1), (1, 2)]),
        (b"snap-1", (1, 2), [(1, 2)]),
        (b"snap-1", (1, 2), [(1, 2), (1, 3)]),
        (big, (1, 4), []),
        (big[::-1], (1, 4), []),
        (big[::-1], (1, 4), [(1, 4)]),
    ]
    written: dict[tuple[int, int], bytes] = {}
    for (kind, position, data), (snapshot, at, batches) in zip(steps, expected):
        if kind == "append":
            engine.append(lease, position, data)
            written[position] = data
        else:
            engine.put_snapshot(lease, position, data)
        image = engine.load(5)
        assert (image.snapshot, image.snapshot_position) == (snapshot, at), (kind, position)
        assert image.batches == [(p, written[p]) for p in batches], (kind, position)


def test_a_fenced_snapshot_at_the_current_position_leaves_it_whole(engine: Engine) -> None:
    """A fenced owner retrying the snapshot the shard still has (its first answer lost) must not
    touch it: etcd's parts are per write, not per position. (Found by the engine branch's
    tests: parts named by position were overwritten, then deleted on the fencing.)"""
    engine.register(Node(1, "h", 1), TTL_MS)
    old = engine.acquire(6, 1, TTL_MS)
    assert old is not None
    snapshot = bytes(range(256)) * (CHUNK // 128)  # 2 MiB: parts on etcd
    engine.put_snapshot(old, (1, 10), snapshot)
    expire()
    engine.register(Node(2, "h", 2), 60_000)
    assert engine.acquire(6, 2, 60_000) is not None
    for data in (snapshot, snapshot[::-1], b"small"):
        with pytest.raises(Fenced):
            engine.put_snapshot(old, (1, 10), data)
        image = engine.load(6)
        assert image.snapshot == snapshot and image.snapshot_position == (1, 10)


def test_worker_threads_write_their_shards_at_once(engine: Engine) -> None:
    """A connection per thread: four shards written concurrently, each in order."""
    engine.register(Node(1, "h", 1), 60_000)
    leases = [engine.acquire(shard, 1, 60_000) for shard in range(10, 14)]
    errors: list[BaseException] = []

    def write(lease: Lease) -> None:
        try:
            for offset in range(25):
                engine.append(lease, (lease.epoch, offset), b"%d:%d" % (lease.shard, offset))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=write, args=(lease,)) for lease in leases if lease]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(threads) == 4
    for shard in range(10, 14):
        assert [data for _, data in engine.load(shard).batches] == [
            b"%d:%d" % (shard, offset) for offset in range(25)
        ]


def test_an_engine_that_cannot_be_reached_is_an_engine_error(engine_process: EngineProcess) -> None:
    """And etcd takes the next endpoint of its URL when one is down."""
    dead = f"127.0.0.1:{free_port()}"
    if engine_process.kind == "postgres":
        with pytest.raises(EngineError):
            connect(f"postgresql://postgres@{dead}/postgres").live_nodes()
        return
    engine = connect(f"etcd://{dead},{engine_process.url.removeprefix('etcd://')}")
    engine.register(Node(7, "h", 7), 60_000)
    assert Node(7, "h", 7) in engine.live_nodes()
    engine.close()
    with pytest.raises(EngineError):
        connect(f"etcd://{dead}").live_nodes()
