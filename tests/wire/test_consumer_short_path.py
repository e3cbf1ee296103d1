"""The network thread's short path for steady-state ConsumerGroupHeartbeats
(rust/short_paths/consumer_heartbeat.rs, rust/groups/consumer_heartbeat_view.rs).

Over the wire, against a broker running in this process (so that the test can count what reaches
Python): steady heartbeats never reach the Python handler and get the coordinator's exact bytes,
every other heartbeat does and gets the coordinator's answer, and sessions kept alive only by the
short path do not expire. The view against the coordinator, in process:
tests/unit/groups/consumer/test_heartbeat_view.py."""

from __future__ import annotations

import time

import pytest
from rawwire import RawClient
from shortpath import InProcessBroker, Member, create_topic, poll_for, settle, with_broker

from corral.errors import ErrorCode
from corral.groups.consumer import MemberState

# ================================================================================ in process ===


# ================================================================================= the wire ===


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
