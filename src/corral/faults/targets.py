"""What a request is about, for matching: its groups, topics with their partitions, and members.

Read from the decoded body (`Request.body`; a short path's is made from its struct when asked),
only when an active fault matches on one of them. One small reader per API that names a group,
a topic or a member; the others name none (a fault with `group`, `topic`, `partition` or
`member` never matches them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from corral.network.apis import ApiKey

# FindCoordinator's key_type of a group (1 is a transactional id, 2 a share group).
GROUP_KEY = 0


@dataclass
class Targets:
    groups: set[str] = field(default_factory=set)
    # topic name -> its partitions named in the request (empty: the whole topic).
    topics: dict[str, set[int]] = field(default_factory=dict)
    members: set[str] = field(default_factory=set)

    def topic(self, name: str | None, partitions: list[int] | None = None) -> None:
        if name is None:
            return
        self.topics.setdefault(name, set()).update(partitions or ())

    def has_partition(self, topic: str | None, partition: int | None) -> bool:
        """Whether the request names `topic` (any, when None) and, when given, `partition` of it."""
        if topic is not None:
            named = self.topics.get(topic)
            return named is not None and (partition is None or partition in named)
        return any(partition in named for named in self.topics.values())


Reader = Callable[[dict[str, Any], Targets], None]


def _group(body: dict[str, Any], out: Targets) -> None:
    if body.get("group_id"):  # "" where the version has no group id (OffsetFetch v8+)
        out.groups.add(body["group_id"])
    if body.get("member_id"):
        out.members.add(body["member_id"])


def _topics(list_field: str, name: str, partitions: str, index: str | None) -> Reader:
    """Topics listed under `list_field`, each named by `name`, its partitions under
    `partitions` (dicts whose `index` is the partition, or ints when `index` is None)."""

    def read(body: dict[str, Any], out: Targets) -> None:
        for topic in body.get(list_field) or ():
            items = topic.get(partitions) or ()
            out.topic(topic.get(name), [p[index] if index else p for p in items])

    return read


def _both(*readers: Reader) -> Reader:
    def read(body: dict[str, Any], out: Targets) -> None:
        for reader in readers:
            reader(body, out)

    return read


def _leave_group(body: dict[str, Any], out: Targets) -> None:
    _group(body, out)
    for member in body.get("members") or ():
        if member.get("member_id"):
            out.members.add(member["member_id"])


def _offset_fetch(body: dict[str, Any], out: Targets) -> None:
    _group(body, out)
    _topics("topics", "name", "partition_indexes", None)(body, out)
    for group in body.get("groups") or ():
        _group(group, out)
        _topics("topics", "name", "partition_indexes", None)(group, out)


def _find_coordinator(body: dict[str, Any], out: Targets) -> None:
    if body.get("key_type", GROUP_KEY) != GROUP_KEY:
        return
    if body.get("key"):
        out.groups.add(body["key"])
    out.groups.update(body.get("coordinator_keys") or ())


def _group_list(name: str) -> Reader:
    def read(body: dict[str, Any], out: Targets) -> None:
        out.groups.update(body.get(name) or ())

    return read


def _named_topics(body: dict[str, Any], out: Targets) -> None:
    """Topics as a list of dicts with a `name` (no partitions named)."""
    for topic in body.get("topics") or ():
        out.topic(topic.get("name"))


def _delete_topics(body: dict[str, Any], out: Targets) -> None:
    for name in body.get("topic_names") or ():
        out.topic(name)
    for topic in body.get("topics") or ():
        out.topic(topic.get("name"))


def _consumer_heartbeat(body: dict[str, Any], out: Targets) -> None:
    _group(body, out)
    for name in body.get("subscribed_topic_names") or ():
        out.topic(name)


READERS: dict[int, Reader] = {
    ApiKey.PRODUCE: _topics("topic_data", "name", "partition_data", "index"),
    ApiKey.FETCH: _topics("topics", "topic", "partitions", "partition"),
    ApiKey.LIST_OFFSETS: _topics("topics", "name", "partitions", "partition_index"),
    ApiKey.METADATA: _named_topics,
    ApiKey.OFFSET_COMMIT: _both(_group, _topics("topics", "name", "partitions", "partition_index")),
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.JOIN_GROUP: _group,
    ApiKey.HEARTBEAT: _group,
    ApiKey.LEAVE_GROUP: _leave_group,
    ApiKey.SYNC_GROUP: _group,
    ApiKey.DESCRIBE_GROUPS: _group_list("groups"),
    ApiKey.CREATE_TOPICS: _topics("topics", "name", "assignments", "partition_index"),
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.DELETE_RECORDS: _topics("topics", "name", "partitions", "partition_index"),
    ApiKey.DESCRIBE_LOG_DIRS: _topics("topics", "topic", "partitions", None),
    ApiKey.CREATE_PARTITIONS: _named_topics,
    ApiKey.DELETE_GROUPS: _group_list("groups_names"),
    ApiKey.OFFSET_DELETE: _both(_group, _topics("topics", "name", "partitions", "partition_index")),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _consumer_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: _group_list("group_ids"),
}


def targets(api_key: int, body: dict[str, Any]) -> Targets:
    out = Targets()
    reader = READERS.get(api_key)
    if reader is not None:
        reader(body, out)
    return out
