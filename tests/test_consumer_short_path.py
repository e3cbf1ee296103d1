"""The network thread's short path for steady-state ConsumerGroupHeartbeats
(rust/short_paths/consumer_heartbeat.rs, rust/groups/consumer_heartbeat_view.rs).

In process, against the coordinator: whenever the view would answer a heartbeat, the coordinator
would have answered the same and written nothing (a randomized differential run), and the view
follows the group through computations, topic changes, deletion and conversion. Over the wire,
against a broker running in this process (so that the test can count what reaches Python):
steady heartbeats never reach the Python handler and get the coordinator's exact bytes, every
other heartbeat does and gets the coordinator's answer, and sessions kept alive only by the short
path do not expire."""

from __future__ import annotations

import random
import time

import pytest
import trio
from consumer_harness import (
    ConsumerDriver,
    RecordingLog,
    Topics,
    answer,
    check_view,
    make_coordinator,
    random_change,
    request,
)
from python_handlers import record_python_calls
from rawwire import RawClient

from corral.config.settings import Settings
from corral.errors import ErrorCode
from corral.groups.consumer import MemberState
from corral.groups.coordinator import GroupCoordinator
from corral.network.apis import ApiKey
from corral.server import Server

CLIENT = ("client", "/127.0.0.1")  # the client id and host consumer_harness.request sends


def view_answer(coordinator, group_id, client) -> int | None:
    view = coordinator.consumer_heartbeat_view
    return view.answer(group_id, client.member_id, client.instance_id, client.epoch, *CLIENT)


def one_group(partitions: int) -> tuple[Topics, GroupCoordinator, ConsumerDriver]:
    """A coordinator and a driver of its group "g", subscribed to topic "t"."""
    topics = Topics()
    topics.add("t", partitions)
    coordinator = make_coordinator(topics)
    return topics, coordinator, ConsumerDriver(topics, coordinator)


def steady(driver: ConsumerDriver, name: str) -> dict:
    """An incremental heartbeat that changes nothing (what the network thread answers)."""
    client = driver.clients[name]
    return driver._send(
        client,
        request(driver.group_id, client.member_id, client.epoch, instance_id=client.instance_id),
    )


# ================================================================================ in process ===


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_the_view_answers_only_what_the_coordinator_answers_without_a_change(seed):
    rng = random.Random(seed)
    topics = Topics()
    topics.add("t", 8)
    topics.add("u", 3)
    log = RecordingLog()
    coordinator = make_coordinator(topics, log=log)
    drivers = [ConsumerDriver(topics, coordinator, group_id=f"g{i}") for i in range(2)]
    answered = asked = 0
    for step in range(400):
        d = rng.choice(drivers)
        name = rng.choice("abcd")
        client = d.clients.get(name)
        action = rng.random()
        if client is None or not client.joined:
            d.join(
                name,
                names=rng.choice([["t"], ["t", "u"]]),
                regex=rng.choice([None, "u"]),
                instance_id=rng.choice([None, f"i{name}"]),
            )
        elif action < 0.55:
            asked += 1
            interval = view_answer(coordinator, d.group_id, client)
            before = len(log.pairs)
            result = steady(d, name)
            if interval is not None:
                answered += 1
                assert result == {
                    "error_code": ErrorCode.NONE,
                    "error_message": None,
                    "member_id": client.member_id,
                    "member_epoch": client.epoch,
                    "heartbeat_interval_ms": interval,
                    "assignment": None,
                }, step
                assert len(log.pairs) == before, "the coordinator wrote for a steady heartbeat"
        else:
            random_change(d, rng, topics, step, name)
    assert answered > asked // 4, (answered, asked)


def test_a_settled_group_is_answered_and_an_unsettled_one_is_not():
    topics, coordinator, d = one_group(6)
    d.join("a")
    d.join("b")
    d.converge()
    group = d.group
    assert group.state_name == "Stable"
    for name in "ab":
        assert view_answer(coordinator, "g", d.clients[name]) == 5000

    # A target computed in a worker thread: meanwhile members reconcile toward the current
    # target, which the view answers (a big group's heartbeats would all queue for Python).
    group.computing_epoch = group.group_epoch + 1
    check_view(coordinator)
    assert view_answer(coordinator, "g", d.clients["a"]) == 5000
    group.computing_epoch = None

    coordinator.on_topics_changed({"t"})  # a subscribed topic may have changed
    check_view(coordinator)
    assert view_answer(coordinator, "g", d.clients["a"]) is None
    epoch = group.group_epoch
    steady(d, "a")  # the coordinator looks at the metadata: nothing to bump
    assert not group.metadata_expired and group.group_epoch == epoch
    assert view_answer(coordinator, "g", d.clients["b"]) == 5000
    # A partition more does change the metadata: the group epoch moves (not the short path).
    topics.by_name["t"].partitions += 1
    coordinator.on_topics_changed({"t"})
    steady(d, "a")
    assert group.group_epoch == epoch + 1
    assert view_answer(coordinator, "g", d.clients["b"]) is None
    d.converge()
    assert view_answer(coordinator, "g", d.clients["b"]) == 5000

    # A heartbeat from another client id rewrites the member's metadata: the coordinator's.
    view = coordinator.consumer_heartbeat_view
    a = d.clients["a"]
    assert view.answer("g", a.member_id, None, a.epoch, "other", CLIENT[1]) is None


def test_the_view_forgets_deleted_groups():
    _, coordinator, d = one_group(2)
    view = coordinator.consumer_heartbeat_view
    d.join("a")
    assert set(view.contents()) == {"g"}
    d.leave("a")
    group = d.group
    assert answer(coordinator.delete_group("g")) == ErrorCode.NONE
    assert "g" not in coordinator.groups and view.contents() == {}
    # A stale object of the deleted group changes nothing any more.
    group.metadata_expired = True
    assert view.contents() == {}
    d.join("b")
    assert set(view.contents()) == {"g"}


def test_a_fenced_member_leaves_the_view_and_its_session_timer_goes():
    _, coordinator, d = one_group(2)
    d.join("a")
    a = d.clients["a"]
    member = d.group.members[a.member_id]
    key = member.session_key
    assert key and coordinator.consumer_heartbeat_view.contents()["g"][3][a.member_id][6] == key
    coordinator.shard_of(d.group.group_id).consumer.fence(d.group, member, "test")
    assert a.member_id not in coordinator.consumer_heartbeat_view.contents()["g"][3]
    assert view_answer(coordinator, "g", a) is None
    assert key not in coordinator.timers.wheel and key not in coordinator.timers.callbacks


# ================================================================================= the wire ===


class InProcessBroker:
    """A broker served by the trio loop of this process: its coordinator and view are the
    test's to look at (`run` executes a function on the loop, from the scenario's thread)."""

    def __init__(self, server: Server, port: int):
        self.server, self.port = server, port

    @property
    def groups(self):
        return self.server.broker.groups

    @property
    def view(self):
        return self.groups.consumer_heartbeat_view

    @staticmethod
    def run(fn, *args):
        return trio.from_thread.run_sync(fn, *args)


def with_broker(tmp_path, scenario, **settings) -> None:
    """Runs `scenario(broker)` in a worker thread while the broker serves on the main thread
    (where trio may take the shutdown signals)."""
    config = Settings(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path / "d"),
            "group.consumer.assignment.interval.ms": 0,
            **settings,
        }
    )
    config.check_bounds()
    server = Server(config)

    async def main():
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                port = await nursery.start(server.serve)
                try:
                    await trio.to_thread.run_sync(scenario, InProcessBroker(server, port))
                finally:
                    nursery.cancel_scope.cancel()

    trio.run(main)


@pytest.fixture
def python_calls(monkeypatch):
    """The ConsumerGroupHeartbeats that reach the Python handler."""
    return record_python_calls(monkeypatch, ApiKey.CONSUMER_GROUP_HEARTBEAT)


def create_topic(client: RawClient, name: str, partitions: int) -> bytes:
    topic = {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": 1,
        "assignments": [],
        "configs": [],
    }
    response = client.call(ApiKey.CREATE_TOPICS, 7, {"topics": [topic], "timeout_ms": 5000})
    assert response["topics"][0]["error_code"] == 0, response
    return response["topics"][0]["topic_id"]


class Member:
    """One KIP-848 member over raw frames (ConsumerGroupHeartbeat v1)."""

    def __init__(self, port: int, group_id: str, member_id: str, instance_id: str | None = None):
        self.client = RawClient(port)
        self.group_id, self.member_id, self.instance_id = group_id, member_id, instance_id
        self.epoch = 0
        self.owned: list[dict] = []

    def send(self, **fields) -> dict:
        body = {
            "group_id": self.group_id,
            "member_id": self.member_id,
            "member_epoch": self.epoch,
            "instance_id": self.instance_id,
            **fields,
        }
        response = self.client.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, body)
        if response["error_code"] == 0:
            self.epoch = response["member_epoch"]
            if response["assignment"] is not None:
                self.owned = response["assignment"]["topic_partitions"]
        return response

    def join(self, topics: list[str]) -> dict:
        return self.send(
            member_epoch=0,
            rebalance_timeout_ms=30000,
            subscribed_topic_names=topics,
            topic_partitions=[],
        )

    def acknowledge(self) -> dict:
        """An incremental heartbeat reporting what it owns (a client's answer to a new
        assignment)."""
        return self.send(topic_partitions=self.owned)

    def steady(self, epoch: int | None = None) -> dict:
        """An incremental heartbeat that changes nothing."""
        return self.send(**({} if epoch is None else {"member_epoch": epoch}))

    def steady_frame(self) -> bytes:
        """The raw response frame to a steady heartbeat, without its correlation id."""
        self.client.send(
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            1,
            {
                "group_id": self.group_id,
                "member_id": self.member_id,
                "member_epoch": self.epoch,
                "instance_id": self.instance_id,
            },
        )
        return self.client.receive_frame()[4:]

    def close(self) -> None:
        self.client.close()


def poll_for(consumers: list, seconds: float) -> None:
    """Polls every (librdkafka) consumer in turn, 50 ms each, for `seconds`."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for consumer in consumers:
            consumer.poll(0.05)


def settle(broker: InProcessBroker, *members: Member, rounds: int = 6) -> None:
    for _ in range(rounds):
        for m in members:
            assert m.acknowledge()["error_code"] == 0
    group = broker.groups.groups[members[0].group_id]
    assert broker.run(lambda: group.state_name) == "Stable"


def test_steady_heartbeats_are_answered_without_python(tmp_path, python_calls):
    def scenario(broker: InProcessBroker) -> None:
        a, b = (
            Member(broker.port, "wire", "member-a"),
            Member(broker.port, "wire", "member-b", "inst-b"),
        )
        with a.client, b.client:
            create_topic(a.client, "t", 4)
            assert a.join(["t"])["error_code"] == 0 and b.join(["t"])["error_code"] == 0
            settle(broker, a, b)
            through_python = len(python_calls)
            answered = broker.view.answered
            for _ in range(50):
                for m in (a, b):
                    r = m.steady()
                    assert (
                        r["error_code"],
                        r["member_id"],
                        r["member_epoch"],
                        r["assignment"],
                        r["heartbeat_interval_ms"],
                        r["error_message"],
                    ) == (0, m.member_id, m.epoch, None, 5000, None)
            assert len(python_calls) == through_python, "a steady heartbeat reached Python"
            assert broker.view.answered == answered + 100

            # The coordinator's answer to the same heartbeat is the same bytes: make it answer
            # one (a subscribed topic "changed": the next heartbeat looks at the metadata).
            group = broker.groups.groups["wire"]
            short = a.steady_frame()
            broker.run(setattr, group, "metadata_expired", True)
            from_python = a.steady_frame()
            assert len(python_calls) == through_python + 1
            assert from_python == short
            assert a.steady_frame() == short and len(python_calls) == through_python + 1

    with_broker(tmp_path, scenario)


def test_heartbeats_that_are_not_steady_reach_python(tmp_path, python_calls):
    def scenario(broker: InProcessBroker) -> None:
        a, b = Member(broker.port, "g2", "member-a"), Member(broker.port, "g2", "member-b")
        with a.client, b.client:
            tid = create_topic(a.client, "t", 4)
            create_topic(a.client, "u", 2)
            assert a.join(["t"])["error_code"] == 0
            settle(broker, a)
            epoch = a.epoch
            calls = len(python_calls)

            # A wrong epoch: FENCED_MEMBER_EPOCH, from the coordinator.
            r = a.steady(epoch + 1)
            assert r["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH and r["error_message"]
            assert len(python_calls) == calls + 1
            # An unknown member and a blank member id: the coordinator's errors too.
            ghost = Member(broker.port, "g2", "ghost")
            with ghost.client:
                ghost.epoch = epoch
                assert ghost.steady()["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
                ghost.member_id = " "
                assert ghost.steady()["error_code"] == ErrorCode.INVALID_REQUEST
            assert len(python_calls) == calls + 3

            # Another member joins: the group epoch moves and the target waits for the
            # assignment interval: until it is due, a's heartbeats are still the network
            # thread's (nothing changes for a before); once due, the coordinator's, which
            # computes the new target.
            assert b.join(["t"])["error_code"] == 0
            group = broker.groups.groups["g2"]
            assert broker.run(lambda: group.group_epoch > group.assignment_epoch)
            calls, answered = len(python_calls), broker.view.answered
            r = a.steady()
            assert (r["error_code"], r["member_epoch"], r["assignment"]) == (0, epoch, None)
            assert len(python_calls) == calls and broker.view.answered == answered + 1
            time.sleep(2.1)
            r = a.steady()  # the coordinator computes the new target: a gives some up
            assert r["error_code"] == 0 and r["assignment"] is not None
            assert len(python_calls) == calls + 1
            settle(broker, a, b)

            # A subscription change (an incremental heartbeat with names): the coordinator
            # bumps the group epoch.
            before = broker.run(lambda: group.group_epoch)
            calls = len(python_calls)
            r = a.send(subscribed_topic_names=["t", "u"])
            assert r["error_code"] == 0 and len(python_calls) == calls + 1
            assert broker.run(lambda: group.group_epoch) == before + 1
            # Any other non-null field goes to the coordinator as well.
            for fields in (
                {"rebalance_timeout_ms": 30000},
                {"server_assignor": "range"},
                {"rack_id": "r1"},
                {"topic_partitions": a.owned},
            ):
                calls = len(python_calls)
                assert a.send(**fields)["error_code"] == 0
                assert len(python_calls) == calls + 1, fields
            assert any(t["topic_id"] == tid for t in a.owned)

    with_broker(tmp_path, scenario, **{"group.consumer.assignment.interval.ms": 2000})


def test_short_path_keeps_sessions_alive_and_fenced_members_reach_python(tmp_path, python_calls):
    def scenario(broker: InProcessBroker) -> None:
        a, b = Member(broker.port, "live", "member-a"), Member(broker.port, "live", "member-b")
        with a.client, b.client:
            create_topic(a.client, "t", 4)
            assert a.join(["t"])["error_code"] == 0 and b.join(["t"])["error_code"] == 0
            settle(broker, a, b)
            group = broker.groups.groups["live"]
            calls, answered = len(python_calls), broker.view.answered
            # Both heartbeat through the short path only, for 2.5 session timeouts.
            deadline = time.monotonic() + 2.5
            while time.monotonic() < deadline:
                assert a.steady()["error_code"] == 0 and b.steady()["error_code"] == 0
                time.sleep(0.15)
            assert broker.run(lambda: set(group.members)) == {"member-a", "member-b"}
            assert len(python_calls) == calls and broker.view.answered > answered + 20

            # b goes silent and is fenced; its heartbeat then reaches Python (not the view).
            deadline = time.monotonic() + 5
            while "member-b" in broker.run(lambda: set(group.members)):
                assert time.monotonic() < deadline, "b was not fenced"
                assert a.steady()["error_code"] == 0
                time.sleep(0.15)
            assert "member-b" not in broker.view.contents()["live"][3]
            calls = len(python_calls)
            assert b.steady()["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
            assert len(python_calls) == calls + 1
            # The fencing bumped the epoch: a got (or now gets) b's partitions from Python,
            # then is answered by the short path again.
            settle(broker, a)
            calls = len(python_calls)
            assert a.steady()["error_code"] == 0 and len(python_calls) == calls
            assert broker.run(lambda: group.members["member-a"].current.state) is MemberState.STABLE

    with_broker(
        tmp_path,
        scenario,
        **{
            "group.consumer.session.timeout.ms": 1000,
            "group.consumer.min.session.timeout.ms": 1000,
            "group.consumer.heartbeat.interval.ms": 500,
            "group.consumer.min.heartbeat.interval.ms": 500,
        },
    )


def test_the_short_path_can_be_turned_off(tmp_path, python_calls):
    def scenario(broker: InProcessBroker) -> None:
        a = Member(broker.port, "off", "member-a")
        with a.client:
            create_topic(a.client, "t", 2)
            assert a.join(["t"])["error_code"] == 0
            settle(broker, a)
            calls = len(python_calls)
            for _ in range(5):
                assert a.steady()["error_code"] == 0
            assert len(python_calls) == calls + 5 and broker.view.answered == 0

    with_broker(tmp_path, scenario, **{"corral.group.heartbeat.short.path.enable": False})


def test_librdkafka_steady_heartbeats_take_the_short_path(tmp_path, python_calls):
    confluent_kafka = pytest.importorskip("confluent_kafka")

    def scenario(broker: InProcessBroker) -> None:
        with RawClient(broker.port) as client:
            create_topic(client, "t", 4)
        consumers = [
            confluent_kafka.Consumer(
                {
                    "bootstrap.servers": f"127.0.0.1:{broker.port}",
                    "group.id": "rdkafka",
                    "group.protocol": "consumer",
                    "auto.offset.reset": "earliest",
                }
            )
            for _ in range(2)
        ]
        try:
            for consumer in consumers:
                consumer.subscribe(["t"])

            def stable() -> bool:
                group = broker.groups.groups.get("rdkafka")
                return (
                    group is not None and len(group.members) == 2 and group.state_name == "Stable"
                )

            deadline = time.monotonic() + 20
            while not broker.run(stable):
                assert time.monotonic() < deadline, "the group did not become Stable"
                poll_for(consumers, 0.2)
            poll_for(consumers, 1.5)  # the members' acknowledgements of their last assignment
            calls, answered = len(python_calls), broker.view.answered
            poll_for(consumers, 3)  # 6 heartbeat intervals each
            assert broker.view.answered - answered >= 6
            assert python_calls[calls:] == [], [repr(r) for r in python_calls[calls:]]
        finally:
            for consumer in consumers:
                consumer.close()

    with_broker(
        tmp_path,
        scenario,
        **{
            "group.consumer.heartbeat.interval.ms": 500,
            "group.consumer.min.heartbeat.interval.ms": 500,
        },
    )
