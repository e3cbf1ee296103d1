"""KIP-848 consumer groups with real clients: confluent-kafka (librdkafka) and Java kafka-clients
4.x, both with `group.protocol=consumer`, in child processes (tests/kits/cg_member.py,
tests/clients/java/ConsumerGroupMember.java; helpers in tests/kits/cgkit.py).

Every group test checks the ownership invariant over what every member reported (never one
partition owned by two members at once; every partition owned once the group is stable) and
reads the group's epochs through ConsumerGroupDescribe. The tests: mixed groups of 3 and 10
members consuming, committing and leaving; members killed (session timeout); partitions added
(CreatePartitions); regex subscriptions picking up a new topic; static members restarted; corral
killed under a live group. Against the Apache Kafka 4.4 reference broker:
tests/clients/java/test_consumer_groups_against_kafka.py.
"""

from __future__ import annotations

import time

import pytest
from cgkit import (
    CG_FAST,
    MemberProcess,
    committed,
    consumed,
    create_topics,
    members_of,
    produce,
    stop_processes,
    wait_consumed,
    wait_stable,
    wait_until,
)
from confluent_kafka.admin import AdminClient
from ownership import all_partitions, check_ownership
from raw_groups import describe


def start_group(bootstrap: str, group: str, topics: dict[str, int], layout, **config):
    """Creates `topics` and starts a member process per (client, member names) of `layout`,
    every member subscribed to them: (all their partitions, the processes, the members)."""
    create_topics(bootstrap, topics)
    processes = [
        MemberProcess(client, bootstrap, group, names, topics=list(topics), **config)
        for client, names in layout
    ]
    return all_partitions(topics), processes, members_of(processes)


def more_then_leave(
    bootstrap: str, topics: dict[str, int], processes, records: set, n: int
) -> None:
    """The group goes on: `n` more records per partition consumed exactly once (with `records`
    before); then every member leaves and the ownership invariant held over the whole run."""
    members = members_of(processes)
    wait_consumed(members, records | produce(bootstrap, topics, n))
    for p in processes:
        p.close_all()
    check_ownership(members)


def admin_state(bootstrap: str, group: str):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(timeout=10)


def test_the_ownership_checker_catches_two_owners():
    """The checker itself: a partition granted before its previous owner reported revoking it is
    two owners; granted after, it is not."""
    from ownership import CgMember, OwnershipViolation

    a, b = CgMember("a", "test", None), CgMember("b", "test", None)
    a.timeline = [(10, frozenset({("t", 0), ("t", 1)})), (20, frozenset({("t", 0)}))]
    b.timeline = [(21, frozenset({("t", 1)}))]
    assert check_ownership([a, b]) == 3
    b.timeline = [(19, frozenset({("t", 1)}))]
    with pytest.raises(OwnershipViolation, match=r"\('t', 1\) owned by a and b"):
        check_ownership([a, b])
    # A member asked to close owns nothing from then on, whatever it reports later; before,
    # it still does.
    a.closing_since = 18
    assert check_ownership([a, b]) == 3
    a.closing_since = 20
    with pytest.raises(OwnershipViolation, match=r"\('t', 1\) owned by a and b"):
        check_ownership([a, b])


@pytest.fixture
def broker(corral_factory):
    return corral_factory(**CG_FAST)


# ============================================== 1. join, consume, commit, leave ===


@pytest.mark.parametrize("layout", ["3-members", "10-members-range"])
def test_mixed_group_consumes_disjointly_commits_and_leaves(broker, layout):
    """confluent and Java members share a topic: each record consumed once, offsets committed to
    the end; members leave at once (not after a session timeout) and the group ends Empty."""
    bootstrap = broker.bootstrap
    if layout == "3-members":
        topics, group, assignor = {"mix3": 6}, "mix3", None
        spec = [("confluent", ["c0"]), ("confluent", ["c1"]), ("java", ["j0"])]
    else:
        topics, group, assignor = {"mix10": 20}, "mix10", "range"
        spec = [("confluent", [f"c{i}"]) for i in range(5)] + [
            ("java", [f"j{i}" for i in range(5)])
        ]
    partitions, processes, members = start_group(bootstrap, group, topics, spec, assignor=assignor)
    try:
        view = wait_stable(bootstrap, group, processes, partitions, timeout=60)
        assert view["assignor_name"] == (assignor or "uniform")
        assert view["assignment_epoch"] == view["group_epoch"]
        sizes = sorted(len(m.owned) for m in members)
        assert sizes[-1] - sizes[0] <= 1, sizes  # both assignors balance one topic

        records = produce(bootstrap, topics, 25)
        wait_consumed(members, records)
        for m in members:  # each consumed only what it owned
            assert {(t, p) for t, p, _ in m.records} <= m.owned, (
                m,
                m.timeline,
                describe(bootstrap, group),
            )
        wait_until(
            lambda: committed(bootstrap, group, partitions) == {tp: 25 for tp in partitions},
            15,
            "offsets committed to the end",
        )
        assert admin_state(bootstrap, group).state.name == "STABLE", describe(bootstrap, group)

        # Every other member leaves (both libraries): the rest take their partitions over at
        # once, with no duplicate.
        leaving = members[::2]
        start = time.monotonic()
        for m in leaving:
            m.process.close(m.name)
        wait_until(lambda: all(m.closed for m in leaving), 20, "members closed")
        wait_stable(bootstrap, group, processes, partitions, timeout=30)
        took = time.monotonic() - start
        assert took < 4, (
            f"the leave took {took:.1f}s: a leave must not wait for the session timeout (4 s)"
        )

        more_then_leave(bootstrap, topics, processes, records, 5)
        assert all(m.closed and not m.owned for m in members)
        info = admin_state(bootstrap, group)
        assert info.state.name == "EMPTY" and info.type.name == "CONSUMER" and info.members == []
        g = describe(bootstrap, group)
        assert (g["group_state"], g["members"]) == ("Empty", [])
        assert g["assignment_epoch"] == g["group_epoch"]  # KAFKA-20442
        assert committed(bootstrap, group, partitions) == {tp: 30 for tp in partitions}
        assert not [e for m in members for e in m.errors], [m.errors for m in members]
    finally:
        stop_processes(processes)


# ===================================================== 2. a member killed (kill -9) ===


def test_killed_members_are_fenced_by_the_session_timeout(broker):
    """A SIGKILLed member sends no leave: its partitions move only once the coordinator's session
    timeout (4 s) fences it, first a confluent member, then a Java one."""
    bootstrap = broker.bootstrap
    topics = {"crash": 8}
    partitions, processes, members = start_group(
        bootstrap,
        "crash",
        topics,
        [("confluent", ["c0"]), ("confluent", ["c1"]), ("java", ["j0"]), ("java", ["j1"])],
    )
    try:
        before = wait_stable(bootstrap, "crash", processes, partitions, timeout=60)
        records = produce(bootstrap, topics, 10)
        wait_consumed(members, records)
        for victim in (processes[0], processes[2]):
            lost = victim.members[next(iter(victim.members))].owned
            assert lost
            start = time.monotonic()
            victim.kill()
            after = wait_stable(bootstrap, "crash", processes, partitions, timeout=30)
            took = time.monotonic() - start
            # Fenced by the session timeout (4 s after its last heartbeat, which came at most
            # one heartbeat interval, 0.5 s, before the kill), not before.
            assert 3.4 <= took <= 4 + 6, f"partitions moved after {took:.1f}s"
            assert after["group_epoch"] > before["group_epoch"]
            assert len(after["members"]) == sum(m.live for m in members)
            before = after
        survivors = [m for m in members if m.live]
        assert {m.name for m in survivors} == {"c1", "j1"}
        assert all(len(m.owned) == 4 for m in survivors)
        # The survivors go on from the committed offsets: nothing consumed twice.
        more_then_leave(bootstrap, topics, processes, records, 5)
    finally:
        stop_processes(processes)


# ======================================== partitions added while the group consumes ===


def test_partitions_added_while_consuming_are_assigned_and_consumed(broker):
    """CreatePartitions (4 -> 10) under a consuming group: the coordinator bumps the group epoch
    at the next heartbeat, the new partitions are assigned to members of both libraries without
    two owners, and records written to them are consumed exactly once."""
    from confluent_kafka.admin import NewPartitions

    bootstrap = broker.bootstrap
    partitions, processes, members = start_group(
        bootstrap, "grow", {"grow": 4}, [("confluent", ["c0"]), ("java", ["j0", "j1"])]
    )
    try:
        before = wait_stable(bootstrap, "grow", processes, partitions, timeout=60)
        records = produce(bootstrap, {"grow": 4}, 10)
        wait_consumed(members, records)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_partitions([NewPartitions("grow", 10)])["grow"].result(timeout=20)
        after = wait_stable(bootstrap, "grow", processes, all_partitions({"grow": 10}), timeout=40)
        assert after["group_epoch"] > before["group_epoch"]
        assert sorted(len(m.owned) for m in members) == [3, 3, 4]
        more_then_leave(bootstrap, {"grow": 10}, processes, records, 5)
    finally:
        stop_processes(processes)


# ================================================= 3. a regex picks up a new topic ===


def test_regex_subscriptions_pick_up_a_topic_created_later(broker):
    """Broker-side regexes (librdkafka "^rx[.].*", Java SubscriptionPattern, RE2 full match) and
    a Java client-side Pattern (which sends topic names) in one group: a matching topic created
    later is assigned and consumed; a topic that does not match is not."""
    bootstrap = broker.bootstrap
    create_topics(bootstrap, {"rx.a": 3, "other": 2})
    processes = [
        MemberProcess("confluent", bootstrap, "rx", ["c0"], regex="^rx[.].*"),
        MemberProcess(
            "java",
            bootstrap,
            "rx",
            [
                {"name": "j0", "regex": "rx[.].*"},
                {"name": "j1", "regex": "rx[.].*", "regex_kind": "client"},
            ],
        ),
    ]
    members = members_of(processes)
    try:
        view = wait_stable(bootstrap, "rx", processes, all_partitions({"rx.a": 3}), timeout=60)
        regexes = sorted(m["subscribed_topic_regex"] or "" for m in view["members"])
        names = sorted(tuple(m["subscribed_topic_names"]) for m in view["members"])
        # librdkafka sends its regexes joined as "(r1)|(r2)...".
        assert regexes == ["", "(^rx[.].*)", "rx[.].*"], regexes
        assert names == [(), (), ("rx.a",)], names

        create_topics(bootstrap, {"rx.b": 4, "rxb": 1})  # "rxb" does not match
        wanted = all_partitions({"rx.a": 3, "rx.b": 4})
        after = wait_stable(bootstrap, "rx", processes, wanted, timeout=40)
        assert after["group_epoch"] > view["group_epoch"]
        more_then_leave(bootstrap, {"rx.a": 3, "rx.b": 4}, processes, set(), 5)
        assert {t for t, _, _ in consumed(members)} == {"rx.a", "rx.b"}
    finally:
        stop_processes(processes)


# =========================================== 4. a static member restarts in place ===


def test_static_members_restart_without_a_rebalance(corral_factory):
    """A static member (group.instance.id) that closes leaves with epoch -2 and keeps its
    partitions; restarted under the same instance id (a new member id) it gets them back at
    once, with neither a group epoch bump nor a move for the others. Both libraries."""
    broker = corral_factory(**{**CG_FAST, "group.consumer.session.timeout.ms": 15000})
    bootstrap = broker.bootstrap
    topics = {"static": 6}
    create_topics(bootstrap, topics)
    partitions = all_partitions(topics)

    def start(client: str, i: int) -> MemberProcess:
        return MemberProcess(
            client,
            bootstrap,
            "static",
            [{"name": f"{client}{i}", "instance_id": f"i-{client}{i}"}],
            topics=list(topics),
        )

    processes = [start("confluent", 0), start("confluent", 1), start("java", 0)]
    everyone = members_of(processes)
    retired = []  # the static members' former selves
    try:
        before = wait_stable(bootstrap, "static", processes, partitions, timeout=60)
        epochs = {m["instance_id"]: (m["member_id"], m["member_epoch"]) for m in before["members"]}
        for index in (1, 2):  # the second confluent member, then the Java one
            old = processes[index]
            member = next(iter(old.members.values()))
            owned, changes = member.owned, {m.name: m.changes for m in everyone}
            old.close_all()
            assert member.closed
            g = describe(bootstrap, "static")
            left = [m for m in g["members"] if m["instance_id"] == f"i-{member.name}"]
            assert [m["member_epoch"] for m in left] == [-2]  # a temporary leave
            assert left[0]["assignment"] == owned  # still its own
            assert g["group_epoch"] == before["group_epoch"]

            processes[index] = start(member.client, int(member.name[-1]))
            everyone = [m for m in everyone if m is not member] + members_of([processes[index]])
            retired.append(member)
            after = wait_stable(
                bootstrap, "static", processes, partitions, timeout=30, retired=retired
            )
            back = next(iter(processes[index].members.values()))
            assert back.owned == owned
            assert back.changes == 1  # given its partitions once, never revoked
            assert after["group_epoch"] == before["group_epoch"]
            assert after["assignment_epoch"] == before["assignment_epoch"]
            now = {m["instance_id"]: (m["member_id"], m["member_epoch"]) for m in after["members"]}
            assert now[f"i-{member.name}"][0] != epochs[f"i-{member.name}"][0]  # a new member id
            for other, (member_id, epoch) in epochs.items():
                if other != f"i-{member.name}":
                    assert now[other] == (member_id, epoch)
            for m in everyone:
                if m is not back:
                    assert m.changes == changes[m.name], f"{m.name} was rebalanced"
            epochs = now
        check_ownership(everyone + retired)
    finally:
        stop_processes(processes)


# =============================================== 5. corral killed under a live group ===


def test_corral_killed_and_restarted_under_a_live_group(broker):
    """kill -9 of the broker while the group is stable and consuming; restarted on the same data
    and port, the members carry on at their epochs: no rebalance, no lost partitions, the group
    epoch and every member epoch unchanged, consumption resumed from the committed offsets."""
    bootstrap = broker.bootstrap
    topics = {"durable": 8}
    partitions, processes, members = start_group(
        bootstrap,
        "durable",
        topics,
        [("confluent", ["c0"]), ("confluent", ["c1"]), ("java", ["j0", "j1"])],
    )
    try:
        before = wait_stable(bootstrap, "durable", processes, partitions, timeout=60)
        records = produce(bootstrap, topics, 10)
        wait_consumed(members, records)
        changes = {m.name: m.changes for m in members}

        broker.kill()
        time.sleep(1.0)  # the members see the broker gone (heartbeats every 0.5 s fail)
        broker.start()
        time.sleep(3.0)  # several heartbeats against the restarted broker
        after = wait_stable(bootstrap, "durable", processes, partitions, timeout=30)
        assert after["group_epoch"] == before["group_epoch"]
        assert after["assignment_epoch"] == before["assignment_epoch"]
        assert {(m["member_id"], m["member_epoch"]) for m in after["members"]} == {
            (m["member_id"], m["member_epoch"]) for m in before["members"]
        }
        assert {m.name: m.changes for m in members} == changes, "a member was rebalanced"
        assert not [m.name for m in members if "lost" in m.whys]

        more_then_leave(bootstrap, topics, processes, records, 10)
    finally:
        stop_processes(processes)
