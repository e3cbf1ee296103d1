"""Per-partition assignment epochs (KIP-1251) at the wire, the same scripted scenario against corral
and the Apache Kafka 4.4 reference broker, compared answer by answer: raw ConsumerGroupHeartbeat
members (raw_groups.Script) move through epoch bumps, and after each one a member commits with
epochs older than (and equal to, and newer than) the one the coordinator holds, as a client does
that has not seen the bump yet: per partition, for partitions it kept, got at the bump, is revoking
and does not hold, and for all of them at once. OffsetFetch with an older epoch is compared too.
"""

from __future__ import annotations

import pytest
from cgkit import CG_FAST
from kafka_java import kafka_reference
from raw_groups import Script
from rawwire import RawClient

SETTINGS = {
    **CG_FAST,
    "group.consumer.session.timeout.ms": 10000,
    "group.initial.rebalance.delay.ms": 0,
}
TOPIC, PARTITIONS, GROUP = "epochs", 4, "kip1251"


@pytest.fixture(scope="module")
def kafka_ref():
    with kafka_reference(SETTINGS) as bootstrap:
        yield bootstrap


def commit(script: Script, name: str, epoch: int, partitions: list[int]) -> list[int]:
    body = {
        "group_id": GROUP,
        "generation_id_or_member_epoch": epoch,
        "member_id": name,
        "group_instance_id": None,
        "retention_time_ms": -1,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": 10 + epoch,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                    for p in partitions
                ],
            }
        ],
    }
    answer = script.client.call(8, 9, body)
    return [p["error_code"] for t in answer["topics"] for p in t["partitions"]]


def fetch(script: Script, name: str, epoch: int) -> int:
    answer = script.client.call(
        9,
        9,
        {
            "groups": [
                {"group_id": GROUP, "member_id": name, "member_epoch": epoch, "topics": None}
            ],
            "require_stable": False,
        },
    )
    return answer["groups"][0]["error_code"]


def probe(script: Script, step: str, name: str) -> None:
    """`name` commits every partition alone, then all at once, at each epoch from two below its
    own to one above; then fetches one epoch below."""
    epoch = script.epoch[name]
    for e in range(epoch - 2, epoch + 2):
        script.log.append(
            (
                step,
                name,
                "commit",
                e - epoch,
                [commit(script, name, e, [p]) for p in range(PARTITIONS)],
                commit(script, name, e, list(range(PARTITIONS))),
            )
        )
    script.log.append((step, name, "fetch", -1, fetch(script, name, epoch - 1)))


def share(script: Script, holder: str, joining: str) -> None:
    """`joining` joins (a bump); `holder` is asked to revoke, probed while revoking, acknowledges
    and settles at the new epoch, and `joining` gets what was released; both probed."""
    script.join(f"{joining} joins", joining, subscribed_topic_names=[TOPIC])
    script.beat(f"{holder} revokes", holder)
    probe(script, f"{holder} revoking", holder)
    script.beat(f"{holder} acknowledges", holder)
    script.beat(f"{joining} gets its half", joining, rounds=2)
    probe(script, f"{holder} settled", holder)
    probe(script, f"{joining} settled", joining)


def scenario(bootstrap: str) -> list:
    port = int(bootstrap.rsplit(":", 1)[1])
    with RawClient(port) as c:
        c.call(
            19,
            4,
            {
                "topics": [
                    {
                        "name": TOPIC,
                        "num_partitions": PARTITIONS,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": 10000,
            },
        )
    script = Script(bootstrap, GROUP)
    script.wait_assignable({TOPIC: PARTITIONS})
    # A joins and gets everything.
    script.join("a joins", "a", subscribed_topic_names=[TOPIC])
    script.beat("a settles", "a", rounds=2)
    probe(script, "a alone", "a")
    # B joins (a bump): A revokes half, keeping the other half at its old assignment epoch, and
    # moves to the new epoch; B gets its half.
    share(script, "a", "b")
    # A leaves (a bump): B keeps its half and gets A's at the new epoch.
    script.leave("a leaves", "a")
    script.beat("b takes everything", "b", rounds=2)
    probe(script, "b kept and got", "b")
    # C joins (a bump): B revokes half of what it holds, some of it got at each epoch.
    share(script, "b", "c")
    script.snapshot("end")
    return script.log


def test_commits_with_an_older_epoch_answer_as_kafka_does(corral_factory, kafka_ref):
    # corral's adaptive heartbeat interval off: the frames are compared with Kafka's, interval too.
    corral = corral_factory(**SETTINGS, **{"corral.consumer.reconciling.heartbeat.interval.ms": 0})
    ours = scenario(corral.bootstrap)
    theirs = scenario(kafka_ref)
    # Member ids are the scripts' names on both brokers, so the logs compare as they are.
    assert len(ours) == len(theirs)
    for mine, kafka in zip(ours, theirs):
        assert mine == kafka, (
            f"corral: {mine}\nkafka:  {kafka}\nall corral: {ours}\nall kafka: {theirs}"
        )
    # The scenario reaches what KIP-1251 is about: an older epoch accepted for some partitions
    # (kept ones), refused for others (got at the bump, or not held).
    older = [codes for entry in ours if entry[2] == "commit" and entry[3] < 0 for codes in entry[4]]
    assert [0] in older and [113] in older  # NONE, STALE_MEMBER_EPOCH
