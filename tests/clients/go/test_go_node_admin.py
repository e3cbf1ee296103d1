"""The admin APIs of franz-go (kadm), sarama (ClusterAdmin) and kafkajs (admin), the same calls on
corral and on the Apache Kafka 4.4 reference broker, with the same answers: create a topic with
a config, describe it, list and describe groups, fetch a group's offsets, list end offsets,
delete an empty group (tests/clients/go/admin.go, tests/clients/node/member.js).
"""

from __future__ import annotations

import pytest
from cgkit import FAST_GROUPS, MemberProcess, members_of, stop_processes, wait_until
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka_java import kafka_reference
from ownership import check_ownership
from polyglot import CLIENTS, admin

SOURCE, LIVE = "adm-source", "adm-live"
RECORDS = 30


@pytest.fixture(scope="module", params=["corral", "kafka"])
def bootstrap(request, tmp_path_factory):
    if request.param == "kafka":
        with kafka_reference({**FAST_GROUPS, "num.partitions": 3}) as address:
            yield from _prepared(address)
    else:
        from conftest import CorralProcess

        broker = CorralProcess(
            tmp_path_factory.mktemp("polyglot-admin"), {**FAST_GROUPS, "num.partitions": 3}
        )
        broker.start()
        try:
            yield from _prepared(broker.bootstrap)
        finally:
            broker.stop()


def _prepared(address: str):
    """SOURCE (3 partitions, auto-created) with RECORDS records, a live group LIVE that consumed
    and committed all of them, and an empty group per client holding one commit."""
    producer = Producer({"bootstrap.servers": address})
    for i in range(RECORDS):
        producer.produce(SOURCE, key=f"k{i}", value=b"v", partition=i % 3)
    assert producer.flush(30) == 0
    for client in CLIENTS:
        committer = Consumer({"bootstrap.servers": address, "group.id": f"adm-empty-{client}"})
        committer.commit(offsets=[TopicPartition(SOURCE, 0, 5)], asynchronous=False)
        committer.close()
    live = MemberProcess(
        "confluent",
        address,
        LIVE,
        ["live-a"],
        topics=[SOURCE],
        protocol="classic",
        strategy="range",
    )
    try:
        member = live["live-a"]
        wait_until(
            lambda: len(set(member.records)) == RECORDS and len(member.owned) == 3,
            60,
            f"{LIVE} consuming all {RECORDS} records",
        )
        check_ownership([member])
        yield address
    finally:
        stop_processes([live])
        assert not [m.errors for m in members_of([live]) if m.errors]


@pytest.mark.parametrize("client", CLIENTS)
def test_admin_calls(bootstrap, client):
    report = admin(
        client,
        {
            "bootstrap": bootstrap,
            "topic": f"adm-new-{client}",
            "group": LIVE,
            "source": SOURCE,
            "empty_group": f"adm-empty-{client}",
        },
    )
    assert "error" not in report, report
    assert report["created"] is True
    assert report["retention_ms"] == "3600000"
    assert report["partitions"] == 3
    assert {LIVE, f"adm-empty-{client}"} <= set(report["groups"])
    assert (report["state"], report["protocol_type"], report["protocol"]) == (
        "Stable",
        "consumer",
        "range",
    )
    assert report["members"] == ["live-a"]
    assert report["offsets"] == report["end_offsets"] == {"0": 10, "1": 10, "2": 10}
    assert report["delete_error"] is None
    assert LIVE in report["groups_after"] and f"adm-empty-{client}" not in report["groups_after"]
