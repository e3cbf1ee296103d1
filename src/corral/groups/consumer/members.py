"""What one ConsumerGroupHeartbeat asks and how it changes a member, apart from the protocol's
flow (protocol.py): the request, Kafka's epoch check with its lost-response exception, the member
with the request's fields applied, removal records, and views of the group's subscriptions that
take the heartbeat's own records into account before they are applied."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any

from corral.errors import ErrorCode
from corral.groups.consumer.member_state import ConsumerMember, preferred_of
from corral.groups.consumer.reconcile import Partitions, Reconciled
from corral.groups.consumer.state import ConsumerGroup
from corral.groups.storage import consumer_records as cr
from corral.groups.storage.records import Record

if TYPE_CHECKING:
    from corral.groups.consumer.targets.inputs import TopicImage


# What a heartbeat's requester may DESCRIBE, of the topic names given (HeartbeatRequest).
TopicFilter = Callable[[list[str]], Collection[str]]


class GroupError(Exception):
    """A heartbeat refused with Kafka's error code and message."""

    def __init__(self, code: ErrorCode, message: str = ""):
        super().__init__(message)
        self.code = code
        self.message = message


# Identity equality and hashing, as a plain class.
@dataclass(slots=True, kw_only=True, eq=False)
class HeartbeatRequest:
    """What ConsumerGroupHeartbeat asks, independent of its version. `owned` is None when the
    request leaves TopicPartitions out (unchanged). `topic_filter` (None without an authorizer,
    optional): the topic names, of those given, the requester may DESCRIBE; the regexes this
    heartbeat resolves keep only those (Kafka's TopicRegexResolver, with the heartbeat's
    context)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    topic_names: list[str] | None
    regex: str | None
    server_assignor: str | None
    owned: Partitions | None
    client_id: str
    client_host: str
    topic_filter: TopicFilter | None = None

    @property
    def is_full(self) -> bool:
        return (
            self.rebalance_timeout_ms != -1
            and self.owned is not None
            and (self.topic_names is not None or self.regex is not None)
        )


def compile_regex(regex: str) -> Any:  # an re2 pattern (google-re2 has no types)
    import re2

    try:
        return re2.compile(regex)
    except re2.error as e:
        raise GroupError(
            ErrorCode.INVALID_REGULAR_EXPRESSION,
            f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {e}.",
        ) from None


def resolve_regex(
    regex: str, names: Iterable[str], topic_filter: TopicFilter | None = None
) -> tuple[str, ...]:
    """The topics of `names` the regex matches in full (every topic, internal ones included, as
    Kafka's TopicRegexResolver scans them), less those `topic_filter` refuses."""
    pattern = compile_regex(regex)
    matched = [name for name in names if pattern.fullmatch(name)]
    if topic_filter is not None and matched:
        allowed = topic_filter(matched)
        matched = [name for name in matched if name in allowed]
    return tuple(sorted(matched))


def check_epoch(member: ConsumerMember, req: HeartbeatRequest) -> None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid, with the lost-response exception."""
    received, stored = req.member_epoch, member.epoch
    if received == 0 or received == stored:
        return
    if received > stored:
        raise GroupError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a greater member epoch ({received}) than "
            f"the one known by the group coordinator ({stored}). The member must "
            "abandon all its partitions and rejoin.",
        )
    if (
        received != member.current.previous_epoch
        or req.owned is None
        or not _is_subset(req.owned, member.current.assigned)
    ):
        raise GroupError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a smaller member epoch ({received}) than "
            f"the one known by the group coordinator ({stored}). The member must "
            "abandon all its partitions and rejoin.",
        )


def _is_subset(owned: Partitions, assigned: Partitions) -> bool:
    return all(ps <= assigned.get(topic, frozenset()) for topic, ps in owned.items() if ps)


def updated_member(member: ConsumerMember, req: HeartbeatRequest) -> ConsumerMember:
    """The member with the request's non-null fields (null or -1: unchanged)."""
    updated = copy_member(member, member.member_id)
    if req.instance_id is not None:
        updated.instance_id = req.instance_id
    if req.rack_id is not None:
        updated.rack_id = req.rack_id
    if req.rebalance_timeout_ms != -1:
        updated.rebalance_timeout_ms = req.rebalance_timeout_ms
    if req.server_assignor is not None:
        updated.server_assignor = req.server_assignor or None
    if req.topic_names is not None:
        updated.topic_names = tuple(sorted(set(req.topic_names)))
    if req.regex is not None:
        updated.regex = req.regex  # "" clears it
    updated.client_id, updated.client_host = req.client_id, req.client_host
    updated.classic = None
    return updated


def copy_member(member: ConsumerMember, member_id: str) -> ConsumerMember:
    """A detached copy (timers stay with the group's member); a new id starts at epoch 0."""
    copy = ConsumerMember(member_id)
    # One by one: a heartbeat makes one copy, and a loop of getattr/setattr cost twice as much.
    copy.instance_id, copy.rack_id = member.instance_id, member.rack_id
    copy.client_id, copy.client_host = member.client_id, member.client_host
    copy.topic_names, copy.regex = member.topic_names, member.regex
    copy.rebalance_timeout_ms, copy.server_assignor = (
        member.rebalance_timeout_ms,
        member.server_assignor,
    )
    copy.classic, copy.current = member.classic, member.current
    if member_id != member.member_id:
        c = member.current
        copy.current = Reconciled(0, 0, c.state, c.assigned, c.pending_revocation, c.held_epochs())
    return copy


def metadata_differs(a: ConsumerMember, b: ConsumerMember) -> bool:
    return (
        a.instance_id,
        a.rack_id,
        a.client_id,
        a.client_host,
        a.topic_names,
        a.regex,
        a.rebalance_timeout_ms,
        a.server_assignor,
        a.classic,
    ) != (
        b.instance_id,
        b.rack_id,
        b.client_id,
        b.client_host,
        b.topic_names,
        b.regex,
        b.rebalance_timeout_ms,
        b.server_assignor,
        b.classic,
    )


def removal_records(group_id: str, member_id: str) -> list[Record]:
    return [
        cr.ConsumerTombstone(cr.CURRENT_ASSIGNMENT, group_id, member_id),
        cr.ConsumerTombstone(cr.TARGET_MEMBER, group_id, member_id),
        cr.ConsumerTombstone(cr.MEMBER_METADATA, group_id, member_id),
    ]


def others_than(group: ConsumerGroup, member: ConsumerMember) -> list[ConsumerMember]:
    """The group's members but `member` (and the old self a static member replaces): the
    members of a target computation."""
    instance_id = member.instance_id
    return [
        m
        for m in group.members.values()
        if m.member_id != member.member_id and (instance_id is None or m.instance_id != instance_id)
    ]


def replaced_members(group: ConsumerGroup, member: ConsumerMember) -> list[ConsumerMember]:
    """The group's members that `member`'s records replace (those `others_than` leaves out):
    its own entry, and the old self a static member rejoining under a new id replaces; found
    by id, not by walking the group."""
    out = []
    own = group.members.get(member.member_id)
    if own is not None:
        out.append(own)
    if member.instance_id is not None:
        old_id = group.static_members.get(member.instance_id)
        old = (
            group.members.get(old_id) if old_id is not None and old_id != member.member_id else None
        )
        if old is not None:
            out.append(old)
    return out


def regex_users_after(group: ConsumerGroup, regex: str, leaving: Iterable[ConsumerMember]) -> int:
    """How many members subscribe with `regex` once the `leaving` ones no longer do."""
    return group.regex_counts.get(regex, 0) - sum(1 for m in leaving if m.regex == regex)


def preferred_assignor_after(
    group: ConsumerGroup, leaving: Iterable[ConsumerMember], joining: ConsumerMember
) -> str | None:
    """The group's preferred assignor once `joining` takes the place of the `leaving` members,
    from the group's per-assignor counts."""
    counts = Counter(group.assignor_counts)
    counts.subtract(m.server_assignor for m in leaving if m.server_assignor)
    if joining.server_assignor:
        counts[joining.server_assignor] += 1
    return preferred_of({name: n for name, n in counts.items() if n > 0})


def names_after(
    group: ConsumerGroup,
    leaving: Iterable[ConsumerMember],
    joining: Iterable[str],
    regexes: RegexesAfter,
) -> set[str]:
    """The topic names the group subscribes to once the `leaving` members' names are gone,
    the `joining` names are there, and `regexes` (its resolutions after a heartbeat's records)
    resolve as they say. From the group's per-topic counts and the change: a join or a leave
    costs the same in a big group as in a small one."""
    delta: Counter[str] = Counter()
    for member in leaving:
        delta.subtract(member.topic_names)
    delta.update(joining)
    for regex, resolution in regexes.changed.items():
        old = group.regexes.get(regex)
        if old is not None:
            delta.subtract(old.topics)
        if resolution is not None:
            delta.update(resolution.topics)
    by_name, by_regex = group.topic_name_counts, group.regex_topic_counts
    return {
        n
        for n in chain(by_name, by_regex, delta)
        if by_name.get(n, 0) + by_regex.get(n, 0) + delta.get(n, 0) > 0
    }


def regex_topics(regexes: Mapping[str, cr.RegexTopics], users: Mapping[str, int]) -> set[str]:
    """The topics the regexes that have `users` resolve to."""
    out: set[str] = set()
    for regex, resolution in regexes.items():
        if users.get(regex, 0) > 0:
            out.update(resolution.topics)
    return out


def refresh_regexes(
    group: ConsumerGroup,
    earlier: Iterable[Record],
    resolve: Callable[[str], tuple[str, ...]],
    version: int,
    now: int,
    renew_all: bool = False,
) -> tuple[bool, list[Record]]:
    """Kafka's refresh (when topics changed under an authorizer, or periodically): the group's
    regexes (as the request's `earlier` records leave them) resolved again by `resolve` (with
    the heartbeat's context). Returns whether a result changed, and a record for each changed
    result, or for every one when `renew_all` (the periodic refresh renews their timestamps,
    as Kafka's does)."""
    changed = False
    records: list[Record] = []
    for regex, resolution in regexes_after(group, earlier).items():
        topics = resolve(regex)
        if renew_all or topics != resolution.topics:
            records.append(cr.RegexTopics(group.group_id, regex, topics, version, now))
            changed |= topics != resolution.topics
    return changed, records


def regex_refresh_due(group: ConsumerGroup, now: int, interval_ms: int) -> bool:
    """Kafka's periodic refresh (group.consumer.regex.refresh.interval.ms): a resolution is that
    old (so an ACL change reaches a regex subscription without a topic change)."""
    oldest = group.oldest_regex_ms()
    return oldest is not None and now - oldest >= interval_ms


class RegexesAfter(Mapping[str, cr.RegexTopics]):
    """The group's regex resolutions once a heartbeat's records (not applied yet) are: the
    group's own, seen through what the records change (`changed`: regex -> its new resolution,
    None when tombstoned), without copying the group's."""

    __slots__ = ("base", "changed")

    def __init__(
        self, base: Mapping[str, cr.RegexTopics], changed: dict[str, cr.RegexTopics | None]
    ):
        self.base = base
        self.changed = changed

    def __getitem__(self, regex: str) -> cr.RegexTopics:
        if regex in self.changed:
            resolution = self.changed[regex]
            if resolution is None:
                raise KeyError(regex)
            return resolution
        return self.base[regex]

    def __iter__(self) -> Iterator[str]:
        changed = self.changed
        for regex in self.base:
            if regex not in changed or changed[regex] is not None:
                yield regex
        for regex, resolution in changed.items():
            if resolution is not None and regex not in self.base:
                yield regex

    def __len__(self) -> int:
        return sum(1 for _ in self)


def regexes_after(group: ConsumerGroup, records: Iterable[Record]) -> RegexesAfter:
    """The group's regex resolutions once `records` (a heartbeat's, not applied yet) are (a
    tombstone wins over a resolution of the same regex)."""
    changed: dict[str, cr.RegexTopics | None] = {}
    tombstoned: list[str] = []
    for r in records:
        if isinstance(r, cr.RegexTopics):
            changed[r.regex] = r
        elif isinstance(r, cr.ConsumerTombstone) and r.kind == cr.REGEX and r.name is not None:
            tombstoned.append(r.name)  # (a regex's tombstone always names it)
    for regex in tombstoned:
        changed[regex] = None
    return RegexesAfter(group.regexes, changed)


def update_regexes(
    group: ConsumerGroup,
    member: ConsumerMember,
    updated: ConsumerMember,
    previous: list[ConsumerMember],
    earlier: Iterable[Record],
    now: int,
    image: TopicImage,
    refresh_interval_ms: int,
    topic_filter: TopicFilter | None = None,
) -> tuple[bool, bool, Sequence[Record]]:
    """(whether the epoch must bump, whether the member's regex changed, the regex records).
    A new regex is compiled (INVALID_REGULAR_EXPRESSION) and resolved at once against the
    topics the heartbeat may describe (Kafka resolves it asynchronously, then bumps); a regex
    nobody uses once `updated` replaces the `previous` members is tombstoned. Stale (see
    on_topics_changed) or due regexes are resolved again (as the request's `earlier` records
    leave them)."""
    old, new = member.regex, updated.regex
    due = regex_refresh_due(group, now, refresh_interval_ms)
    refreshed = False
    records: Sequence[Record] = ()
    if due or group.regexes_stale and topic_filter is not None:
        refreshed, records = refresh_regexes(
            group,
            earlier,
            lambda r: resolve_regex(r, image.names(), topic_filter),
            image.version,
            now,
            renew_all=due,
        )
    if old == new:
        return refreshed, False, records
    changed: list[Record] = [*records]
    if new and new not in group.regexes:
        topics = resolve_regex(new, image.names(), topic_filter)
        changed.append(cr.RegexTopics(group.group_id, new, topics, image.version, now))
    if old and regex_users_after(group, old, previous) <= 0:
        changed.append(cr.ConsumerTombstone(cr.REGEX, group.group_id, old))
    return True, True, changed
