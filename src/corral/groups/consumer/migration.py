"""Moving a live group between the classic and the consumer protocol (reference/kip848.md §5):
the records that turn a classic group into a consumer group (an online upgrade, when the first
ConsumerGroupHeartbeat reaches it) and the classic group record that turns a consumer group whose
last consumer-protocol member left back into a classic one (an online downgrade). Pure functions
of the groups and the topic image; the coordinator decides when (classic_members.py, protocol.py)
and writes what they return.

A classic "consumer" member's embedded protocol (ConsumerProtocolSubscription in its JoinGroup
metadata, ConsumerProtocolAssignment in its SyncGroup answer) is read and written here too.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from corral import _core
from corral.errors import ErrorCode
from corral.groups.classic.state import CONSUMER_PROTOCOL_TYPE as PROTOCOL_TYPE
from corral.groups.classic.state import vote
from corral.groups.consumer.member_state import ConsumerMember
from corral.groups.consumer.members import GroupError
from corral.groups.consumer.reconcile import MemberState, Partitions
from corral.groups.consumer.state import ConsumerGroup
from corral.groups.consumer.targets.inputs import TopicImage, metadata_hash
from corral.groups.storage import consumer_records as cr
from corral.groups.storage import records as classic_records
from corral.groups.storage.records import Record

log = logging.getLogger("corral.groups")

if TYPE_CHECKING:
    from corral.groups.classic import ClassicGroup
    from corral.groups.classic.state import ClassicMember
    from corral.groups.group import Group
# The newest ConsumerProtocol version; a member's newer one is answered in this one (Kafka's
# ConsumerProtocol.checkAssignmentVersion).
NEWEST_VERSION = 3


class MigrationPolicy:
    """`group.consumer.migration.policy`: which online conversions are allowed (converting an
    empty group is always allowed)."""

    def __init__(self, value: str):
        self.value = value.lower()

    @property
    def upgrades(self) -> bool:
        return self.value in ("bidirectional", "upgrade")

    @property
    def downgrades(self) -> bool:
        return self.value in ("bidirectional", "downgrade")

    @property
    def disabled(self) -> bool:
        return self.value == "disabled"


# ============================================================== the embedded protocol ===


@dataclass(frozen=True, slots=True)
class Subscription:
    """What a classic member's ConsumerProtocolSubscription says."""

    topics: tuple[str, ...]
    owned: dict[str, list[int]]  # topic name -> partitions
    rack_id: str | None


def read_subscription(metadata: bytes) -> Subscription:
    """Raises ValueError when the bytes are not a subscription."""
    _, topics, owned, _, rack = _core.decode_consumer_subscription(metadata)
    merged: dict[str, list[int]] = {}
    for topic, partitions in owned:
        merged.setdefault(topic, []).extend(partitions)
    return Subscription(tuple(topics), merged, rack)


def protocol_version(metadata: bytes) -> int:
    """The ConsumerProtocol version a member's metadata is written in, as its answers must be
    (Kafka's ConsumerProtocol.deserializeVersion: the leading int16)."""
    if len(metadata) < 2:
        return 0
    version: int = struct.unpack_from(">h", metadata)[0]
    return max(0, min(version, NEWEST_VERSION))


def by_id(partitions: dict[str, list[int]], topics: TopicImage) -> dict[bytes, frozenset[int]]:
    """Partitions by topic name -> by topic id; topics that do not exist are left out."""
    out: dict[bytes, frozenset[int]] = {}
    for name, ps in partitions.items():
        topic_id = topics.id_of(name)
        if topic_id is not None and ps:
            out[topic_id] = out.get(topic_id, frozenset()) | frozenset(ps)
    return out


def encode_assignment(assigned: Partitions, version: int, topics: TopicImage) -> bytes:
    """A member's partitions (by topic id) as ConsumerProtocolAssignment bytes in `version`;
    topics deleted meanwhile are left out."""
    named = []
    for topic_id, ps in assigned.items():
        name = topics.name_of(topic_id)
        if name and ps:
            named.append((name, sorted(ps)))
    named.sort()
    return _core.encode_consumer_assignment(version, named)


def supports_classic_protocols(group: ConsumerGroup, protocol_type: str, names: list[str]) -> bool:
    """Whether a classic member may join: the consumer protocol type and a protocol name every
    classic member of the group supports (Kafka's ConsumerGroup.supportsClassicProtocols)."""
    if protocol_type != PROTOCOL_TYPE:
        return False
    if not group.members:
        return bool(names)
    n = group.classic_members
    return any(group.classic_protocol_counts.get(name, 0) == n for name in names)


# ============================================================================ upgrade ===


def upgrade_records(
    classic: ClassicGroup, topics: TopicImage, max_size: int
) -> list[cr.ConsumerRecord]:
    """The records of the consumer group a live classic group becomes (Kafka's
    ConsumerGroup.fromClassicGroup): group epoch = target epoch = the classic generation, every
    member STABLE at it with its classic assignment as current and target. Raises GroupError
    (GROUP_ID_NOT_FOUND) when the group cannot be upgraded. The migration policy is the caller's."""
    gid = classic.group_id
    if classic.protocol_type != PROTOCOL_TYPE:
        raise GroupError(
            ErrorCode.GROUP_ID_NOT_FOUND,
            f"Cannot upgrade classic group {gid} to consumer group because the group "
            "does not use the consumer embedded protocol.",
        )
    if len(classic.members) > max_size:
        raise GroupError(
            ErrorCode.GROUP_ID_NOT_FOUND,
            f"Cannot upgrade classic group {gid} to consumer group because the group "
            "size exceeds the consumer group maximum size.",
        )
    generation = classic.generation_id
    metadata: list[cr.MemberMetadata] = []
    targets: list[cr.TargetMember] = []
    currents: list[cr.CurrentAssignment] = []
    names: set[str] = set()
    for m in classic.members.values():
        try:
            assigned = _classic_assignment(m.assignment, gid)
            subscription = _subscription_of(m, classic.protocol_name)
        except (ValueError, KeyError):
            raise GroupError(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"Cannot upgrade classic group {gid} to consumer group because the "
                "embedded consumer protocol is malformed.",
            ) from None
        partitions = {t: tuple(sorted(ps)) for t, ps in by_id(assigned, topics).items()}
        member = cr.MemberMetadata(
            gid,
            m.member_id,
            m.group_instance_id,
            subscription.rack_id,
            m.client_id,
            m.client_host,
            tuple(sorted(set(subscription.topics))),
            "",
            m.rebalance_timeout_ms,
            None,
            cr.ClassicMetadata(m.session_timeout_ms, list(m.protocols)),
        )
        names.update(member.topic_names)
        metadata.append(member)
        targets.append(cr.TargetMember(gid, m.member_id, partitions))
        # Each partition assigned at the classic generation (Kafka's toAssignmentWithEpochs).
        currents.append(
            cr.CurrentAssignment(
                gid,
                m.member_id,
                generation,
                generation,
                int(MemberState.STABLE),
                partitions,
                {},
                {t: (generation,) * len(ps) for t, ps in partitions.items()},
            )
        )
    return [
        *metadata,
        cr.GroupEpoch(gid, generation, metadata_hash(names, topics)),
        *targets,
        cr.TargetEpoch(gid, generation, 0),
        *currents,
    ]


def _subscription_of(member: ClassicMember, chosen: str | None) -> Subscription:
    """The member's subscription, read through the group's protocol. In a new group's first
    rebalance none is chosen yet (a consumer-protocol member may arrive during
    group.initial.rebalance.delay.ms): then through the member's own protocols, in its order of
    preference, since a consumer sends the same subscription in each. Kafka 4.4 reads the chosen
    protocol unchecked there and fails the heartbeat; the member never consumes."""
    if chosen:
        return read_subscription(member.metadata(chosen))
    for _, metadata in member.protocols:
        try:
            return read_subscription(metadata)
        except ValueError:
            continue
    raise ValueError("no protocol of the member carries a subscription")


def _classic_assignment(data: bytes, group_id: str) -> dict[str, list[int]]:
    if not data:
        return {}  # a member that joined but never synced
    partitions, user_data = _core.decode_consumer_assignment(data)
    if user_data:
        raise GroupError(
            ErrorCode.GROUP_ID_NOT_FOUND,
            f"Cannot upgrade classic group {group_id} to consumer group because an "
            "unsupported custom assignor is in use. Please refer to the documentation "
            "or switch to a default assignor before re-attempting the upgrade.",
        )
    merged: dict[str, list[int]] = {}
    for topic, ps in partitions:
        merged.setdefault(topic, []).extend(ps)
    return merged


# ========================================================================== downgrade ===


def may_downgrade(
    group: ConsumerGroup,
    leaving: list[ConsumerMember],
    staying: int,
    policy: MigrationPolicy,
    max_size: int,
) -> bool:
    """Kafka's validateOnlineDowngrade: members remain (`staying` once `leaving` are gone), all
    of them classic, downgrades are allowed and a classic group (group.max.size) may hold them.
    From the group's classic member count, never walking its members."""
    if (
        not staying
        or group.classic_members - sum(m.classic is not None for m in leaving) != staying
    ):
        return False
    if not policy.downgrades:
        log.info(
            "group %s: not downgraded to a classic group: online downgrade is disabled",
            group.group_id,
        )
        return False
    if staying > max_size:
        log.info(
            "group %s: not downgraded to a classic group: %d members is more than group.max.size",
            group.group_id,
            staying,
        )
        return False
    return True


def classic_protocols(
    group: Group | None, records: Iterable[Record]
) -> dict[str, list[tuple[str, bytes]]]:
    """Every classic member's protocols, as the group and `records` have them (a downgrade's
    record keeps only the chosen protocol; the classic group gets them all back)."""
    out = {
        m.member_id: m.classic.protocols
        for m in getattr(group, "members", {}).values()
        if m.classic is not None
    }
    out.update(
        (r.member_id, r.classic.protocols)
        for r in records
        if isinstance(r, cr.MemberMetadata) and r.classic is not None
    )
    return out


def downgrade_record(
    group: ConsumerGroup,
    members: list[ConsumerMember],
    targets: dict[str, dict[bytes, frozenset[int]]],
    topics: TopicImage,
    now_ms: int,
) -> classic_records.GroupMetadata:
    """The classic group record a consumer group of only classic members becomes (Kafka's
    ClassicGroup.fromConsumerGroup): generation = the group epoch, the protocol chosen by vote,
    each member's target serialized in its own ConsumerProtocol version; the first member leads."""
    protocol = vote([[name for name, _ in m.classic.protocols] for m in members])  # type: ignore[union-attr]
    values = []
    for m in members:
        classic = m.classic
        assert classic is not None
        subscription = next(data for name, data in classic.protocols if name == protocol)
        assignment = encode_assignment(
            targets.get(m.member_id, {}), protocol_version(subscription), topics
        )
        values.append(
            classic_records.MemberValue(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                classic.session_timeout_ms,
                subscription,
                assignment,
            )
        )
    value = classic_records.GroupValue(
        PROTOCOL_TYPE, group.group_epoch, protocol, members[0].member_id, now_ms, values
    )
    return classic_records.GroupMetadata(group.group_id, classic_records.group_value(value))
