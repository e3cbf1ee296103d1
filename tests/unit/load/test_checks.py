"""checks.ConsumerLedger: what `corral load` concludes from KIP-848 members' reports (their epochs
and partitions, stamped with the time they changed, shipped by several workers out of order)."""

from __future__ import annotations

from corral.load.checks import ConsumerLedger, Violations


def ledger(partitions=2, workers=2) -> tuple[ConsumerLedger, Violations]:
    violations = Violations()
    return ConsumerLedger({"t": partitions}, violations, workers), violations


def owned(member: str, epoch: int, parts: list[int], at: float) -> tuple:
    return ("owned", member, epoch, {"t": parts} if parts else {}, at)


def test_a_release_shipped_after_the_acquisition_it_preceded_is_no_violation():
    led, violations = ledger()
    led.shipped_by(0, [owned("a", 2, [0, 1], 1.0)], 1.5)
    led.shipped_by(1, [owned("b", 2, [], 1.2)], 1.5)
    # Worker 1 ships b taking partition 1 (at 3.0) before worker 0 ships a giving it up (at 2.0).
    led.shipped_by(1, [owned("b", 3, [1], 3.0)], 3.5)
    led.shipped_by(0, [owned("a", 3, [0], 2.0)], 4.0)
    assert violations.count == 0
    assert led.owner == {("t", 0): "a", ("t", 1): "b"}


def test_two_owners_at_once_is_a_violation():
    led, violations = ledger()
    led.shipped_by(0, [owned("a", 2, [0, 1], 1.0)], 1.5)
    led.shipped_by(1, [owned("b", 3, [1], 2.0)], 2.5)
    led.shipped_by(0, [owned("a", 3, [0], 3.0)], 3.5)  # released only after b had it
    assert violations.count == 1
    assert "t-1 owned by both a (epoch 2) and b (epoch 3)" in violations.examples[0]
    assert led.owner[("t", 1)] == "b"  # a's late release does not take it from b


def test_stable_only_after_a_quiet_heartbeat_round():
    led, violations = ledger(workers=1)
    led.interval_s = 1.0
    # Both at epoch 2, a owns everything, b nothing: exactly once, but the next target may
    # still be pending behind the assignment interval.
    led.shipped_by(0, [owned("a", 2, [0, 1], 1.0), owned("b", 2, [], 1.1)], 1.2)
    led.oldest_ok = 1.5
    assert led.stable_generation(2) is None
    # b's next heartbeat computes the target: the epochs part, then meet again.
    led.shipped_by(
        0, [owned("b", 3, [], 2.0), owned("a", 3, [0], 2.1), owned("b", 3, [1], 2.6)], 2.7
    )
    led.oldest_ok = 3.0
    assert led.stable_generation(2) is None  # not yet a full interval since the change
    led.oldest_ok = 3.7
    assert led.stable_generation(2) == 3
    assert led.stable_generation(3) is None  # a member is missing
    assert led.generations_seen() == 2 and violations.count == 0


def test_quiet_group_at_one_epoch_missing_partitions_is_a_violation():
    led, violations = ledger(partitions=3, workers=1)
    led.shipped_by(0, [owned("a", 4, [0], 1.0), owned("b", 4, [1], 1.0)], 1.1)
    led.oldest_ok = 5.0
    assert led.stable_generation(2) is None
    assert (
        violations.count == 1 and "1 partitions owned by no member (t-2)" in violations.examples[0]
    )
    led.stable_generation(2)
    assert violations.count == 1  # said once per epoch


def test_leaving_members_release_and_leave_the_count():
    led, violations = ledger(workers=1)
    led.shipped_by(0, [owned("a", 2, [0, 1], 1.0), owned("a", -1, [], 2.0)], float("inf"))
    assert led.owner == {} and led.members == {} and violations.count == 0


def test_a_quiet_group_missing_partitions_is_a_violation_whoever_is_in_it():
    """Churn: a member left and the two in the group are quiet at one epoch without its
    partition; checked as the workers ship, not only when the run asks for all its members."""
    led, violations = ledger(partitions=3, workers=1)
    led.shipped_by(
        0, [owned("a", 2, [0], 1.0), owned("b", 2, [1], 1.0), owned("c", 2, [2], 1.0)], 1.1
    )
    led.shipped_by(
        0, [owned("c", -1, [], 2.0), owned("a", 3, [0], 2.5), owned("b", 3, [1], 2.5)], 2.6
    )
    assert violations.count == 0  # not quiet yet
    led.oldest_ok = 4.0
    led.shipped_by(0, [], 4.0)
    assert violations.count == 1
    assert (
        "epoch 3: every member stable, 1 partitions owned by no member (t-2)"
        in violations.examples[0]
    )


def test_epochs_where_the_group_met_with_every_partition_owned_are_rebalances_completed():
    led, violations = ledger(workers=1)
    led.shipped_by(
        0,
        [
            owned("a", 1, [0, 1], 1.0),
            owned("b", 2, [], 2.0),  # b joined: epoch 2, a still at 1
            owned("a", 2, [0], 2.1),  # a gave partition 1 up: not all owned
            owned("b", 2, [1], 2.2),  # b took it: epoch 2 complete
            owned("b", -1, [], 3.0),  # b left: a alone without partition 1
            owned("a", 3, [0, 1], 3.5),
        ],
        4.0,
    )
    assert led.completed() == {1, 2, 3} and led.generations() == {1, 2, 3}
    assert led.converged_now() and violations.count == 0
    led.shipped_by(0, [owned("c", 4, [], 5.0)], 5.1)  # c joined: epochs differ
    assert not led.converged_now() and led.completed() == {1, 2, 3}
