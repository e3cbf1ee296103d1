"""A broker in the test's own process on a real TCP port (`with_broker`), so that a test can count
what reaches the Python handlers, and raw-frame members of it: KIP-848 (`Member`) and classic
(`Classic`) ones, settled by hand. The kit of the network thread's short-path tests (tests/wire)."""

from __future__ import annotations

import time

import trio
from rawwire import RawClient

from corral import _core
from corral.config.settings import Settings
from corral.groups.consumer import ConsumerGroup, MemberState
from corral.network.apis import ApiKey
from corral.server import Server

CLIENT = ("client", "/127.0.0.1")  # the client id and host harness.request sends


class InProcessBroker:
    """A broker served by the trio loop of this process: its coordinator and view are the
    test's to look at (`run` executes a function on the loop, from the scenario's thread)."""

    def __init__(self, server: Server, port: int):
        self.server, self.port = server, port

    @property
    def groups(self):
        return self.server.broker.groups

    @property
    def view(self):
        return self.groups.consumer_heartbeat_view

    @staticmethod
    def run(fn, *args):
        return trio.from_thread.run_sync(fn, *args)


def with_broker(tmp_path, scenario, **settings) -> None:
    """Runs `scenario(broker)` in a worker thread while the broker serves on the main thread
    (where trio may take the shutdown signals)."""
    config = Settings(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path / "d"),
            "group.consumer.assignment.interval.ms": 0,
            **settings,
        }
    )
    config.check_bounds()
    server = Server(config)

    async def main():
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                port = await nursery.start(server.serve)
                try:
                    await trio.to_thread.run_sync(scenario, InProcessBroker(server, port))
                finally:
                    nursery.cancel_scope.cancel()

    trio.run(main)


def create_topic(client: RawClient, name: str, partitions: int) -> bytes:
    topic = {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": 1,
        "assignments": [],
        "configs": [],
    }
    response = client.call(ApiKey.CREATE_TOPICS, 7, {"topics": [topic], "timeout_ms": 5000})
    assert response["topics"][0]["error_code"] == 0, response
    return response["topics"][0]["topic_id"]


class Member:
    """One KIP-848 member over raw frames (ConsumerGroupHeartbeat v1)."""

    def __init__(self, port: int, group_id: str, member_id: str, instance_id: str | None = None):
        self.client = RawClient(port)
        self.group_id, self.member_id, self.instance_id = group_id, member_id, instance_id
        self.epoch = 0
        self.owned: list[dict] = []

    def send(self, **fields) -> dict:
        body = {
            "group_id": self.group_id,
            "member_id": self.member_id,
            "member_epoch": self.epoch,
            "instance_id": self.instance_id,
            **fields,
        }
        response = self.client.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, body)
        if response["error_code"] == 0:
            self.epoch = response["member_epoch"]
            if response["assignment"] is not None:
                self.owned = response["assignment"]["topic_partitions"]
        return response

    def join(self, topics: list[str]) -> dict:
        return self.send(
            member_epoch=0,
            rebalance_timeout_ms=30000,
            subscribed_topic_names=topics,
            topic_partitions=[],
        )

    def acknowledge(self) -> dict:
        """An incremental heartbeat reporting what it owns (a client's answer to a new
        assignment)."""
        return self.send(topic_partitions=self.owned)

    def steady(self, epoch: int | None = None) -> dict:
        """An incremental heartbeat that changes nothing."""
        return self.send(**({} if epoch is None else {"member_epoch": epoch}))

    def steady_frame(self) -> bytes:
        """The raw response frame to a steady heartbeat, without its correlation id."""
        self.client.send(
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            1,
            {
                "group_id": self.group_id,
                "member_id": self.member_id,
                "member_epoch": self.epoch,
                "instance_id": self.instance_id,
            },
        )
        return self.client.receive_frame()[4:]

    def close(self) -> None:
        self.client.close()


def poll_for(consumers: list, seconds: float) -> None:
    """Polls every (librdkafka) consumer in turn, 50 ms each, for `seconds`."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for consumer in consumers:
            consumer.poll(0.05)


def settle(broker: InProcessBroker, *members: Member, rounds: int = 6) -> None:
    for _ in range(rounds):
        for m in members:
            assert m.acknowledge()["error_code"] == 0
    group = broker.groups.groups[members[0].group_id]
    assert broker.run(lambda: group.state_name) == "Stable"


NONE, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID = 0, 22, 25


REBALANCE_IN_PROGRESS, GROUP_AUTHORIZATION_FAILED, FENCED_INSTANCE_ID = 27, 30, 82


class Classic:
    """A classic member (eager "range": it owns nothing when it rejoins) over raw frames."""

    def __init__(
        self,
        port: int,
        group_id: str,
        instance_id: str | None = None,
        session_timeout_ms: int = 10000,
    ):
        self.client = RawClient(port)
        self.group_id, self.instance_id = group_id, instance_id
        self.session_timeout_ms = session_timeout_ms
        self.member_id, self.generation = "", -1

    def join(self) -> int:
        metadata = _core.encode_consumer_subscription(3, ["t"], [], self.generation)
        body = {
            "group_id": self.group_id,
            "session_timeout_ms": self.session_timeout_ms,
            "rebalance_timeout_ms": 10000,
            "member_id": self.member_id,
            "group_instance_id": self.instance_id,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": metadata}],
            "reason": None,
        }
        answer = self.client.call(ApiKey.JOIN_GROUP, 9, body)
        if answer["error_code"] == 79:  # MEMBER_ID_REQUIRED
            self.member_id = body["member_id"] = answer["member_id"]
            answer = self.client.call(ApiKey.JOIN_GROUP, 9, body)
        if answer["error_code"] == 0:
            self.member_id, self.generation = answer["member_id"], answer["generation_id"]
        return answer["error_code"]

    def sync(self) -> int:
        return self.client.call(
            ApiKey.SYNC_GROUP,
            5,
            {
                "group_id": self.group_id,
                "generation_id": self.generation,
                "member_id": self.member_id,
                "group_instance_id": self.instance_id,
                "protocol_type": "consumer",
                "protocol_name": "range",
                "assignments": [],
            },
        )["error_code"]

    def heartbeat_body(self, **fields) -> dict:
        return {
            "group_id": self.group_id,
            "generation_id": self.generation,
            "member_id": self.member_id,
            "group_instance_id": self.instance_id,
            **fields,
        }

    def heartbeat(self, **fields) -> int:
        return self.client.call(ApiKey.HEARTBEAT, 4, self.heartbeat_body(**fields))["error_code"]

    def heartbeat_frame(self) -> bytes:
        """The raw response frame to a Heartbeat, without its correlation id."""
        self.client.send(ApiKey.HEARTBEAT, 4, self.heartbeat_body())
        return self.client.receive_frame()[4:]


def settle_mixed(broker, consumers: list[Member], classics: list[Classic]) -> ConsumerGroup:
    """Acknowledgements and heartbeats (a classic member told to rejoin rejoins and syncs) until
    the group is Stable with every classic member STABLE at the assignment epoch."""
    group = broker.groups.groups[classics[0].group_id]

    def settled() -> bool:
        return group.state_name == "Stable" and all(
            group.members[x.member_id].epoch == group.assignment_epoch == x.generation
            and group.members[x.member_id].current.state is MemberState.STABLE
            for x in classics
        )

    for _ in range(20):
        for m in consumers:
            assert m.acknowledge()["error_code"] == 0
        for x in classics:
            code = x.heartbeat()
            if code == REBALANCE_IN_PROGRESS:
                assert x.join() == 0 and x.sync() == 0
            else:
                assert code == NONE
        if broker.run(settled):
            return group
        time.sleep(0.05)
    raise AssertionError("the mixed group did not settle")
