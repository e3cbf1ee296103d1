"""Consumer groups through raw frames (tests/kits/rawwire.py): ConsumerGroupDescribe, ListGroups
and DescribeGroups as decoded (they carry epochs, group types and member types, which no admin
client shows), and `Script`: members speaking raw ConsumerGroupHeartbeat frames, for a scenario
compared frame by frame between brokers (the ownership checker of tests/kits/ownership.py
watching them)."""

from __future__ import annotations

import time

from ownership import CgMember, check_ownership


def describe_raw(bootstrap: str, group: str) -> dict:
    """ConsumerGroupDescribe v1 of one group, as decoded."""
    from rawwire import RawClient

    with RawClient(int(bootstrap.rsplit(":", 1)[1])) as c:
        return c.call(69, 1, {"group_ids": [group], "include_authorized_operations": False})[
            "groups"
        ][0]


def list_groups_raw(bootstrap: str) -> dict[str, dict]:
    """ListGroups v5 (no filter): {group id: its entry (protocol_type, group_state, group_type)};
    retried while the coordinator loads (Kafka, until __consumer_offsets is ready)."""
    from rawwire import RawClient

    deadline = time.monotonic() + 30
    with RawClient(int(bootstrap.rsplit(":", 1)[1])) as c:
        while True:
            answer = c.call(16, 5, {"states_filter": [], "types_filter": []})
            if answer["error_code"] not in Script.TRANSIENT or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert answer["error_code"] == 0, answer
    return {g["group_id"]: g for g in answer["groups"]}


def describe_groups_raw(bootstrap: str, group: str) -> dict:
    """DescribeGroups v5 (the classic API) of one group, as decoded; each member's
    member_assignment also decoded as "assigned", {(topic, partition)} (None if the bytes are
    not a consumer protocol assignment)."""
    from rawwire import RawClient

    from corral import _core

    with RawClient(int(bootstrap.rsplit(":", 1)[1])) as c:
        g = c.call(15, 5, {"groups": [group], "include_authorized_operations": False})["groups"][0]
    for m in g["members"]:
        try:
            m["assigned"] = frozenset(
                (t, p)
                for t, ps in _core.decode_consumer_assignment(m["member_assignment"])[0]
                for p in ps
            )
        except ValueError:
            m["assigned"] = None
    return g


def describe(bootstrap: str, group: str) -> dict:
    """ConsumerGroupDescribe v1 of one group: Kafka's fields (group_state, group_epoch,
    assignment_epoch, members with member_epoch, assignment and target_assignment), with
    assignments as {(topic name, partition)}."""
    g = describe_raw(bootstrap, group)
    for m in g["members"]:
        for key in ("assignment", "target_assignment"):
            m[key] = frozenset(
                (t["topic_name"], p) for t in m[key]["topic_partitions"] for p in t["partitions"]
            )
    return g


class Script:
    """Scripted members speaking raw ConsumerGroupHeartbeat v1 to one broker. Every response is
    logged as (step, member, error, member id, epoch, heartbeat interval, assignment by topic
    name); `snapshot` logs ConsumerGroupDescribe. A member owns what its last assignment said
    and acknowledges revocations at its next heartbeat; the ownership checker watches them."""

    TRANSIENT = {
        14,
        15,
        16,
    }  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR

    def __init__(self, bootstrap: str, group: str):
        from rawwire import RawClient

        self.bootstrap, self.group = bootstrap, group
        self.client = RawClient(int(bootstrap.rsplit(":", 1)[1]))
        self.log: list = []
        self.epoch: dict[str, int] = {}
        self.owned: dict[str, dict[str, list[int]]] = {}
        self.views: dict[str, CgMember] = {}
        self._view = lambda name: self.views.setdefault(name, CgMember(name, "raw", None))
        self.names: dict[bytes, str] = {}
        self.ids: dict[str, bytes] = {}
        deadline = time.monotonic() + 60
        while True:  # Kafka creates __consumer_offsets on the first FindCoordinator
            answer = self.client.call(
                10, 4, {"key_type": 0, "coordinator_keys": [group], "key": ""}
            )
            if answer["coordinators"][0]["error_code"] == 0:
                break
            assert time.monotonic() < deadline, answer
            time.sleep(0.2)

    def refresh_topics(self) -> None:
        answer = self.client.call(
            3,
            12,
            {
                "topics": None,
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        self.names = {t["topic_id"]: t["name"] for t in answer["topics"]}
        self.ids = {name: tid for tid, name in self.names.items()}

    def wait_assignable(self, topics: dict[str, int]) -> None:
        """Waits until the coordinator assigns every partition of `topics` (Kafka's coordinator
        sees a new topic a moment after its broker does): a probe member of another group joins
        and leaves until it is given them all."""
        deadline = time.monotonic() + 30
        base = {
            "group_id": f"{self.group}-probe",
            "member_id": "probe",
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout_ms": 30000,
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": [],
        }
        while True:
            self.refresh_topics()
            if all(t in self.ids for t in topics):
                answer = self.client.call(
                    68, 1, {**base, "member_epoch": 0, "subscribed_topic_names": sorted(topics)}
                )
                self.client.call(
                    68,
                    1,
                    {
                        **base,
                        "member_epoch": -1,
                        "rebalance_timeout_ms": -1,
                        "subscribed_topic_names": None,
                        "topic_partitions": None,
                    },
                )
                if (
                    answer["error_code"] == 0
                    and answer["assignment"] is not None
                    and self._by_name(answer["assignment"])
                    == {t: list(range(n)) for t, n in topics.items()}
                ):
                    return
            assert time.monotonic() < deadline, f"{topics} never assignable"
            time.sleep(0.1)

    def _by_name(self, assignment) -> dict[str, list[int]]:
        return {
            self.names[t["topic_id"]]: sorted(t["partitions"])
            for t in assignment["topic_partitions"]
            if t["partitions"]
        }

    def heartbeat(
        self,
        step: str,
        name: str,
        member_id: str | None = None,
        *,
        epoch: int | None = None,
        group: str | None = None,
        owned: dict | None = None,
        track: bool | None = None,
        **fields,
    ) -> dict:
        """One heartbeat of member `name` (its id unless `member_id`); by default at its epoch,
        reporting what it owns. `track`: take the answer as the member's new state (default:
        when at its own epoch)."""
        body = {
            "group_id": group or self.group,
            "member_id": name if member_id is None else member_id,
            "member_epoch": self.epoch.get(name, 0) if epoch is None else epoch,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout_ms": -1,
            "subscribed_topic_names": None,
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": None,
        }
        mine = self.owned.get(name, {}) if owned is None else owned
        body["topic_partitions"] = [
            {"topic_id": self.ids[t], "partitions": ps} for t, ps in sorted(mine.items())
        ]
        body.update(fields)
        deadline = time.monotonic() + 30
        while True:
            answer = self.client.call(68, 1, body)
            if answer["error_code"] not in self.TRANSIENT:
                break
            assert time.monotonic() < deadline, answer
            time.sleep(0.2)
        assignment = None if answer["assignment"] is None else self._by_name(answer["assignment"])
        self.log.append(
            (
                step,
                name,
                answer["error_code"],
                answer["member_id"],
                answer["member_epoch"],
                answer["heartbeat_interval_ms"],
                assignment,
            )
        )
        if track is None:
            track = epoch is None and member_id is None and group is None
        if track and answer["error_code"] == 0:
            self.epoch[name] = answer["member_epoch"]
            if assignment is not None or answer["member_epoch"] < 0:
                self.owned[name] = assignment or {}
                view = self._view(name)
                view.owned = frozenset((t, p) for t, ps in self.owned[name].items() for p in ps)
                view.timeline.append((time.monotonic_ns(), view.owned))
        return answer

    def join(self, step: str, name: str, member_id: str | None = None, **fields) -> dict:
        fields = {"rebalance_timeout_ms": 30000, "subscribed_topic_names": [], **fields}
        answer = self.heartbeat(step, name, member_id, epoch=0, owned={}, track=True, **fields)
        if answer["error_code"]:
            self.epoch.pop(name, None)
        return answer

    def beat(self, step: str, *names: str, rounds: int = 1) -> None:
        for _ in range(rounds):
            for name in names:
                self.heartbeat(step, name)

    def leave(self, step: str, name: str, epoch: int = -1, **fields) -> None:
        self.heartbeat(step, name, epoch=epoch, track=True, **fields)
        view = self._view(name)
        if epoch == -1:
            self.owned[name] = {}
            view.owned = frozenset()
            view.timeline.append((time.monotonic_ns(), view.owned))

    def snapshot(self, step: str, group: str | None = None) -> dict:
        check_ownership(self.views.values())
        g = describe(self.bootstrap, group or self.group)
        members = sorted(
            (
                m["member_id"],
                m["instance_id"],
                m["member_epoch"],
                m["client_id"],
                m["client_host"],
                tuple(m["subscribed_topic_names"]),
                m["subscribed_topic_regex"],
                sorted(m["assignment"]),
                sorted(m["target_assignment"]),
                m["member_type"],
            )
            for m in g["members"]
        )
        self.log.append(
            (
                step,
                "describe",
                g["error_code"],
                g["group_state"],
                g["group_epoch"],
                g["assignment_epoch"],
                g["assignor_name"],
                members,
            )
        )
        return g
