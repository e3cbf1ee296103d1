"""One KIP-848 consumer group member's state: its subscription (ConsumerGroupMemberMetadata) and
its current assignment (ConsumerGroupCurrentMemberAssignment), as its group's records make it
(state.py replays them)."""

from __future__ import annotations

from collections.abc import Mapping

from corral.groups.consumer.assignment_records import (
    EMPTY_ASSIGNMENT,
    as_record,
    epochs_record,
)
from corral.groups.consumer.reconcile import MemberState, Reconciled
from corral.groups.storage import consumer_records as cr

# A new member's assignment state (shared: a Reconciled is never changed in place).
NEW_MEMBER = Reconciled(0, 0, MemberState.STABLE, EMPTY_ASSIGNMENT, EMPTY_ASSIGNMENT)


class ConsumerMember:
    """One member: its subscription (ConsumerGroupMemberMetadata) and its current assignment
    (ConsumerGroupCurrentMemberAssignment). Timer keys are the coordinator's."""

    __slots__ = (
        "member_id",
        "instance_id",
        "rack_id",
        "client_id",
        "client_host",
        "topic_names",
        "regex",
        "rebalance_timeout_ms",
        "server_assignor",
        "classic",
        "current",
        "session_key",
        "rebalance_key",
        "rebalance_epoch",
        "join_key",
        "sync_key",
    )

    def __init__(self, member_id: str):
        self.member_id = member_id
        self.instance_id: str | None = None
        self.rack_id: str | None = None
        self.client_id = ""
        self.client_host = ""
        self.topic_names: tuple[str, ...] = ()
        # "" when the member has none, as Kafka's members start (and its records say).
        self.regex: str | None = ""
        self.rebalance_timeout_ms = -1
        self.server_assignor: str | None = None
        self.classic: cr.ClassicMetadata | None = None
        self.current = NEW_MEMBER
        self.session_key = 0
        self.rebalance_key = 0
        self.rebalance_epoch = -1  # the epoch its revocation deadline was armed at
        # A classic member's deadlines to rejoin (after REBALANCE_IN_PROGRESS) and to sync.
        self.join_key = 0
        self.sync_key = 0

    @property
    def epoch(self) -> int:
        return self.current.epoch

    @property
    def session_timeout_ms(self) -> int | None:
        """A classic member's own session timeout (None: the group's applies)."""
        return None if self.classic is None else self.classic.session_timeout_ms

    def metadata_record(self, group_id: str) -> cr.MemberMetadata:
        return cr.MemberMetadata(
            group_id,
            self.member_id,
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.topic_names,
            self.regex,
            self.rebalance_timeout_ms,
            self.server_assignor,
            self.classic,
        )

    def assignment_record(
        self, group_id: str, current: Reconciled | None = None
    ) -> cr.CurrentAssignment:
        c = current or self.current
        assigned, pending = as_record(c.assigned), as_record(c.pending_revocation)
        # Every topic's AssignmentEpochs, as Kafka 4.3+ writes them (KIP-1251).
        return cr.CurrentAssignment(
            group_id,
            self.member_id,
            c.epoch,
            c.previous_epoch,
            int(c.state),
            assigned,
            pending,
            epochs_record(c, assigned),
            epochs_record(c, pending),
        )


def preferred_of(counts: Mapping[str, int]) -> str | None:
    """The assignor of highest count (ties: the smaller name); None if there is none."""
    if not counts:
        return None
    return min(counts, key=lambda name: (-counts[name], name))
