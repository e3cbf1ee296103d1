"""Faults on the broker (corral/faults/broker.py), in process: their JSON form (model.py), that
they never fire on a request while a coordinator fault answers every request of its group but
FindCoordinator, group faults done at once or refused with Kafka's error, storage faults summed
into the log store's, refused connections set and set again on the reactor."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import trio
from harness.consumer import ConsumerDriver, Topics, make_coordinator
from wire_data import batch

from corral import _core
from corral.errors import ErrorCode
from corral.faults.inject import Injector
from corral.faults.model import FaultError, FaultRefused, parse
from corral.faults.registry import Faults
from corral.network.apis import ApiKey, api_table

TABLE = _core.ApiTable(api_table().advertised())


def request(api: int, version: int, body: dict[str, Any]) -> _core.Request:
    connection = _core.Connection(TABLE, 1 << 20)
    connection.feed(_core.encode_request(api, version, 3, body, "app"))
    item = connection.next()
    assert isinstance(item, _core.Request)
    return item


@pytest.mark.parametrize(
    "spec,kind",
    [
        ({"fence": True, "group": "g", "member": "m"}, "fence"),
        ({"rebalance": True, "group": "g"}, "rebalance"),
        ({"target": {"m": {"t": [0, 1]}}, "group": "g"}, "target"),
        ({"coordinator": "NOT_COORDINATOR", "group": "g", "duration_ms": 10}, "coordinator"),
        ({"coordinator": 14, "group": "g", "count": 2}, "coordinator"),
        ({"unload": True, "group": "g", "duration_ms": 10}, "unload"),
        ({"disk_full": True}, "storage"),
        ({"failing_fsyncs": 3, "fsync_delay_ms": 5, "duration_ms": 10}, "storage"),
        ({"refuse_connections": True, "listener": "PLAINTEXT", "duration_ms": 10}, "refuse"),
    ],
)
def test_broker_faults_parse_and_list_as_given(spec, kind):
    fault = parse(spec, 1, 0.0)
    assert fault.action.kind == kind
    described = fault.describe()
    for name, value in spec.items():
        if name == "coordinator":
            value = ErrorCode(value).name if isinstance(value, int) else value
        assert described[name] == value


@pytest.mark.parametrize(
    "spec,reason",
    [
        ({"fence": True, "group": "g"}, "fence needs a member"),
        ({"rebalance": True}, "rebalance needs a group"),
        ({"rebalance": True, "group": "g", "count": 1}, "rebalance takes no count"),
        ({"target": [1], "group": "g"}, "target: not an object"),
        ({"target": {"m": {"t": [-1]}}, "group": "g"}, "target: t"),
        ({"coordinator": "UNKNOWN_MEMBER_ID", "group": "g"}, "is not one of"),
        ({"coordinator": "NOT_COORDINATOR"}, "coordinator needs a group"),
        ({"unload": True, "group": "g", "api": "Fetch"}, "unload takes no api"),
        ({"disk_full": True, "probability": 0.5}, "storage fault takes no probability"),
        ({"disk_full": True, "error": "NOT_COORDINATOR"}, "exactly one action"),
        ({"refuse_connections": "yes"}, "is not true"),
    ],
)
def test_bad_broker_faults_are_refused(spec, reason):
    with pytest.raises(FaultError, match=reason):
        parse(spec, 1, 0.0)


def test_broker_faults_never_fire_on_requests_and_a_coordinator_fault_spares_find_coordinator():
    faults = Faults()
    faults.add({"unload": True, "group": "g"})
    faults.add({"disk_full": True})
    heartbeat = request(
        ApiKey.HEARTBEAT, 4, {"group_id": "g", "generation_id": 1, "member_id": "m"}
    )
    assert faults.fire(heartbeat) is None
    move = faults.add({"coordinator": "COORDINATOR_LOAD_IN_PROGRESS", "group": "g"})
    fired = faults.fire(heartbeat)
    assert fired is not None and fired.fault is move
    find = request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"]})
    assert faults.fire(find) is None
    other = request(ApiKey.HEARTBEAT, 4, {"group_id": "h", "generation_id": 1, "member_id": "m"})
    assert faults.fire(other) is None
    assert faults.fired_by_kind == {"coordinator": 1}


def consumer_group() -> ConsumerDriver:
    topics = Topics()
    topics.add("t", 4)
    driver = ConsumerDriver(topics, make_coordinator(topics))
    for i in range(2):
        driver.join(f"m{i}")
    driver.converge()
    return driver


def test_group_faults_are_done_at_once_or_refused_with_kafkas_error():
    driver = consumer_group()
    injector = Injector(broker=SimpleNamespace(groups=driver.coordinator))  # type: ignore[arg-type]
    faults = injector.faults
    m0 = driver.clients["m0"].member_id
    fence = faults.add({"fence": True, "group": "g", "member": m0})
    assert (fence.fired, fence.active, fence.ended) == (1, False, "done")
    assert m0 not in driver.group.members and not faults.active
    with pytest.raises(FaultRefused) as refused:
        faults.add({"fence": True, "group": "g", "member": m0})
    assert (refused.value.status, refused.value.kafka_error) == (404, "UNKNOWN_MEMBER_ID")
    with pytest.raises(FaultRefused) as refused:
        faults.add({"rebalance": True, "group": "nope"})
    assert (refused.value.status, refused.value.kafka_error) == (404, "GROUP_ID_NOT_FOUND")
    m1 = driver.clients["m1"].member_id
    with pytest.raises(FaultRefused) as refused:
        faults.add({"target": {m1: {"t": [4]}}, "group": "g"})
    assert (refused.value.status, refused.value.kafka_error) == (400, "UNKNOWN_TOPIC_OR_PARTITION")
    target = faults.add({"target": {m1: {"t": [0, 1, 2, 3]}}, "group": "g"})
    assert target.id == fence.id + 1, "a refused fault takes no id"
    epoch = driver.group.group_epoch
    faults.add({"rebalance": True, "group": "g"})
    assert driver.group.group_epoch == epoch + 1
    assert faults.fired_by_kind == {"fence": 1, "target": 1, "rebalance": 1}
    assert [f["ended"] for f in faults.listing()] == ["done"] * 3


class Reactor:
    def __init__(self) -> None:
        self.refusals: list[tuple[int | None, str | None]] = []
        self.refused_connections = 0

    def set_short_paths(self, enabled: bool) -> None:
        pass

    def refuse_connections(self, duration_ms: int | None, listener: str | None = None) -> int:
        self.refusals.append((duration_ms, listener))
        return 0 if listener == "NOPE" else 1


def test_storage_faults_add_up_and_refusals_are_set_again_when_one_ends(tmp_path):
    store = _core.LogStore(str(tmp_path))
    broker = SimpleNamespace(logs=SimpleNamespace(store=store), listeners={"PLAINTEXT": None})

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            reactor = Reactor()
            injector = Injector(broker=broker)  # type: ignore[arg-type]
            injector.attach(reactor, nursery, lambda r: None, lambda r, b: None)  # type: ignore[arg-type]
            faults = injector.faults
            full = faults.add({"disk_full": True})
            slow = faults.add({"fsync_delay_ms": 7, "failing_fsyncs": 2})
            assert store.storage_faults[:3] == (True, 2, 7)
            faults.add({"failing_fsyncs": 3})
            assert store.storage_faults[:3] == (True, 5, 7)
            faults.remove(full.id)
            assert store.storage_faults[:3] == (False, 5, 7)
            faults.remove(slow.id)
            assert store.storage_faults[:3] == (False, 5, 0), "another still fails passes"
            faults.clear()
            assert store.storage_faults[:3] == (False, 0, 0)
            with pytest.raises(FaultError, match="no listener"):
                faults.add({"refuse_connections": True, "listener": "NOPE"})
            first = faults.add({"refuse_connections": True, "duration_ms": 60_000})
            faults.add({"refuse_connections": True, "listener": "PLAINTEXT"})
            reactor.refused_connections = 4
            assert [f["fired"] for f in faults.listing()] == [4, 4]
            faults.remove(first.id)
            assert reactor.refusals[-2:] == [(0, None), (None, "PLAINTEXT")]
            assert faults.fired_by_kind["refuse"] == 4
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_a_failing_fsyncs_fault_is_done_once_its_passes_failed(tmp_path):
    store = _core.LogStore(str(tmp_path))
    broker = SimpleNamespace(logs=SimpleNamespace(store=store))
    injector = Injector(broker=broker)  # type: ignore[arg-type]
    fault = injector.faults.add({"failing_fsyncs": 1})
    assert injector.faults.listing()[0]["active"]
    store.open_partition("t", 0, 1 << 20, -1, -1)
    store.append("t", 0, batch(2))
    with pytest.raises(_core.StorageError):
        store.flush()
    listed = injector.faults.listing()[0]
    assert (listed["fired"], listed["active"], listed["ended"]) == (1, False, "count")
    assert store.storage_faults[:2] == (False, 0) and fault.fired == 1
