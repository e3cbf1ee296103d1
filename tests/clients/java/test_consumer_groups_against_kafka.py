"""KIP-848 consumer groups on corral and on the Apache Kafka 4.4 reference broker, compared: what
kafka-consumer-groups --describe prints of a group of real members (confluent-kafka, in child
processes: tests/kits/cgkit.py), and one scripted scenario of raw ConsumerGroupHeartbeat frames
(tests/kits/raw_groups.py `Script`) compared frame by frame. The member tests of the same groups:
tests/clients/java/test_consumer_groups_clients.py.
"""

from __future__ import annotations

import time

import pytest
from cgkit import (
    CG_FAST,
    MemberProcess,
    committed,
    create_topics,
    members_of,
    produce,
    stop_processes,
    wait_consumed,
    wait_stable,
    wait_until,
)
from kafka_java import kafka_reference, run_tool
from ownership import all_partitions, check_ownership
from raw_groups import Script, describe, describe_raw

# ================================================ against the Kafka 4.4 reference broker ===

# Both brokers run with these group settings in the comparisons below.
CG_COMPARED = {**CG_FAST, "group.consumer.session.timeout.ms": 10000}


@pytest.fixture(scope="module")
def kafka_ref():
    """One Apache Kafka 4.4 broker (benches/kafka_ref.py) for the module's comparisons."""
    with kafka_reference(CG_COMPARED) as bootstrap:
        yield bootstrap


# ======================================== 1. kafka-consumer-groups against corral and Kafka ===

CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
LIVE_VIEWS = [
    "--members",
    "--members --verbose",
    "--offsets",
    "--offsets --verbose",
    "--state",
    "--state --verbose",
]
EMPTY_VIEWS = ["--members", "--offsets", "--state --verbose"]


def tool_views(bootstrap: str) -> dict[str, tuple[int, str]]:
    """kafka-consumer-groups --describe of one scripted group, live (two confluent members,
    alpha first alone, then beta; 40 records consumed and committed) and then Empty; member ids,
    the broker's address and column padding normalized, member rows sorted."""
    topics = {"tools": 4}
    create_topics(bootstrap, topics)
    probe = Script(bootstrap, "tools")
    probe.wait_assignable(topics)  # else Kafka may bump the epoch once more when it sees the topic
    probe.client.close()
    records = produce(bootstrap, topics, 10)
    partitions = all_partitions(topics)
    processes = [MemberProcess("confluent", bootstrap, "tools", ["alpha"], topics=["tools"])]
    names: dict[str, str] = {}

    def describe_all(views: list[str], tag: str) -> dict[str, tuple[int, str]]:
        commands = [f"--bootstrap-server {bootstrap} --describe --group tools {v}" for v in views]
        out = run_tool(CONSUMER_GROUP_COMMAND, commands)
        return {
            f"{tag} {v}": (out[c][0], _normalized(out[c][1], bootstrap, names))
            for v, c in zip(views, commands)
        }

    try:
        wait_stable(bootstrap, "tools", processes, partitions, timeout=60)
        wait_consumed(members_of(processes), records)
        wait_until(
            lambda: committed(bootstrap, "tools", partitions) == {tp: 10 for tp in partitions},
            15,
            "offsets committed",
        )
        processes.append(MemberProcess("confluent", bootstrap, "tools", ["beta"], topics=["tools"]))
        view = wait_stable(bootstrap, "tools", processes, partitions, timeout=60)
        names.update({m["member_id"]: f"<member {m['client_id']}>" for m in view["members"]})
        views = describe_all(LIVE_VIEWS, "live")
        for p in processes:
            p.close_all()
        check_ownership(members_of(processes))
        wait_until(
            lambda: describe(bootstrap, "tools")["group_state"] == "Empty", 10, "group Empty"
        )
        views.update(describe_all(EMPTY_VIEWS, "empty"))
        return views
    finally:
        stop_processes(processes)


def _normalized(text: str, bootstrap: str, names: dict[str, str]) -> str:
    lines = []
    for line in text.splitlines():
        line = line.replace(bootstrap, "<broker>")
        for member_id, name in names.items():
            line = line.replace(member_id, name)
        lines.append(" ".join(line.split()))
    # Member rows come in the coordinator's map order: sort each run of rows.
    out, run = [], []
    for line in lines + [""]:
        if line.startswith("tools "):
            run.append(line)
        else:
            out += sorted(run) + [line]
            run = []
    return "\n".join(out).strip()


@pytest.mark.kafka
def test_kafka_consumer_groups_describe_shows_what_it_shows_against_kafka(
    corral_factory, kafka_ref
):
    """kafka-consumer-groups (kafka-tools 4.3.1) --describe with --members, --offsets, --state
    (and --verbose: epochs, current and target assignments) of a live and then an empty consumer
    group prints the same on corral as on Kafka 4.4."""
    broker = corral_factory(**CG_COMPARED)
    on_corral = tool_views(broker.bootstrap)
    on_kafka = tool_views(kafka_ref)
    assert on_corral == on_kafka
    # And what they agree on is what was set up.
    assert "tools <broker> (1) uniform Stable 3 3 2" in on_kafka["live --state --verbose"][1]
    assert on_kafka["live --offsets"][1].count(" 10 10 0 <member ") == 4
    assert "has no active members" in on_kafka["empty --members"][1]


# =========================== 2. one scripted scenario, corral against Kafka, frame by frame ===


def run_script(bootstrap: str) -> tuple[list, list]:
    """The scenario: joins (homogeneous, then heterogeneous), revocations acknowledged late, a
    static member joining with another preferred assignor, every heartbeat error of kip848.md
    §1 a client can provoke, a static temporary leave and rejoin, a subscription change, a
    subscribed topic created later, a leave; then a regex member (Kafka resolves regexes in the
    background, so only the settled group is compared there) and everyone leaving. Returns
    (the frame-by-frame log, the settled-states log)."""
    create_topics(bootstrap, {"da": 6, "db": 3})
    s = Script(bootstrap, "diff")
    s.wait_assignable({"da": 6, "db": 3})
    s.join("1 A joins", "A", subscribed_topic_names=["da"])
    s.snapshot("1")
    # B names range, now the group's preferred assignor (an epoch bump of its own, KAFKA-20434).
    # It stays so: corral's range is Kafka's, partition for partition, while corral's uniform
    # differs by design in heterogeneous groups (tests/unit/assignors/test_kafka_assignors.py).
    s.join(
        "2 B joins da+db, range", "B", subscribed_topic_names=["da", "db"], server_assignor="range"
    )
    s.snapshot("2")
    s.beat("3 A revokes", "A")
    s.snapshot("3")
    s.beat("4 A acknowledges", "A")
    s.beat("5 B takes the released", "B")
    s.snapshot("5")
    s.beat("6 settle", "A", "B", rounds=2)
    s.snapshot("6")
    s.join(
        "7 static C", "C", instance_id="ic", subscribed_topic_names=["da"], server_assignor="range"
    )
    s.snapshot("7")
    s.beat("8 settle", "A", "B", "C", rounds=3)
    s.snapshot("8")

    # The errors (none changes the group).
    s.heartbeat("9a epoch ahead", "A", epoch=s.epoch["A"] + 1)
    s.heartbeat("9b unknown member", "Z", epoch=3)
    s.join("9c unknown assignor", "Y", subscribed_topic_names=["da"], server_assignor="nope")
    s.heartbeat("9d join without rebalance timeout", "Y", epoch=0, subscribed_topic_names=["da"])
    s.heartbeat(
        "9e join owning partitions",
        "Y",
        epoch=0,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=["da"],
        owned={"da": [0]},
    )
    s.heartbeat("9f join without subscription", "Y", epoch=0, rebalance_timeout_ms=30000)
    s.join("9g bad regex", "Y", subscribed_topic_names=None, subscribed_topic_regex="[")
    s.join("9h instance in use", "C2", instance_id="ic", subscribed_topic_names=["da"])
    s.heartbeat(
        "9i instance of another member", "C", "C-other", instance_id="ic", epoch=s.epoch["C"]
    )
    s.heartbeat("9j missing group", "A", group="diff-missing", epoch=1)
    s.heartbeat("9k empty member id", "A", "", epoch=s.epoch["A"])
    s.heartbeat("9l epoch below -2", "A", epoch=-3)
    s.heartbeat("9m static leave without instance", "A", epoch=-2)
    s.heartbeat("9n leave of unknown member", "Z", epoch=-1)
    s.snapshot("9")

    s.leave("10 C leaves for a while (-2)", "C", epoch=-2, instance_id="ic")
    s.snapshot("10")
    s.join(
        "11 C2 takes over instance ic",
        "C2",
        instance_id="ic",
        subscribed_topic_names=["da"],
        server_assignor="range",
    )
    s.views["C2"] = s.views.pop("C")  # the same instance: its partitions pass on, not shared
    s.snapshot("11")
    s.beat("12 settle", "A", "B", "C2", rounds=2)
    s.snapshot("12")
    s.heartbeat("13 B drops db", "B", subscribed_topic_names=["da"])
    s.snapshot("13")
    s.beat("13 settle", "A", "B", "C2", rounds=3)
    s.snapshot("13 settled")
    # A moved from epoch 4 to 5 with its partitions unchanged: a heartbeat at 4 is a lost
    # response (accepted), one at 3 is not.
    s.heartbeat("13 lost response", "A", epoch=s.epoch["A"] - 1)
    s.heartbeat("13 older epoch", "A", epoch=s.epoch["A"] - 2)
    s.heartbeat("14 A subscribes to da+dc (no dc yet)", "A", subscribed_topic_names=["da", "dc"])
    s.beat("14 settle", "A", "B", "C2", rounds=2)
    s.snapshot("14")

    create_topics(bootstrap, {"dc": 2})
    s.wait_assignable({"dc": 2})
    s.beat("15 dc appears", "A", "B", "C2", rounds=3)
    s.snapshot("15")
    s.leave("16 A leaves", "A")
    s.snapshot("16")
    s.beat("16 settle", "B", "C2", rounds=3)
    s.snapshot("16 settled")

    # A regex member: Kafka resolves a new regex in the background (corral at once, in the
    # heartbeat), so from here only the settled group is compared.
    frames, s.log = s.log, []
    s.join(
        "17 D joins with a regex", "D", subscribed_topic_names=None, subscribed_topic_regex="d[ab]"
    )
    previous = None
    for _ in range(40):
        s.beat("17 settle", "B", "C2", "D")
        g = describe(bootstrap, "diff")
        state = (
            g["group_state"],
            g["group_epoch"],
            sorted((m["member_id"], m["member_epoch"]) for m in g["members"]),
        )
        if g["group_state"] == "Stable" and state == previous:
            break
        previous = state
        time.sleep(0.1)
    s.log = settled = []
    s.snapshot("17 regex member settled")
    for name in ("B", "C2", "D"):
        s.leave(f"18 {name} leaves", name, **({"instance_id": "ic"} if name == "C2" else {}))
    s.snapshot("18 empty")
    check_ownership(s.views.values())
    # Describe errors.
    for group in ("diff-missing", ""):
        settled.append(("19 describe", group, describe_raw(bootstrap, group)["error_code"]))
    s.client.close()
    return frames, settled


@pytest.mark.kafka
def test_scripted_heartbeats_answer_as_kafka_does(corral_factory, kafka_ref):
    """One scenario of raw ConsumerGroupHeartbeat frames against corral and Kafka 4.4: every
    member's (error, epoch, assignment) sequence and every ConsumerGroupDescribe in between are
    the same; with corral's adaptive heartbeat interval on (its default), all but the interval,
    which is never longer than Kafka's."""
    broker = corral_factory(
        **CG_COMPARED, **{"corral.consumer.reconciling.heartbeat.interval.ms": 0}
    )
    corral_log, corral_settled = run_script(broker.bootstrap)
    kafka_log, kafka_settled = run_script(kafka_ref)
    for i, (mine, theirs) in enumerate(zip(corral_log, kafka_log)):
        assert mine == theirs, (
            f"step {i}: corral {mine}\n  kafka {theirs}\n(before: {kafka_log[max(0, i - 4) : i]})"
        )
    assert len(corral_log) == len(kafka_log)
    assert corral_settled == kafka_settled
    adaptive_log, adaptive_settled = run_script(corral_factory("adaptive", **CG_COMPARED).bootstrap)
    assert adaptive_settled == kafka_settled and len(adaptive_log) == len(kafka_log)
    shorter = 0
    for i, (mine, theirs) in enumerate(zip(adaptive_log, kafka_log)):
        if theirs[1] != "describe":  # a heartbeat: (step, member, error, id, epoch, interval, ...)
            assert mine[5] <= theirs[5], (i, mine, theirs)
            shorter += mine[5] < theirs[5]
            mine, theirs = mine[:5] + mine[6:], theirs[:5] + theirs[6:]
        assert mine == theirs, f"step {i}: corral {mine}\n  kafka {theirs}"
    assert shorter, "no answer had the short interval"
