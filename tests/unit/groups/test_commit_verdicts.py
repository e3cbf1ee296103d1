"""What the network thread's views say of an OffsetCommit (`HeartbeatView.commit_verdict` for
classic groups, `ConsumerHeartbeatView.commit_verdict` for consumer groups): the first step of
committing without Python (docs/offset-commit-short-path.md). A view says "accepted" only when
the coordinator accepts: every `Offsets.commit_error` of the scenarios below (the classic state
machine's scripted cases, random consumer and mixed groups with stale, newer and older epochs,
KIP-1251's per-partition rule included) is checked against the views at that moment; and a group
being deleted is refused at once."""

from __future__ import annotations

import random

import pytest
from harness import (
    TABLES,
    ClassicClient,
    ConsumerDriver,
    S,
    Topics,
    answer,
    classic_group,
    classic_round,
    make_coordinator,
    restart_under_other_protocol,
    run_case,
    setup,
)

from corral.errors import ErrorCode
from corral.groups.consumer import ConsumerGroup
from corral.groups.coordinator import GroupCoordinator
from corral.groups.offsets import Offsets


class Tally:
    def __init__(self) -> None:
        self.asked = self.accepted = self.by_view = 0


@pytest.fixture
def tally(monkeypatch) -> Tally:
    """Checks every commit_error against both views of its coordinator."""
    seen = Tally()
    init, decide = GroupCoordinator.__init__, Offsets.commit_error

    def remember_views(self, *args, **kwargs):
        init(self, *args, **kwargs)
        for shard in self.shards:
            shard.offsets._views = (self.heartbeat_view, self.consumer_heartbeat_view)

    def checked(
        self, group_id, member_id, instance_id, generation_id, version, partitions=lambda: ()
    ):
        classic, consumer = self._views
        says = classic.commit_verdict(group_id, member_id, instance_id, generation_id) or (
            consumer is not None
            and consumer.commit_verdict(group_id, member_id, generation_id, version)
        )
        got = decide(self, group_id, member_id, instance_id, generation_id, version, partitions)
        seen.asked += 1
        seen.accepted += got == ErrorCode.NONE
        if says:
            seen.by_view += 1
            assert got == ErrorCode.NONE, (group_id, member_id, generation_id, version, got)
        return got

    monkeypatch.setattr(GroupCoordinator, "__init__", remember_views)
    monkeypatch.setattr(Offsets, "commit_error", checked)
    return seen


@pytest.mark.parametrize(
    "steps",
    [
        pytest.param(steps, id=f"{table}-{name}")
        for table, rows in TABLES.items()
        for name, steps in rows
    ],
)
def test_classic_cases(steps, tally):
    run_case(steps)


def test_classic_views_accept_what_classic_groups_accept(tally):
    stable = [S.join(n, expect="parked") for n in "ab"] + [S.stabilize("a", "b")]
    run_case(stable + [S.commit("a", "NONE"), S.commit("b", "NONE", version=9)])
    assert tally.by_view == 2
    run_case(
        stable
        + [
            S.join("c", expect="parked"),
            S.expect("PreparingRebalance"),
            S.commit("a", "NONE", generation=1),
        ]
    )
    assert tally.by_view == 3, "PreparingRebalance takes the generation's commits"


def consumer_commit(
    c: GroupCoordinator, group_id: str, member_id: str, epoch: int, version: int, partitions
) -> ErrorCode:
    return c.offsets.commit_error(group_id, member_id, None, epoch, version, partitions)


@pytest.mark.parametrize("seed", range(6))
def test_consumer_and_mixed_groups(seed, tally):
    """Random members of both protocols joining, leaving, reconciling and moving between the
    protocols, with commits at their epoch, one before (per partition, KIP-1251) and one after,
    in v8 and v9."""
    rng = random.Random(seed)
    topics, tid, c, d = setup(partitions=8)
    classic_group(d, [ClassicClient(d, f"m{i}", ["cooperative-sticky", "range"]) for i in range(3)])
    names = sorted(d.clients)
    for _ in range(40):
        name = rng.choice(names)
        if rng.random() < 0.3:
            restart_under_other_protocol(
                d,
                name,
                lambda driver, member: ClassicClient(
                    driver, member, ["cooperative-sticky", "range"]
                ),
            )
        group = c.groups.get("g")
        if not isinstance(group, ConsumerGroup):
            classic_round(d, [d.clients[n] for n in names])
            continue
        for other in rng.sample(names, k=len(names)):
            client = d.clients[other]
            if isinstance(client, ClassicClient):
                client.cycle()
                member_id, epoch = client.member_id, client.generation
            else:
                if client.joined:
                    d.heartbeat(other, acknowledge=rng.random() < 0.7)
                member_id, epoch = client.member_id, client.epoch
            owned = [(t, p) for t, ps in client.owned.items() for p in ps]
            some = rng.sample(owned, k=min(len(owned), 2)) + [(tid, rng.randrange(8))]
            for delta in (0, -1, 1):
                for version in (8, 9):
                    consumer_commit(c, "g", member_id, epoch + delta, version, lambda: some)
    assert tally.by_view > tally.asked // 10, vars(tally)


def test_a_group_being_deleted_is_refused_at_once(tally):
    topics = Topics()
    topics.add("t", 4)
    c = make_coordinator(topics)
    d = ConsumerDriver(topics, c)
    d.join("a")
    d.converge()
    a = d.clients["a"]
    view = c.consumer_heartbeat_view
    assert view.commit_verdict("g", a.member_id, a.epoch, 9)
    # A subscribed topic changed: heartbeats go to the coordinator (which may bump the
    # epoch), commits need not.
    d.group.metadata_expired = True
    assert view.answer("g", a.member_id, None, a.epoch, "client", "/127.0.0.1") is None
    assert view.commit_verdict("g", a.member_id, a.epoch, 9)
    assert consumer_commit(c, "g", a.member_id, a.epoch, 9, lambda: ()) == ErrorCode.NONE
    d.group.metadata_expired = False
    # What a deletion's write marks the group with (only an empty one is deleted, but the mark
    # alone must refuse).
    d.group.begin_delete()
    assert not view.commit_verdict("g", a.member_id, a.epoch, 9)
    assert (
        consumer_commit(c, "g", a.member_id, a.epoch, 9, lambda: ())
        == ErrorCode.COORDINATOR_NOT_AVAILABLE
    )
    d.group.abort_delete()
    assert view.commit_verdict("g", a.member_id, a.epoch, 9)
    d.leave("a")
    assert answer(c.delete_group("g")) == ErrorCode.NONE
    assert not view.commit_verdict("g", a.member_id, a.epoch, 9)


def test_a_classic_group_emptied_and_deleted_is_refused_at_once(tally):
    driver = run_case([S.join(n, expect="parked") for n in "ab"] + [S.stabilize("a", "b")])
    c, member_id = driver.coordinator, driver.ids["a"]
    assert c.heartbeat_view.commit_verdict("g", member_id, None, 1)
    for name in "ab":
        driver.leave(name)
    assert not c.heartbeat_view.commit_verdict("g", member_id, None, 1)
    assert answer(c.delete_group("g")) == ErrorCode.NONE
    assert not c.heartbeat_view.commit_verdict("g", member_id, None, 1)
