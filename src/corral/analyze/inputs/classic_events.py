"""Classic-group events derived from the GroupMetadata records of `__consumer_offsets`, for a
cluster without `__corral_analytics` (Apache Kafka), shaped as docs/analytics.md's `group_event`
values so the analysis reads them like corral's own.

Kafka writes a classic group's GroupMetadataValue (every member, with its assignment) when a
generation's assignment is stored (the leader's SyncGroup), when a generation ends empty, and
when a static member is replaced; a tombstone when the group is deleted. From consecutive
records of one group:

- a new generation: `member_left` for each member gone since the previous record (`reason`
  null: leaving, expiring and being fenced look alike), `member_joined` for each new member id,
  then `rebalance_end` (`members`, `members_before` = the previous record's count; `cause`,
  `start_ms`, `duration_ms` null: the start of a rebalance is never written) and, when the
  generation has members, `generation_assignment` decoded from their ConsumerProtocol bytes;
- the same generation with other member ids (a static member replaced): `member_left` /
  `member_joined`, no rebalance;
- a tombstone: `group_deleted`.
A group's first record at generation 0 (Kafka writes one when a classic group is created) is
no rebalance.

What cannot be known: `rebalance_start`, why members left and when within the generation, a
rebalance whose SyncGroup never came (no record), and anything of consumer (KIP-848) groups.
The first record seen of a group whose generation is above 1 follows history that compaction
removed: its `members_before` is null and no joins are derived from it.
Every event's `time_ms` is its record's timestamp (when the coordinator wrote it); its `seq` is
(record offset << 20) + its index among the record's events, so log order holds.
"""

from __future__ import annotations

import json
from typing import Any

from corral.groups.events import classic_partitions
from corral.groups.storage.records import GroupValue, MemberValue, read_group_value

CLASSIC = "classic"
SEQ_SHIFT = 20  # room for a million events per record (a member each)

Event = tuple[
    int, str, str, str, str, int
]  # an events row: time_ms, group, event, protocol, value, seq


class ClassicEvents:
    def __init__(self) -> None:
        self._last: dict[str, GroupValue] = {}

    def record(self, group: str, value: bytes | None, time_ms: int, offset: int) -> list[Event]:
        """The events row of one GroupMetadata record (None: a tombstone); ValueError when the
        value is not a GroupMetadataValue this reader knows."""
        if value is None:
            self._last.pop(group, None)
            return self._rows(group, time_ms, offset, [("group_deleted", {})])
        now = read_group_value(value)
        before = self._last.get(group)
        self._last[group] = now
        if before is None and now.generation > 1:
            old: dict[str, MemberValue] | None = None
        else:
            old = {} if before is None else {m.member_id: m for m in before.members}
        new = {m.member_id: m for m in now.members}
        events: list[tuple[str, dict[str, Any]]] = []
        if old is not None:
            generation_then = before.generation if before is not None else now.generation
            events += [
                ("member_left", {**_member(m, generation_then), "reason": None})
                for mid, m in old.items()
                if mid not in new
            ]
            events += [
                ("member_joined", _member(m, now.generation))
                for mid, m in new.items()
                if mid not in old
            ]
        if (before is None and now.generation > 0) or (
            before is not None and before.generation != now.generation
        ):
            events.append(
                (
                    "rebalance_end",
                    {
                        "generation_id": now.generation,
                        "members": len(now.members),
                        "members_before": None if old is None else len(old),
                        "cause": None,
                        "start_ms": None,
                        "duration_ms": None,
                    },
                )
            )
            if now.members:
                events.append(
                    (
                        "generation_assignment",
                        {
                            "generation_id": now.generation,
                            "protocol_type": now.protocol_type,
                            "protocol_name": now.protocol,
                            "assignment": {
                                m.member_id: classic_partitions(now.protocol_type, m.assignment)
                                for m in now.members
                            },
                        },
                    )
                )
        return self._rows(group, time_ms, offset, events)

    @staticmethod
    def _rows(
        group: str, time_ms: int, offset: int, events: list[tuple[str, dict[str, Any]]]
    ) -> list[Event]:
        return [
            (
                time_ms,
                group,
                event,
                CLASSIC,
                json.dumps(
                    {"v": 1, "event": event, "group_id": group, "protocol": CLASSIC, **fields}
                ),
                (offset << SEQ_SHIFT) + i,
            )
            for i, (event, fields) in enumerate(events)
        ]


def _member(m: MemberValue, generation: int) -> dict[str, Any]:
    return {
        "member_id": m.member_id,
        "instance_id": m.group_instance_id,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "generation_id": generation,
    }
