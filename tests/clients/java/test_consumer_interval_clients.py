"""Unmodified KIP-848 clients follow the adaptive heartbeat interval (groups/consumer/answer.py):
Java kafka-clients, librdkafka (confluent-kafka) and franz-go, each with
`group.protocol=consumer`, at Kafka's default heartbeat interval (5 s).

The shape: a scripted member (raw ConsumerGroupHeartbeat frames, tests/kits/raw_groups.py
`Script`) owns every partition; the client joins and is waiting for half of them
(UNRELEASED_PARTITIONS). The script then revokes them at once and the test measures how long the
client takes to own them.
Nothing but the client's own next heartbeat stands in the way: with
`corral.consumer.reconciling.heartbeat.interval.ms` at its default (250 ms) it comes back within
a fraction of a second; with it off (0, Kafka's behaviour) it comes back a whole group interval
after its join, seconds later. Both are checked, so the test fails if a client ignores the
interval (or if corral stops sending it)."""

from __future__ import annotations

import time

import pytest
from cgkit import MemberProcess, stop_processes, wait_until
from ownership import check_ownership
from raw_groups import Script, describe

GROUP_INTERVAL_MS = 5000  # Kafka's default group.consumer.heartbeat.interval.ms
# Targets computed at every epoch bump, so that only the heartbeat interval is measured.
SETTINGS = {"group.consumer.assignment.interval.ms": 0}
CLIENTS = ["java", "confluent", "franz-go"]


@pytest.fixture(scope="module", params=["adaptive", "off"])
def broker(request, tmp_path_factory):
    from conftest import CorralProcess

    short = {"adaptive": 250, "off": 0}[request.param]
    broker = CorralProcess(
        tmp_path_factory.mktemp(f"interval-{request.param}"),
        {**SETTINGS, "corral.consumer.reconciling.heartbeat.interval.ms": short},
    )
    broker.start()
    broker.mode = request.param
    yield broker
    broker.stop()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=10)


def hand_over(bootstrap: str, client: str, group: str) -> float:
    """Seconds from the scripted owner releasing the client's partitions to the client owning
    them (its rebalance callback), the ownership invariant checked over both."""
    topic = f"{group}-t"
    create_topic(bootstrap, topic, 4)
    script = Script(bootstrap, group)
    script.wait_assignable({topic: 4})
    owner = script.join("join", "owner", subscribed_topic_names=[topic])
    assert owner["error_code"] == 0 and script.owned["owner"] == {topic: [0, 1, 2, 3]}, owner
    process = MemberProcess(client, bootstrap, group, ["x"], topics=[topic], protocol="consumer")
    member = process["x"]
    try:
        # The client joined: its target is half the partitions, all still the owner's.
        wait_until(
            lambda: any(
                m["client_id"] == "x" and len(m["target_assignment"]) == 2
                for m in describe(bootstrap, group)["members"]
            ),
            60,
            f"{client} joined",
        )
        assert not member.owned
        # Its join's acknowledgement (sent at once by every client) is in: from now on only
        # its interval brings it back.
        time.sleep(1)
        told = script.heartbeat("revoke", "owner")  # told to revoke two
        assert len(script.owned["owner"][topic]) == 2, told
        script.heartbeat("release", "owner")  # revoked: the two are free
        released = time.monotonic_ns()
        wait_until(lambda: len(member.owned) == 2, 20, f"{client} owns its two partitions")
        took = (member.timeline[-1][0] - released) / 1e9
        check_ownership([member, *script.views.values()])
        assert not member.errors, member.errors
        return took
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- {client} log\n{process.log_tail()}") from None
    finally:
        process.close_all()
        stop_processes([process])
        script.leave("leave", "owner")


@pytest.mark.parametrize("client", CLIENTS)
def test_a_waiting_member_comes_back_at_the_short_interval(broker, client):
    took = hand_over(broker.bootstrap, client, f"hand-{client}")
    if broker.mode == "adaptive":
        # Its next heartbeat within 250 ms, plus the client's own reconciliation.
        assert took < 2.0, f"{client} took {took:.2f}s to take partitions released to it"
    else:
        # Its next heartbeat a group interval after its join (less the second waited).
        assert took > 2.5, f"{client} took only {took:.2f}s with the adaptive interval off"
    print(f"{client} ({broker.mode}): {took:.2f}s")
