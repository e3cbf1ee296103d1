"""`corral.group.max.rebalance.timeout.ms`: one member asking for an hour-long rebalance timeout
(max.poll.interval.ms) cannot hold its group for an hour. Real kafka-python consumers on a real
corral; the in-process tables are in test_state_machine.py and
test_consumer_groups.py."""

from __future__ import annotations

from cgkit import FAST_GROUPS, create_topics, wait_until
from confluent_kafka.admin import AdminClient
from conftest import CorralProcess
from kafka import KafkaConsumer

BOUND_MS = 3000
HOUR_MS = 3_600_000


def consumer(bootstrap: str) -> KafkaConsumer:
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id="g",
        max_poll_interval_ms=HOUR_MS,
        session_timeout_ms=10000,
        heartbeat_interval_ms=500,
        enable_auto_commit=False,
    )
    # kafka-python may join before its first metadata answer names the topic; as the group's
    # leader it then assigns nothing ("No partition metadata for topic bounded") and does not
    # rejoin within the test's wait (seen once in CI on a loaded machine). Its metadata first.
    assert "bounded" in c.topics()
    c.subscribe(["bounded"])
    return c


def assigned(c: KafkaConsumer) -> list[int]:
    c.poll(timeout_ms=100)
    return sorted(tp.partition for tp in c.assignment())


def owners(admin: AdminClient) -> dict[str, list[int]]:
    """The coordinator's view: each member's partitions (DescribeGroups)."""
    group = admin.describe_consumer_groups(["g"])["g"].result(timeout=10)
    return {
        m.member_id: sorted(tp.partition for tp in m.assignment.topic_partitions)
        for m in group.members
    }


def test_a_stuck_member_holds_its_group_only_as_long_as_the_bound(tmp_path):
    settings = {**FAST_GROUPS, "corral.group.max.rebalance.timeout.ms": BOUND_MS}
    broker = CorralProcess(tmp_path / "corral", {k: str(v) for k, v in settings.items()}).start()
    stuck = late = None
    try:
        create_topics(broker.bootstrap, {"bounded": 4})
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        stuck = consumer(broker.bootstrap)
        wait_until(lambda: assigned(stuck) == [0, 1, 2, 3], 30, "the first member's assignment")
        # `stuck` stops polling (its heartbeat thread goes on, so its session never expires)
        # and so never rejoins: without the bound the group would wait its hour.
        late = consumer(broker.bootstrap)
        took = wait_until(
            lambda: assigned(late) == [0, 1, 2, 3],
            30,
            "the second member's assignment, once the bound passed",
        )
        assert took >= BOUND_MS / 1000 - 0.5  # it did wait for `stuck`, as long as the bound
        assert list(owners(admin).values()) == [[0, 1, 2, 3]]  # `stuck` was removed
        # Polling again, `stuck` finds itself out, rejoins, and the two share the partitions.
        wait_until(
            lambda: (
                sorted(assigned(stuck) + assigned(late)) == [0, 1, 2, 3]
                and assigned(stuck)
                and assigned(late)
            ),
            30,
            "both members assigned",
        )
        view = owners(admin)
        assert len(view) == 2 and sorted(p for ps in view.values() for p in ps) == [0, 1, 2, 3]
    finally:
        for c in (stuck, late):
            if c is not None:
                c.close(autocommit=False)
        broker.stop()
