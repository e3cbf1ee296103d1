"""Group interventions by hand (src/corral/groups/interventions.py), in process: fencing a member,
forcing a rebalance, setting a consumer group's target. Each step of the consumer cases runs the
KIP-848 driver's invariant checker (never one partition owned by two members; every partition
owned once Stable); the classic cases run the classic driver's after every step."""

from __future__ import annotations

import pytest
import trio
from harness import ClassicDriver, FakeClock, S, patched_clock, stable
from harness.consumer import ConsumerDriver, Topics, make_coordinator

from corral.errors import ErrorCode
from corral.groups.interventions import fence_member, force_rebalance, set_target


def consumer_group(members: int = 3, partitions: int = 6) -> tuple[ConsumerDriver, bytes]:
    topics = Topics()
    topic_id = topics.add("t", partitions)
    driver = ConsumerDriver(topics, make_coordinator(topics))
    for i in range(members):
        driver.join(f"m{i}")
    driver.converge()
    assert driver.group is not None and driver.group.state_name == "Stable"
    return driver, topic_id


def owned_by(driver: ConsumerDriver, name: str, topic_id: bytes) -> set[int]:
    return set(driver.clients[name].owned.get(topic_id, ()))


def test_target_set_by_hand_is_reconciled_to_then_recomputed_at_the_next_bump():
    driver, topic_id = consumer_group()
    group = driver.group
    epoch = group.group_epoch
    a = driver.clients["m0"].member_id
    assert set_target(driver.coordinator, "g", {a: {"t": range(6)}}) == (ErrorCode.NONE, "")
    assert group.group_epoch == group.assignment_epoch == epoch + 1
    driver.converge()
    assert owned_by(driver, "m0", topic_id) == set(range(6))
    assert not owned_by(driver, "m1", topic_id) and not owned_by(driver, "m2", topic_id)
    assert group.state_name == "Stable"
    # A forced rebalance computes the target again: the assignor spreads the partitions.
    assert force_rebalance(driver.coordinator, "g") == (ErrorCode.NONE, "")
    assert group.group_epoch == epoch + 2
    driver.converge()
    assert [len(owned_by(driver, f"m{i}", topic_id)) for i in range(3)] == [2, 2, 2]
    assert all(c.epoch == epoch + 2 for c in driver.clients.values())


def test_fenced_consumer_member_is_told_and_its_partitions_go_to_the_others():
    driver, topic_id = consumer_group()
    fenced = driver.clients["m1"]
    assert fence_member(driver.coordinator, "g", fenced.member_id) == (ErrorCode.NONE, "")
    assert fenced.member_id not in driver.group.members
    answer = driver.heartbeat("m1")
    assert answer["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    driver.converge()
    owned = owned_by(driver, "m0", topic_id) | owned_by(driver, "m2", topic_id)
    assert owned == set(range(6))
    # The fenced consumer rejoins as a client does (epoch 0) and gets its share back.
    driver.join("m1")
    driver.converge()
    assert [len(owned_by(driver, f"m{i}", topic_id)) for i in range(3)] == [2, 2, 2]


@pytest.mark.parametrize(
    ("target", "error"),
    [
        ({"nobody": {"t": [0]}}, ErrorCode.UNKNOWN_MEMBER_ID),
        ({"m0": {"missing": [0]}}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ({"m0": {"t": [6]}}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ({"m0": {"t": [0, 1]}, "m1": {"t": [1]}}, ErrorCode.INVALID_REQUEST),
    ],
)
def test_a_target_that_cannot_be_is_refused_and_changes_nothing(target, error):
    driver, _ = consumer_group()
    ids = {name: client.member_id for name, client in driver.clients.items()}
    epoch = driver.group.group_epoch
    target = {ids.get(m, m): parts for m, parts in target.items()}
    got, message = set_target(driver.coordinator, "g", target)
    assert got == error and message
    assert driver.group.group_epoch == epoch


def test_unknown_group_and_member():
    driver, _ = consumer_group(members=1)
    coordinator = driver.coordinator
    assert fence_member(coordinator, "nope", "x")[0] == ErrorCode.GROUP_ID_NOT_FOUND
    assert force_rebalance(coordinator, "nope")[0] == ErrorCode.GROUP_ID_NOT_FOUND
    assert set_target(coordinator, "nope", {})[0] == ErrorCode.GROUP_ID_NOT_FOUND
    assert fence_member(coordinator, "g", "x")[0] == ErrorCode.UNKNOWN_MEMBER_ID


def classic_case(steps, check):
    async def main():
        with patched_clock(FakeClock()) as clock:
            driver = ClassicDriver(clock)
            driver.run(steps)
            check(driver)
            driver.check_invariants()

    trio.run(main)


def test_classic_member_expired_by_hand_rebalances_the_group():
    def check(d: ClassicDriver) -> None:
        b = d.ids["b"]
        assert fence_member(d.coordinator, "g", b) == (ErrorCode.NONE, "")
        d.expect("PreparingRebalance", members=["a"])
        d.heartbeat("a", expect="REBALANCE_IN_PROGRESS")
        d.heartbeat("b", expect="UNKNOWN_MEMBER_ID")
        d.run([S.join("a", expect="NONE"), S.sync("a", expect="NONE")])
        d.expect("Stable", generation=2, members=["a"])

    classic_case(stable("a", "b"), check)


def test_classic_rebalance_forced_by_hand():
    def check(d: ClassicDriver) -> None:
        assert force_rebalance(d.coordinator, "g") == (ErrorCode.NONE, "")
        d.expect("PreparingRebalance", members=["a", "b"])
        d.heartbeat("a", expect="REBALANCE_IN_PROGRESS")
        d.run(
            # b's join completes the join phase (every member has rejoined): a's parked one too.
            [S.join("a", expect="parked"), S.join("b", expect="NONE"), S.stabilize("a", "b")]
        )
        d.expect("Stable", generation=2, members=["a", "b"])
        # Not a consumer group: no target by hand.
        assert set_target(d.coordinator, "g", {})[0] == ErrorCode.GROUP_ID_NOT_FOUND

    classic_case(stable("a", "b"), check)
