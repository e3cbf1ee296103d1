"""The network thread's short path for Heartbeats of classic members inside KIP-848 consumer
groups (rust/short_paths/heartbeat.rs falling back to `ConsumerHeartbeatView.classic_answer`).

Over the wire, against a broker running in this process: a classic member STABLE at the group's
settled epoch is answered without Python (the coordinator's exact bytes) and its session lives on
that alone; told to rejoin, unknown, at a stale generation or fenced, it reaches Python and gets
Kafka's error; with an authorizer on, an ACL change sends its heartbeats back to Python. The view
against the coordinator, in process: tests/unit/groups/consumer/test_classic_heartbeat_view.py."""

from __future__ import annotations

import time

import pytest
from python_handlers import record_python_calls
from rawwire import RawClient
from shortpath import (
    FENCED_INSTANCE_ID,
    GROUP_AUTHORIZATION_FAILED,
    ILLEGAL_GENERATION,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    Classic,
    Member,
    create_topic,
    poll_for,
    settle,
    settle_mixed,
    with_broker,
)

from corral.groups.consumer import ConsumerGroup
from corral.network.apis import ApiKey

# ================================================================================ in process ===


# ================================================================================= the wire ===


@pytest.fixture
def heartbeat_calls(monkeypatch):
    """The Heartbeats that reach the Python handler."""
    return record_python_calls(monkeypatch, ApiKey.HEARTBEAT)


def test_steady_classic_heartbeats_skip_python_and_the_rest_get_kafkas_answers(
    tmp_path, heartbeat_calls
):
    def scenario(broker) -> None:
        a, b = Member(broker.port, "mixed", "member-a"), Member(broker.port, "mixed", "member-b")
        x = Classic(broker.port, "mixed")
        with a.client, b.client, x.client:
            create_topic(a.client, "t", 4)
            assert a.join(["t"])["error_code"] == 0
            settle(broker, a)
            assert x.join() == 0 and x.sync() == 0
            group = settle_mixed(broker, [a], [x])
            calls, answered = len(heartbeat_calls), broker.view.classic_answered
            for _ in range(50):
                assert x.heartbeat() == NONE
            assert len(heartbeat_calls) == calls, "a steady classic heartbeat reached Python"
            assert broker.view.classic_answered == answered + 50

            # The coordinator's answer is the same bytes: make it answer one (busy group).
            short = x.heartbeat_frame()
            broker.run(setattr, group, "metadata_expired", True)
            assert x.heartbeat_frame() == short and len(heartbeat_calls) == calls + 1
            # A consumer member's heartbeat looks at the metadata: short again.
            assert a.steady()["error_code"] == 0 and not broker.run(lambda: group.metadata_expired)
            assert x.heartbeat_frame() == short and len(heartbeat_calls) == calls + 1

            # A stale generation and an unknown member: the coordinator's errors.
            calls = len(heartbeat_calls)
            assert x.heartbeat(generation_id=x.generation - 1) == ILLEGAL_GENERATION
            assert x.heartbeat(member_id="ghost") == UNKNOWN_MEMBER_ID
            assert x.heartbeat(group_instance_id="nobody") == UNKNOWN_MEMBER_ID
            assert len(heartbeat_calls) == calls + 3

            # Another member joins: a newer target, so x must rejoin (told by Python).
            assert b.join(["t"])["error_code"] == 0
            assert broker.run(lambda: group.assignment_epoch > group.members[x.member_id].epoch)
            calls = len(heartbeat_calls)
            assert x.heartbeat() == REBALANCE_IN_PROGRESS
            assert len(heartbeat_calls) == calls + 1
            settle_mixed(broker, [a, b], [x])
            calls = len(heartbeat_calls)
            assert x.heartbeat() == NONE and len(heartbeat_calls) == calls

    with_broker(tmp_path, scenario)


def test_a_classic_session_lives_on_the_short_path_and_a_fenced_instance_reaches_python(
    tmp_path, heartbeat_calls
):
    def scenario(broker) -> None:
        a = Member(broker.port, "static", "member-a")
        x = Classic(broker.port, "static", instance_id="inst-x", session_timeout_ms=1000)
        with a.client, x.client:
            create_topic(a.client, "t", 4)
            assert a.join(["t"])["error_code"] == 0
            settle(broker, a)
            assert x.join() == 0 and x.sync() == 0
            group = settle_mixed(broker, [a], [x])
            calls = len(heartbeat_calls)
            # 2.5 of its session timeouts on the short path alone.
            deadline = time.monotonic() + 2.5
            while time.monotonic() < deadline:
                assert x.heartbeat() == NONE
                time.sleep(0.2)
            assert len(heartbeat_calls) == calls
            assert x.member_id in broker.run(lambda: set(group.members))

            # Its instance id with another member id: FENCED_INSTANCE_ID, from Python.
            assert x.heartbeat(member_id="impostor") == FENCED_INSTANCE_ID
            assert len(heartbeat_calls) == calls + 1

            # Silent, it is fenced; its heartbeat then reaches Python.
            deadline = time.monotonic() + 5
            while x.member_id in broker.run(lambda: set(group.members)):
                assert time.monotonic() < deadline, "x was not fenced"
                assert a.steady()["error_code"] == 0
                time.sleep(0.2)
            assert x.member_id not in broker.view.contents()["static"][3]
            assert x.heartbeat() == UNKNOWN_MEMBER_ID
            assert len(heartbeat_calls) == calls + 2

    with_broker(tmp_path, scenario, **{"group.min.session.timeout.ms": 1000})


def test_classic_heartbeats_are_authorized_once_until_the_acls_change(tmp_path, heartbeat_calls):
    def scenario(broker) -> None:
        a, x = Member(broker.port, "acl", "member-a"), Classic(broker.port, "acl")
        with a.client, x.client:
            create_topic(a.client, "t", 4)
            assert a.join(["t"])["error_code"] == 0
            settle(broker, a)
            assert x.join() == 0 and x.sync() == 0
            settle_mixed(broker, [a], [x])
            calls = len(heartbeat_calls)
            for _ in range(20):
                assert x.heartbeat() == NONE
            assert len(heartbeat_calls) == calls, "an authorized steady heartbeat reached Python"
            created = a.client.call(
                ApiKey.CREATE_ACLS,
                3,
                {
                    "creations": [
                        {
                            "resource_type": 3,
                            "resource_name": "acl",
                            "resource_pattern_type": 3,
                            "principal": "User:ANONYMOUS",
                            "host": "*",
                            "operation": 3,
                            "permission_type": 2,
                        }
                    ]
                },
            )  # GROUP "acl", LITERAL, READ, DENY
            assert created["results"][0]["error_code"] == 0
            assert x.heartbeat() == GROUP_AUTHORIZATION_FAILED
            assert len(heartbeat_calls) == calls + 1

    with_broker(
        tmp_path,
        scenario,
        **{
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
        },
    )


def test_librdkafka_classic_member_heartbeats_take_the_short_path(tmp_path, heartbeat_calls):
    """A librdkafka classic consumer beside a KIP-848 one in one consumer group: once settled,
    its Heartbeats are the network thread's."""
    confluent_kafka = pytest.importorskip("confluent_kafka")

    def scenario(broker) -> None:
        with RawClient(broker.port) as client:
            create_topic(client, "t", 4)
        common = {
            "bootstrap.servers": f"127.0.0.1:{broker.port}",
            "group.id": "rdkafka-mixed",
            "auto.offset.reset": "earliest",
        }
        modern = confluent_kafka.Consumer({**common, "group.protocol": "consumer"})
        classic = confluent_kafka.Consumer(
            {
                **common,
                "group.protocol": "classic",
                "partition.assignment.strategy": "range",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 300,
            }
        )
        consumers = [modern, classic]
        try:

            def settled() -> bool:
                group = broker.groups.groups.get("rdkafka-mixed")
                return (
                    isinstance(group, ConsumerGroup)
                    and len(group.members) == 2
                    and group.classic_members == 1
                    and group.state_name == "Stable"
                )

            modern.subscribe(["t"])
            poll_for(consumers, 1)
            classic.subscribe(["t"])
            deadline = time.monotonic() + 30
            while not broker.run(settled):
                assert time.monotonic() < deadline, "the mixed group did not settle"
                poll_for(consumers, 0.2)
            poll_for(consumers, 1.5)
            calls, answered = len(heartbeat_calls), broker.view.classic_answered
            poll_for(consumers, 3)  # ten heartbeat intervals of the classic member
            assert broker.view.classic_answered - answered >= 5
            assert heartbeat_calls[calls:] == [], [repr(r) for r in heartbeat_calls[calls:]]
        finally:
            for consumer in consumers:
                consumer.close()

    with_broker(tmp_path, scenario, **{"group.min.session.timeout.ms": 1000})
