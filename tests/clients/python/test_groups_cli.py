"""`corral groups list|describe` against a real corral and the Apache Kafka 4.4 reference broker:
a classic group and a KIP-848 consumer group of real confluent-kafka members, offsets committed
on some partitions, records produced past them. `describe --json` must show exactly the committed
offsets, log end offsets and lags, and every assigned partition owned once by the member whose
client says it owns it; `list` both groups with their types and states; a group that does not
exist and a broker that does not answer exit 1 with a clear message."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cgkit import (
    CG_FAST,
    MemberProcess,
    create_topics,
    members_of,
    stop_processes,
    wait_stable,
    wait_until,
)
from confluent_kafka import Consumer, Producer, TopicPartition
from conftest import CorralProcess
from kafka_java import kafka_reference
from ownership import all_partitions, partitioned
from raw_groups import Script

SETTINGS = {**CG_FAST, "group.initial.rebalance.delay.ms": 0}
CLASSIC, CONSUMER = "ops-classic", "ops-consumer"
TOPICS = {CLASSIC: {"ops-classic-t": 3}, CONSUMER: {"ops-consumer-t": 4}}
RECORDS = {p: 6 + p for p in range(4)}  # records in partition p of either topic


def groups_cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "corral.cli", "groups", "--bootstrap", bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def expected_commits(topics: dict[str, int]) -> dict[tuple[str, int], int]:
    """Partition p committed at p + 1, except the last partition of each topic (no commit)."""
    return {(t, p): p + 1 for t, n in topics.items() for p in range(n - 1)}


def commit_before_joining(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Offsets committed while the group has no member (generation -1, as kafka-consumer-groups
    --reset-offsets does); its members then never commit, so what they read leaves these alone."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.commit(
            offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False
        )
    finally:
        consumer.close()


def classic_stable(bootstrap: str, processes, partitions) -> bool:
    if not partitioned(members_of(processes), partitions):
        return False
    done = groups_cli(bootstrap, "--json", "describe", CLASSIC)
    return done.returncode == 0 and json.loads(done.stdout)["groups"][0]["state"] == "Stable"


def build_groups(bootstrap: str) -> list[MemberProcess]:
    """Both groups, stable, two members each; what their members own is in the processes."""
    for group, topics in TOPICS.items():
        create_topics(bootstrap, topics)
        produce_counts(bootstrap, topics)
        commit_before_joining(bootstrap, group, expected_commits(topics))
    probe = Script(bootstrap, CONSUMER)
    probe.wait_assignable(TOPICS[CONSUMER])  # else Kafka may bump the epoch once more later
    probe.client.close()
    processes = [
        MemberProcess(
            "confluent",
            bootstrap,
            CLASSIC,
            ["c1", "c2"],
            topics=list(TOPICS[CLASSIC]),
            protocol="classic",
            commit=False,
        ),
        MemberProcess(
            "confluent",
            bootstrap,
            CONSUMER,
            ["k1", "k2"],
            topics=list(TOPICS[CONSUMER]),
            commit=False,
        ),
    ]
    wait_until(
        lambda: classic_stable(bootstrap, processes[:1], all_partitions(TOPICS[CLASSIC])),
        60,
        "classic group stable",
    )
    wait_stable(bootstrap, CONSUMER, processes[1:], all_partitions(TOPICS[CONSUMER]), timeout=60)
    return processes


def produce_counts(bootstrap: str, topics: dict[str, int]) -> None:
    """RECORDS[p] records into partition p of each topic."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for t, n in topics.items():
        for p in range(n):
            for i in range(RECORDS[p]):
                producer.produce(t, f"{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0


def check_described(bootstrap: str, processes: list[MemberProcess]) -> dict:
    """describe --json of both groups against what was committed, produced and owned; retried
    while a member's own view and the broker's differ (a rebalance caught mid-way)."""
    owned = {m.name: m.owned for m in members_of(processes)}
    seen: list[dict] = []

    def agrees() -> bool:
        done = groups_cli(bootstrap, "--json", "describe", CLASSIC, CONSUMER)
        assert done.returncode == 0, done.stderr
        seen.append(json.loads(done.stdout))
        for g in seen[-1]["groups"]:
            for row in g["partitions"]:
                if (
                    row["client_id"] is None
                    or (row["topic"], row["partition"]) not in owned[row["client_id"]]
                ):
                    return False
        return True

    wait_until(agrees, 30, "the owners described are the owners the clients report")
    out = seen[-1]
    assert out["missing"] == []
    by_group = {g["group"]: g for g in out["groups"]}
    for group, topics in TOPICS.items():
        g = by_group[group]
        assert g["type"] == ("classic" if group == CLASSIC else "consumer")
        assert g["state"] == "Stable" and g["protocol_type"] == "consumer"
        assert sorted(m["client_id"] for m in g["members"]) == (
            ["c1", "c2"] if group == CLASSIC else ["k1", "k2"]
        )
        commits = expected_commits(topics)
        rows = {(r["topic"], r["partition"]): r for r in g["partitions"]}
        assert set(rows) == all_partitions(topics)  # each exactly once (keys of one row each)
        assert len(g["partitions"]) == len(rows)
        for tp, row in rows.items():
            assert row["committed_offset"] == commits.get(tp), row
            assert row["log_end_offset"] == RECORDS[tp[1]], row
            assert row["lag"] == (RECORDS[tp[1]] - commits[tp] if tp in commits else None), row
        assert g["total_lag"] == sum(RECORDS[p] - o for (_, p), o in commits.items())
        # Members' partitions and the rows' owners say the same.
        members = {m["member_id"]: m for m in g["members"]}
        for tp, row in rows.items():
            assert tp[1] in members[row["owner"]]["partitions"][tp[0]]
        assert sum(len(ps) for m in g["members"] for ps in m["partitions"].values()) == len(rows)
        if group == CONSUMER:
            assert g["epoch"] >= 1 and g["assignor"] in ("uniform", "range")
            assert {m["epoch"] for m in g["members"]} == {g["epoch"]}
    return by_group


def scenario(bootstrap: str) -> dict:
    processes = build_groups(bootstrap)
    try:
        described = check_described(bootstrap, processes)
        listed = groups_cli(bootstrap, "--json", "list")
        assert listed.returncode == 0, listed.stderr
        groups = {g["group"]: g for g in json.loads(listed.stdout)["groups"]}
        assert groups[CLASSIC] == {
            "group": CLASSIC,
            "type": "classic",
            "state": "Stable",
            "protocol_type": "consumer",
        }
        assert groups[CONSUMER] == {
            "group": CONSUMER,
            "type": "consumer",
            "state": "Stable",
            "protocol_type": "consumer",
        }
        table = groups_cli(bootstrap, "describe", CLASSIC)
        assert table.returncode == 0 and "LOG-END-OFFSET" in table.stdout, table.stderr
        return described
    finally:
        stop_processes(processes)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = CorralProcess(
        tmp_path_factory.mktemp("groups") / "corral", {k: str(v) for k, v in SETTINGS.items()}
    ).start()
    yield b
    b.proc.kill()
    b.proc.wait()


def test_describe_and_list_against_corral(broker):
    scenario(broker.bootstrap)


@pytest.mark.kafka
def test_describe_and_list_against_kafka():
    with kafka_reference(SETTINGS) as bootstrap:
        scenario(bootstrap)


def test_missing_group_and_unreachable_broker(broker):
    done = groups_cli(broker.bootstrap, "describe", "no-such-group")
    assert done.returncode == 1
    assert "Consumer group 'no-such-group' does not exist." in done.stderr
    done = groups_cli(broker.bootstrap, "--json", "describe", "no-such-group")
    assert done.returncode == 1 and json.loads(done.stdout) == {
        "groups": [],
        "missing": ["no-such-group"],
    }
    # A port nobody listens on: the broker's port once it is gone.
    gone = CorralProcess(broker.data_dir.parent / "gone", {}).start()
    gone.kill()
    done = groups_cli(gone.bootstrap, "list")
    assert done.returncode == 1
    assert f"cannot reach {gone.bootstrap}" in done.stderr and "Traceback" not in done.stderr
