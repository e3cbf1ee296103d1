"""The network thread's short path for Heartbeats of classic members inside KIP-848 consumer
groups (rust/short_paths/heartbeat.rs falling back to `ConsumerHeartbeatView.classic_answer`).

In process: in random rolling migrations, whenever the view would answer a classic member's
Heartbeat, the coordinator answers NONE to it too and writes nothing. Over the wire, against a
broker running in this process: a classic member STABLE at the group's settled epoch is answered
without Python (the coordinator's exact bytes) and its session lives on that alone; told to
rejoin, unknown, at a stale generation or fenced, it reaches Python and gets Kafka's error; with
an authorizer on, an ACL change sends its heartbeats back to Python."""

from __future__ import annotations

import random
import time

import pytest
from classic_members_kit import (
    ClassicClient,
    classic_group,
    classic_round,
    converge,
    restart_under_other_protocol,
    setup,
    stable,
)
from consumer_harness import RecordingLog
from python_handlers import record_python_calls
from rawwire import RawClient
from test_consumer_short_path import Member, create_topic, poll_for, settle, with_broker

from corral import _core
from corral.errors import ErrorCode
from corral.groups.consumer import ConsumerGroup, MemberState
from corral.network.apis import ApiKey

NONE, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID = 0, 22, 25
REBALANCE_IN_PROGRESS, GROUP_AUTHORIZATION_FAILED, FENCED_INSTANCE_ID = 27, 30, 82


# ================================================================================ in process ===


class Checked(ClassicClient):
    """A classic client whose every Heartbeat is first put to the view: when the view would
    answer, the coordinator must answer NONE and write nothing."""

    answered = 0

    def heartbeat(self) -> ErrorCode:
        view = self.c.consumer_heartbeat_view
        short = view.classic_answer("g", self.member_id, self.instance_id, self.generation)
        before = len(self.c.writer.pairs)
        code = super().heartbeat()
        if short is not None:
            Checked.answered += 1
            assert (short, code) == (NONE, ErrorCode.NONE)
            assert len(self.c.writer.pairs) == before, (
                "the coordinator wrote for a steady heartbeat"
            )
        return code


@pytest.mark.parametrize("seed", range(6))
def test_the_view_answers_classic_members_only_as_the_coordinator_does(seed):
    rng = random.Random(seed)
    Checked.answered = 0
    topics, _, c, d = setup(partitions=8, log=RecordingLog())
    protocols = (
        [["range"], ["cooperative-sticky", "range"]]
        if seed % 2
        else [["cooperative-sticky"], ["cooperative-sticky", "range"]]
    )
    classic_group(
        d,
        [
            Checked(d, f"m{i}", rng.choice(protocols), instance_id=rng.choice([None, f"i{i}"]))
            for i in range(3)
        ],
    )
    names = sorted(d.clients)
    for _ in range(40):
        name = rng.choice(names)
        if rng.random() < 0.3:
            restart_under_other_protocol(
                d, name, lambda driver, member: Checked(driver, member, rng.choice(protocols))
            )
        if not isinstance(c.groups.get("g"), ConsumerGroup):
            classic_round(d, [d.clients[n] for n in names])
            continue
        for other in rng.sample(names, k=len(names)):
            client = d.clients[other]
            if isinstance(client, ClassicClient):
                if client.joined and rng.random() < 0.2:  # a stale generation: Python's
                    stale = (client.member_id, client.instance_id, client.generation - 1)
                    assert c.consumer_heartbeat_view.classic_answer("g", *stale) is None
                    assert c.heartbeat("g", *stale) == ErrorCode.ILLEGAL_GENERATION
                client.cycle()
            elif client.joined:
                d.heartbeat(other, acknowledge=rng.random() < 0.7)
    if isinstance(c.groups.get("g"), ConsumerGroup):
        converge(d, 12)
        stable(d)
        for client in d.clients.values():
            if isinstance(client, ClassicClient):
                assert client.heartbeat() == ErrorCode.NONE
    assert Checked.answered > 0


# ================================================================================= the wire ===


@pytest.fixture
def heartbeat_calls(monkeypatch):
    """The Heartbeats that reach the Python handler."""
    return record_python_calls(monkeypatch, ApiKey.HEARTBEAT)


class Classic:
    """A classic member (eager "range": it owns nothing when it rejoins) over raw frames."""

    def __init__(
        self,
        port: int,
        group_id: str,
        instance_id: str | None = None,
        session_timeout_ms: int = 10000,
    ):
        self.client = RawClient(port)
        self.group_id, self.instance_id = group_id, instance_id
        self.session_timeout_ms = session_timeout_ms
        self.member_id, self.generation = "", -1

    def join(self) -> int:
        metadata = _core.encode_consumer_subscription(3, ["t"], [], self.generation)
        body = {
            "group_id": self.group_id,
            "session_timeout_ms": self.session_timeout_ms,
            "rebalance_timeout_ms": 10000,
            "member_id": self.member_id,
            "group_instance_id": self.instance_id,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": metadata}],
            "reason": None,
        }
        answer = self.client.call(ApiKey.JOIN_GROUP, 9, body)
        if answer["error_code"] == 79:  # MEMBER_ID_REQUIRED
            self.member_id = body["member_id"] = answer["member_id"]
            answer = self.client.call(ApiKey.JOIN_GROUP, 9, body)
        if answer["error_code"] == 0:
            self.member_id, self.generation = answer["member_id"], answer["generation_id"]
        return answer["error_code"]

    def sync(self) -> int:
        return self.client.call(
            ApiKey.SYNC_GROUP,
            5,
            {
                "group_id": self.group_id,
                "generation_id": self.generation,
                "member_id": self.member_id,
                "group_instance_id": self.instance_id,
                "protocol_type": "consumer",
                "protocol_name": "range",
                "assignments": [],
            },
        )["error_code"]

    def heartbeat_body(self, **fields) -> dict:
        return {
            "group_id": self.group_id,
            "generation_id": self.generation,
            "member_id": self.member_id,
            "group_instance_id": self.instance_id,
            **fields,
        }

    def heartbeat(self, **fields) -> int:
        return self.client.call(ApiKey.HEARTBEAT, 4, self.heartbeat_body(**fields))["error_code"]

    def heartbeat_frame(self) -> bytes:
        """The raw response frame to a Heartbeat, without its correlation id."""
        self.client.send(ApiKey.HEARTBEAT, 4, self.heartbeat_body())
        return self.client.receive_frame()[4:]


def settle_mixed(broker, consumers: list[Member], classics: list[Classic]) -> ConsumerGroup:
    """Acknowledgements and heartbeats (a classic member told to rejoin rejoins and syncs) until
    the group is Stable with every classic member STABLE at the assignment epoch."""
    group = broker.groups.groups[classics[0].group_id]

    def settled() -> bool:
        return group.state_name == "Stable" and all(
            group.members[x.member_id].epoch == group.assignment_epoch == x.generation
            and group.members[x.member_id].current.state is MemberState.STABLE
            for x in classics
        )

    for _ in range(20):
        for m in consumers:
            assert m.acknowledge()["error_code"] == 0
        for x in classics:
            code = x.heartbeat()
            if code == REBALANCE_IN_PROGRESS:
                assert x.join() == 0 and x.sync() == 0
            else:
                assert code == NONE
        if broker.run(settled):
            return group
        time.sleep(0.05)
    raise AssertionError("the mixed group did not settle")


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
