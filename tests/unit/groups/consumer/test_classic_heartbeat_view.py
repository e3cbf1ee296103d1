"""The view behind the network thread's short path for Heartbeats of classic members inside KIP-848
consumer groups (`ConsumerHeartbeatView.classic_answer`), in process: in random rolling
migrations, whenever the view would answer a classic member's Heartbeat, the coordinator answers
NONE to it too and writes nothing. Over the wire: tests/wire/test_classic_members_short_path.py."""

from __future__ import annotations

import random

import pytest
from harness import (
    ClassicClient,
    FakeLog,
    classic_group,
    classic_round,
    converge,
    restart_under_other_protocol,
    setup,
    stable_group,
)
from shortpath import (
    NONE,
)

from corral.errors import ErrorCode
from corral.groups.consumer import ConsumerGroup


class Checked(ClassicClient):
    """A classic client whose every Heartbeat is first put to the view: when the view would
    answer, the coordinator must answer NONE and write nothing."""

    answered = 0

    def heartbeat(self) -> ErrorCode:
        view = self.c.consumer_heartbeat_view
        short = view.classic_answer("g", self.member_id, self.instance_id, self.generation)
        before = len(self.c.writer.pairs)
        code = super().heartbeat()
        if short is not None:
            Checked.answered += 1
            assert (short, code) == (NONE, ErrorCode.NONE)
            assert len(self.c.writer.pairs) == before, (
                "the coordinator wrote for a steady heartbeat"
            )
        return code


@pytest.mark.parametrize("seed", range(6))
def test_the_view_answers_classic_members_only_as_the_coordinator_does(seed):
    rng = random.Random(seed)
    Checked.answered = 0
    topics, _, c, d = setup(partitions=8, log=FakeLog(keep=True))
    protocols = (
        [["range"], ["cooperative-sticky", "range"]]
        if seed % 2
        else [["cooperative-sticky"], ["cooperative-sticky", "range"]]
    )
    classic_group(
        d,
        [
            Checked(d, f"m{i}", rng.choice(protocols), instance_id=rng.choice([None, f"i{i}"]))
            for i in range(3)
        ],
    )
    names = sorted(d.clients)
    for _ in range(40):
        name = rng.choice(names)
        if rng.random() < 0.3:
            restart_under_other_protocol(
                d, name, lambda driver, member: Checked(driver, member, rng.choice(protocols))
            )
        if not isinstance(c.groups.get("g"), ConsumerGroup):
            classic_round(d, [d.clients[n] for n in names])
            continue
        for other in rng.sample(names, k=len(names)):
            client = d.clients[other]
            if isinstance(client, ClassicClient):
                if client.joined and rng.random() < 0.2:  # a stale generation: Python's
                    stale = (client.member_id, client.instance_id, client.generation - 1)
                    assert c.consumer_heartbeat_view.classic_answer("g", *stale) is None
                    assert c.heartbeat("g", *stale) == ErrorCode.ILLEGAL_GENERATION
                client.cycle()
            elif client.joined:
                d.heartbeat(other, acknowledge=rng.random() < 0.7)
    if isinstance(c.groups.get("g"), ConsumerGroup):
        converge(d, 12)
        stable_group(d)
        for client in d.clients.values():
            if isinstance(client, ClassicClient):
                assert client.heartbeat() == ErrorCode.NONE
    assert Checked.answered > 0
