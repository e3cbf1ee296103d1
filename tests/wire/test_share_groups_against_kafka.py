"""One share-group scenario (KIP-932) over raw frames, sent to Apache Kafka 4.4
(benches/kafka_ref.py) and to corral: the same observable answers, error codes and messages,
epochs, assignments, acquired records and delivery counts, start offsets and lags, group states
and types. What must differ is normalised away by the kit (tests/kits/sharewire.py): topic ids
become names, node ids, hosts and ports are dropped, member ids are the scenario's own (a
share-group member names itself).

`scenario(bootstrap)` is the whole conversation, a list of (step, answer...); `KAFKA_4_4` at the
end is Kafka 4.4's, recorded from the reference broker, so that a difference shows as a diff of
named steps (tests/kits/sharewire_kafka44.py). One test per broker: the Kafka one checks that Kafka still answers so, the corral
one runs the same scenario against a fresh corral and compares it with the record (it needs no
JVM). The group settings, which corral serves already, are compared live with Kafka's."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from rawwire import RawClient
from sharewire import (
    ACCEPT,
    REJECT,
    RELEASE,
    acknowledge_seen,
    alter_group_configs,
    alter_offsets,
    consumer_heartbeat,
    create_topic,
    delete_groups,
    delete_offsets,
    describe,
    describe_classic,
    describe_group_configs,
    describe_offsets,
    fetch_seen,
    find_coordinator,
    heartbeat,
    heartbeat_seen,
    join_classic,
    list_groups,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_fetch_topics,
    produce,
    share_acknowledge,
    share_fetch,
    until,
)
from sharewire_kafka44 import KAFKA_4_4

from corral.errors import ErrorCode

# Both brokers run with these (Kafka also with benches/kafka_ref.py's single-node settings).
SETTINGS = {
    "share.coordinator.state.topic.num.partitions": 1,
    # A member may heartbeat every second (the scenario does not wait for 5 s intervals).
    "group.share.min.heartbeat.interval.ms": 1000,
    "group.share.min.record.lock.duration.ms": 1000,
}

GROUP = "sg"
TOPIC = "shw"
A = "member-a-0000000000000"  # 22 characters, as the Java client's Uuid text
B = "member-b-0000000000000"


def scenario(bootstrap: str, seen: list[tuple] | None = None) -> list[tuple]:
    """The answers of `bootstrap`'s broker, step by step (also into `seen`, if given, as they
    come: what a broker answered before it failed the scenario)."""
    port = int(bootstrap.rsplit(":", 1)[1])
    seen = [] if seen is None else seen

    def note(step: str, *answer) -> None:
        seen.append((step, *answer))

    with RawClient(port, timeout=30) as c:
        tid = create_topic(c, TOPIC, 2)
        names = {tid: TOPIC}
        p0, p1 = (tid, 0), (tid, 1)
        note("produce p0", produce(c, TOPIC, 0, [b"a", b"b", b"c", b"d", b"e"]))
        note("produce p1", produce(c, TOPIC, 1, [b"x", b"y"]))
        note("find coordinator", find_coordinator(c, GROUP))

        # --- group settings -----------------------------------------------------------
        note(
            "group config out of bounds",
            *alter_group_configs(c, GROUP, {"share.record.lock.duration.ms": "500"}),
        )
        note(
            "group config bad reset",
            *alter_group_configs(c, GROUP, {"share.auto.offset.reset": "none"}),
        )
        note(
            "group config",
            *alter_group_configs(
                c,
                GROUP,
                {"share.auto.offset.reset": "earliest", "share.heartbeat.interval.ms": "1000"},
            ),
        )
        # Kafka's broker learns a group config from the metadata log a moment after
        # IncrementalAlterConfigs answers (KRaft): described (and used) once it shows there,
        # here and below.
        configs = until(
            lambda: (
                (d := describe_group_configs(c, GROUP))["share.auto.offset.reset"][0] == "earliest"
                and d
            )
        )
        note(
            "group configs described",
            # share.assignor.offload.enable is internal in Kafka: accepted, never described
            # (corral describes it).
            {
                n: v
                for n, v in sorted(configs.items())
                if n.startswith("share.") and n != "share.assignor.offload.enable"
            },
        )

        # --- heartbeat errors ---------------------------------------------------------
        def hb(step: str, *args, **kw) -> dict:
            answer = heartbeat(c, *args, **kw)
            note(step, *heartbeat_seen(answer, names))
            return answer

        hb("empty member id", GROUP, "", 0, [TOPIC])
        hb("member id of 37 characters", GROUP, "m" * 37, 0, [TOPIC])
        hb("empty group id", "", A, 0, [TOPIC])
        hb("join without topics", GROUP, A, 0, None)
        hb("join with no topics", GROUP, A, 0, [])
        hb("blank rack", GROUP, A, 0, [TOPIC], rack="")
        hb("epoch -2", GROUP, A, -2, [TOPIC])
        hb("epoch 5 in an unknown group", "nosuch", A, 5, [TOPIC])
        hb("leave an unknown group", "nosuch", A, -1)

        # --- join, and heartbeat until partitions are assigned -------------------------
        joined = hb("join", GROUP, A, 0, [TOPIC])
        note("interval", joined["heartbeat_interval_ms"], joined["member_id"])
        epoch = joined["member_epoch"]

        def assigned() -> dict | None:
            nonlocal epoch
            answer = heartbeat(c, GROUP, A, epoch)
            assert answer["error_code"] == 0, answer
            epoch = answer["member_epoch"]
            got = answer.get("assignment")
            return answer if got and got["topic_partitions"] else None

        first = until(assigned)
        note("assigned", *heartbeat_seen(first, names))
        note("steady heartbeat", *heartbeat_seen(heartbeat(c, GROUP, A, epoch), names))
        hb("unknown member at epoch 5", GROUP, B, 5)
        hb("epoch above the member's", GROUP, A, epoch + 5)
        hb("previous epoch", GROUP, A, epoch - 1)
        hb("epoch below the previous", GROUP, A, epoch - 2)
        hb("rejoin at epoch 0 with the same id", GROUP, A, 0, [TOPIC])
        epoch = until(lambda: heartbeat(c, GROUP, A, epoch)["member_epoch"])

        # --- describe, list, and the other group types' APIs on a share group ---------
        note("described", describe(c, [GROUP, "nosuch", ""], names))
        note("listed share", list_groups(c, ["share"]))
        note("listed Share", list_groups(c, ["Share"]))
        note("listed consumer", list_groups(c, ["consumer"]))
        note("listed stable share", list_groups(c, ["share"], ["stable"]))
        note("describe groups v5", describe_classic(c, GROUP, 5))
        note("describe groups v6", describe_classic(c, GROUP, 6))
        note("describe groups v6 of no group", describe_classic(c, "nosuch", 6))
        note("offset fetch", offset_fetch(c, GROUP))
        note("offset fetch of partitions", offset_fetch_topics(c, GROUP, TOPIC, [0]))
        note("offset commit", offset_commit(c, GROUP, TOPIC, 0, 1))
        note("offset delete", offset_delete(c, GROUP, TOPIC, 0))
        note("consumer heartbeat", consumer_heartbeat(c, GROUP, "cmember", [TOPIC]))
        note("join group", join_classic(c, GROUP))

        # --- share sessions -----------------------------------------------------------
        def fetch(step: str, *args, **kw) -> dict:
            answer = share_fetch(c, *args, **kw)
            note(step, fetch_seen(answer, names))
            return answer

        def ack(step: str, *args) -> dict:
            answer = share_acknowledge(c, *args)
            note(step, acknowledge_seen(answer, names))
            return answer

        fetch("fetch at epoch 5 without a session", GROUP, A, 5, [p0])
        fetch(
            "fetch at epoch 0 with acknowledgements",
            GROUP,
            A,
            0,
            [p0],
            {p0: [(0, 0, [ACCEPT])]},
        )
        fetch("fetch without a group id", None, A, 0, [p0])
        fetch("fetch with an empty member id", GROUP, "", 0, [p0])
        ack("acknowledge at epoch 0", GROUP, A, 0, {p0: [(0, 0, [ACCEPT])]})
        ack("acknowledge at epoch 3 without a session", GROUP, A, 3, {p0: [(0, 0, [ACCEPT])]})

        # The share partition loads on the first fetch; with share.auto.offset.reset=earliest
        # its records from offset 0 are acquired. A session epoch goes up by one a request.
        session = 0

        def fetched() -> dict | None:
            nonlocal session
            answer = share_fetch(c, GROUP, A, session, [p0] if session == 0 else [])
            session += 1
            assert answer["error_code"] == 0, answer
            got = [p for t in answer["responses"] for p in t["partitions"] if p["acquired_records"]]
            return answer if got else None

        note("first records", fetch_seen(until(fetched), names))

        def next_epoch() -> int:
            nonlocal session
            session += 1
            return session - 1

        fetch("fetch at a wrong session epoch", GROUP, A, session + 7, [])
        invalid = {
            "first after last": [(3, 2, [ACCEPT])],
            "overlapping batches": [(0, 2, [ACCEPT]), (1, 3, [ACCEPT])],
            "no types": [(0, 0, [])],
            "types not one per record": [(0, 2, [ACCEPT, RELEASE])],
            "unknown type": [(0, 0, [7])],
            "renew without IsRenewAck": [(0, 0, [4])],
            "past the acquired records": [(3, 9, [ACCEPT])],
        }
        for step, batches in invalid.items():
            ack(step, GROUP, A, next_epoch(), {p0: batches})
        ack("a partition not fetched", GROUP, A, next_epoch(), {p1: [(0, 0, [ACCEPT])]})
        ack("an unknown topic", GROUP, A, next_epoch(), {(bytes(range(16)), 0): [(0, 0, [1])]})
        # Another member of the group, with a session of its own: the records are A's.
        fetch("another member's first fetch", GROUP, B, 0, [p0], max_wait_ms=100)
        ack("another member's records", GROUP, B, 1, {p0: [(3, 3, [ACCEPT])]})
        ack("another member leaves its session", GROUP, B, -1, {})
        # 0 accepted, 1 released, 2 rejected, 4 accepted; 3 stays acquired. The start offset
        # (SPSO) moves past 0 only: 1 is available again.
        ack(
            "accept, release, reject",
            GROUP,
            A,
            next_epoch(),
            {p0: [(0, 0, [ACCEPT]), (1, 1, [RELEASE]), (2, 2, [REJECT]), (4, 4, [ACCEPT])]},
        )
        ack("accept an acknowledged record", GROUP, A, next_epoch(), {p0: [(4, 4, [ACCEPT])]})
        ack("accept a rejected record", GROUP, A, next_epoch(), {p0: [(2, 2, [ACCEPT])]})
        ack("release an available record", GROUP, A, next_epoch(), {p0: [(1, 1, [RELEASE])]})
        ack("below the start offset", GROUP, A, next_epoch(), {p0: [(0, 0, [REJECT])]})
        # All or nothing: 1 is not acquired, so 3 (acquired) is not acknowledged either.
        ack(
            "one bad batch, one good",
            GROUP,
            A,
            next_epoch(),
            {p0: [(1, 1, [ACCEPT]), (3, 3, [ACCEPT])]},
        )
        # Offset 1 again, at its second delivery; 2 (rejected) never again.
        fetch("released record redelivered", GROUP, A, next_epoch(), [], max_wait_ms=2000)
        fetch(
            "released with a fetch: acquired again by it",
            GROUP,
            A,
            next_epoch(),
            [],
            {p0: [(1, 1, [RELEASE])]},
            max_wait_ms=2000,
        )
        fetch("nothing more to fetch", GROUP, A, next_epoch(), [], max_wait_ms=100)
        ack("accept the rest", GROUP, A, next_epoch(), {p0: [(1, 1, [ACCEPT]), (3, 3, [ACCEPT])]})
        fetch(
            "an unknown topic fetched",
            GROUP,
            A,
            next_epoch(),
            [(bytes(range(16)), 0)],
            max_wait_ms=100,
        )
        fetch(
            "the unknown topic forgotten",
            GROUP,
            A,
            next_epoch(),
            [],
            forgotten=[(bytes(range(16)), 0)],
            max_wait_ms=100,
        )
        # A lock that expires: the group's lock duration is read when records are acquired.
        note(
            "shorter locks",
            *alter_group_configs(
                c,
                GROUP,
                {
                    "share.auto.offset.reset": "earliest",
                    "share.heartbeat.interval.ms": "1000",
                    "share.record.lock.duration.ms": "1000",
                },
            ),
        )
        until(
            lambda: describe_group_configs(c, GROUP)["share.record.lock.duration.ms"][0] == "1000"
        )
        fetch("p1 added to the session", GROUP, A, next_epoch(), [p1], max_wait_ms=2000)
        time.sleep(2)
        fetch("p1 after its lock expired", GROUP, A, next_epoch(), [], max_wait_ms=2000)
        ack(
            "p1: a gap and an accept in one batch",
            GROUP,
            A,
            next_epoch(),
            {p1: [(0, 1, [0, ACCEPT])]},
        )
        fetch("p1 forgotten", GROUP, A, next_epoch(), [], forgotten=[p1], max_wait_ms=100)
        ack("p1 after it was forgotten", GROUP, A, next_epoch(), {p1: [(0, 0, [ACCEPT])]})
        note("offsets described, all", describe_offsets(c, GROUP, None))
        # (A partition the topic does not have is answered alike, -1 and -1 without an error,
        # but by Kafka 4.4 only after ~30 s of its persister's retries: not asked here.)
        note(
            "offsets described, named",
            describe_offsets(c, GROUP, {TOPIC: [0, 1], "nosuch": [0]}),
        )
        note("offsets described v0", describe_offsets(c, GROUP, None, version=0))
        note("offsets of an unknown group", describe_offsets(c, "nosuch", None))

        # --- admin APIs against a group with members ----------------------------------
        note("offsets of a group without share state", describe_offsets(c, "sg-none", None))
        note("delete a group with a member", delete_groups(c, [GROUP]))
        note("alter offsets with a member", alter_offsets(c, GROUP, {TOPIC: {0: 0}}))
        note("delete offsets with a member", delete_offsets(c, GROUP, [TOPIC]))

        # --- leave ---------------------------------------------------------------------
        ack("close the session", GROUP, A, -1, {})
        hb("leave", GROUP, A, -1)
        hb("leave again", GROUP, A, -1)
        note("described after leave", describe(c, [GROUP], names))
        note("listed after leave", list_groups(c, ["share"]))
        note(
            "alter offsets",
            alter_offsets(c, GROUP, {TOPIC: {0: 2, 1: 1, 9: 0}, "nosuch": {0: 0}}),
        )
        note(
            "offsets after alter",
            until(
                lambda: (
                    (d := describe_offsets(c, GROUP, {TOPIC: [0, 1]}))[2][TOPIC, 0][0] == 2 and d
                )
            ),
        )
        note("alter offsets of a new group", alter_offsets(c, "sg-new", {TOPIC: {0: 3}}))
        note("listed with the new group", list_groups(c, ["share"]))
        note("delete offsets", delete_offsets(c, GROUP, [TOPIC, "nosuch"]))
        note("delete offsets again", delete_offsets(c, GROUP, [TOPIC]))
        note("offsets after delete", describe_offsets(c, GROUP, None))
        note("delete groups", delete_groups(c, [GROUP, "sg-new", "nosuch"]))
        note("described after delete", describe(c, [GROUP], names))
        note("listed after delete", list_groups(c, ["share"]))
        # A share group's member ids are its members' own: a deleted group's member joins anew.
        note("join after delete", *heartbeat_seen(heartbeat(c, GROUP, A, 0, [TOPIC]), names))
    return seen


def show(answers: list[tuple]) -> str:
    return "\n".join(repr(a) for a in answers)


def answered(bootstrap: str) -> list[tuple]:
    """The scenario's answers; what the broker answered before a step failed is printed."""
    seen: list[tuple] = []
    try:
        return scenario(bootstrap, seen)
    except BaseException:
        print(f"answered before failing:\n{show(seen)}")
        raise


@pytest.fixture(scope="module")
def kafka() -> Iterator[str]:
    """One Apache Kafka 4.4 broker for the module (share.version is on by default in 4.4: a
    fresh cluster is formatted at its latest production feature levels, share.version=2)."""
    from kafka_java import kafka_reference

    with kafka_reference(SETTINGS) as bootstrap:
        yield bootstrap


def test_kafka_answers_the_share_group_scenario(kafka):
    assert answered(kafka) == KAFKA_4_4


def test_corral_answers_the_share_group_scenario_as_kafka_does(corral_factory):
    """The same scenario against corral, compared with Kafka 4.4's recorded answers (the Kafka
    test above checks that the record still holds)."""
    broker = corral_factory(**SETTINGS)
    assert answered(broker.bootstrap) == KAFKA_4_4


# Group settings: IncrementalAlterConfigs (validate only) of a GROUP resource, one change each.
GROUP_SETTING_CHANGES: list[dict[str, str]] = [
    {"share.session.timeout.ms": "50000"},
    {"share.session.timeout.ms": "1000"},
    {"share.session.timeout.ms": "abc"},
    {"share.session.timeout.ms": "99999999999"},
    {"share.heartbeat.interval.ms": "0"},
    {"share.heartbeat.interval.ms": "16000"},
    {"share.record.lock.duration.ms": "500"},
    {"share.record.lock.duration.ms": "70000"},
    {"share.record.lock.duration.ms": "1000"},
    {"share.delivery.count.limit": "1"},
    {"share.delivery.count.limit": "11"},
    {"share.delivery.count.limit": "7"},
    {"share.partition.max.record.locks": "50"},
    {"share.partition.max.record.locks": "5000"},
    {"share.assignment.interval.ms": "-1"},
    {"share.assignment.interval.ms": "20000"},
    {"share.assignment.interval.ms": "0"},
    {"share.auto.offset.reset": "none"},
    {"share.auto.offset.reset": "EARLIEST"},
    {"share.auto.offset.reset": "by_duration:PT1H"},
    {"share.auto.offset.reset": "by_duration:p1dt2h3m4.5s"},
    {"share.auto.offset.reset": "by_duration:-PT1H"},
    {"share.auto.offset.reset": "by_duration:PT-1S"},
    {"share.auto.offset.reset": "by_duration:"},
    {"share.auto.offset.reset": "by_duration"},
    {"share.auto.offset.reset": " earliest "},
    {"share.isolation.level": "READ_COMMITTED"},
    {"share.isolation.level": "read_committed"},
    {"share.renew.acknowledge.enable": "yes"},
    {"share.renew.acknowledge.enable": "FALSE"},
    {"share.heartbeat.interval.ms": "15000", "share.session.timeout.ms": "45000"},
    {"share.heartbeat.interval.ms": "x", "share.session.timeout.ms": "abc"},
    {"errors.deadletterqueue.topic.name": "__x"},
    {"errors.deadletterqueue.topic.name": "dlq.x"},
    {"errors.deadletterqueue.copy.record.enable": "true"},
    {"share.no.such": "1"},
    {"consumer.session.timeout.ms": "abc"},
    {"consumer.session.timeout.ms": "0"},
    {"consumer.heartbeat.interval.ms": "2000"},
]


def group_settings(bootstrap: str) -> tuple[list, dict]:
    """Each change's (error, message), and the share settings a group with some of its own
    describes."""
    with RawClient(int(bootstrap.rsplit(":", 1)[1])) as c:
        answers = [
            alter_group_configs(c, "settings", change, validate_only=True)
            for change in GROUP_SETTING_CHANGES
        ]
        own = {"share.auto.offset.reset": "earliest", "share.delivery.count.limit": "7"}
        assert alter_group_configs(c, "settings", own) == (ErrorCode.NONE, None)
        described = until(
            lambda: (
                (d := describe_group_configs(c, "settings"))["share.delivery.count.limit"][0] == "7"
                and d
            )
        )
    return answers, {n: v for n, v in described.items() if n.startswith("share.")}


def test_share_group_settings_are_answered_as_kafka_answers_them(kafka, corral_factory):
    """Every change answered alike (code and message); the share settings described alike, but
    for share.assignor.offload.enable, internal in Kafka (not described) and shown by corral."""
    theirs = group_settings(kafka)
    ours = group_settings(corral_factory(**SETTINGS).bootstrap)
    assert ours[0] == theirs[0]
    assert ours[1].pop("share.assignor.offload.enable")[0] == "true"
    assert ours[1] == theirs[1]
