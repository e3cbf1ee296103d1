"""Running an assignor safely: a user's assignor that raises, or returns an assignment that gives
a partition twice, to a member not subscribed to its topic, or out of range, fails that one
computation. It is logged with the group id; the caller keeps the group's previous target
assignment (Kafka answers the heartbeat UNKNOWN_SERVER_ERROR on a PartitionAssignorException and
keeps serving); nothing else is affected."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from corral.assignors.registry import is_builtin
from corral.assignors.spec import Assignor, GroupAssignment, GroupSpec, TopicId

log = logging.getLogger("corral.assignors")


class InvalidAssignment(ValueError):
    """What is wrong with an assignor's result (the first problem found)."""


def validate_assignment(
    result: object, group: GroupSpec, partition_counts: Mapping[TopicId, int]
) -> GroupAssignment:
    """The result in the built-ins' form (every member; topic -> ascending tuple, empty topics
    left out), or InvalidAssignment. Partitions left unassigned are allowed, as in Kafka."""
    if not isinstance(result, Mapping):
        raise InvalidAssignment(
            f"expected a mapping of member id to assignment, got {type(result).__name__}"
        )
    owners: dict[tuple[TopicId, int], str] = {}
    normalized: GroupAssignment = {member_id: {} for member_id in group.members}
    for member_id, assignment in result.items():
        member = group.members.get(member_id) if isinstance(member_id, str) else None
        if member is None:
            raise InvalidAssignment(f"member {member_id!r} is not in the group")
        if not isinstance(assignment, Mapping):
            raise InvalidAssignment(
                f"member {member_id}: expected a mapping of topic id to partitions, "
                f"got {type(assignment).__name__}"
            )
        target = normalized[member_id]
        for topic, partitions in assignment.items():
            if topic not in member.subscribed_topic_ids:
                raise InvalidAssignment(f"member {member_id} is not subscribed to topic {topic!r}")
            count = partition_counts.get(topic)
            if count is None or count < 0:
                raise InvalidAssignment(f"topic {topic!r} (member {member_id}) does not exist")
            try:
                items = list(partitions)
            except TypeError:
                raise InvalidAssignment(
                    f"member {member_id}, topic {topic!r}: partitions are not "
                    f"a collection ({type(partitions).__name__})"
                ) from None
            for p in items:
                if type(p) is not int:
                    raise InvalidAssignment(
                        f"member {member_id}, topic {topic!r}: partition {p!r} is not an int"
                    )
                if not 0 <= p < count:
                    raise InvalidAssignment(
                        f"member {member_id}, topic {topic!r}: partition {p} is "
                        f"out of range (the topic has {count})"
                    )
                previous = owners.setdefault((topic, p), member_id)
                if previous is not member_id:
                    raise InvalidAssignment(
                        f"topic {topic!r} partition {p} is assigned twice "
                        f"(to {previous} and {member_id})"
                    )
            if items:
                target[topic] = tuple(sorted(items))
    return normalized


def run_assignor(
    assignor: Assignor,
    group_id: str,
    group: GroupSpec,
    partition_counts: Mapping[TopicId, int],
    *,
    validate: bool | None = None,
) -> GroupAssignment | None:
    """The new target assignment, or None when this computation failed (logged with the group
    id and the assignor; the caller keeps the previous target). `validate`: check the result
    (default: for assignors other than the built-ins, whose results are correct by construction
    and tested)."""
    try:
        result = assignor.assign(group, partition_counts)
    except Exception:
        log.exception(
            "group %s: assignor %r failed; keeping the previous target assignment",
            group_id,
            getattr(assignor, "name", assignor),
        )
        return None
    if validate is None:
        validate = not is_builtin(assignor)
    if not validate:
        return result  # type: ignore[return-value]
    try:
        return validate_assignment(result, group, partition_counts)
    except InvalidAssignment as e:
        log.error(
            "group %s: assignor %r returned an invalid assignment (%s); keeping the previous "
            "target assignment",
            group_id,
            getattr(assignor, "name", assignor),
            e,
        )
        return None
