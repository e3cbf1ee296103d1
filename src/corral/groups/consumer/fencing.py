"""Members removed from a consumer group (left, fenced, expired): the records Kafka's
consumerGroupFenceMembers writes, the group turned back into a classic group when only classic
members would remain (reference/kip848.md)."""

from __future__ import annotations

import logging
from collections import Counter

from corral.clock import wall_ms
from corral.groups.consumer.member_state import ConsumerMember
from corral.groups.consumer.members import names_after, regexes_after, removal_records
from corral.groups.consumer.migration import MigrationPolicy, downgrade_record, may_downgrade
from corral.groups.consumer.state import ConsumerGroup
from corral.groups.consumer.targets.inputs import TopicImage, metadata_hash
from corral.groups.storage import consumer_records as cr
from corral.groups.storage.records import Record

log = logging.getLogger("corral.groups")


def fence_records(
    group: ConsumerGroup,
    members: list[ConsumerMember],
    topics: TopicImage,
    migration: MigrationPolicy,
    max_size: int,
) -> list[Record]:
    """Kafka's consumerGroupFenceMembers: the members' (distinct, of the group) tombstones,
    those of the regexes nobody uses any more, a bumped epoch (with the target epoch moved
    too if the group is now empty, KAFKA-20442). From the group's counts: it costs what
    leaves, not what stays, so a whole group leaving one by one costs O(members)."""
    gid = group.group_id
    staying = len(group.members) - len(members)
    if may_downgrade(group, members, staying, migration, max_size):
        log.info("group %s: only classic members remain; it becomes a classic group", gid)
        leaving = {m.member_id for m in members}
        remaining = [m for m in group.members.values() if m.member_id not in leaving]
        return [
            *group.tombstones(),
            downgrade_record(group, remaining, group.target, topics, wall_ms()),
        ]
    records: list[Record] = []
    for member in members:
        records += removal_records(gid, member.member_id)
    gone = Counter(m.regex for m in members if m.regex)
    unused = [r for r, n in gone.items() if r in group.regexes and group.regex_counts[r] <= n]
    unused += sorted(group.unused_regexes.difference(gone))
    records += [cr.ConsumerTombstone(cr.REGEX, gid, r) for r in unused]
    names = names_after(group, members, (), regexes_after(group, records))
    epoch = group.group_epoch + 1
    records.append(cr.GroupEpoch(gid, epoch, metadata_hash(names, topics)))
    if not staying:
        records.append(cr.TargetEpoch(gid, epoch, 0))
    return records
