"""ACLs for the security tests: the bindings and CreateAcls bodies of the wire tests, and a real
Broker in process answering requests that carry a principal (`with_broker`, `call`, `secured`;
`commit_body` and `codes`: an OffsetCommit of a group and the error codes of an answer)."""

from __future__ import annotations

import inspect

import trio

from corral import _core
from corral.broker import Broker
from corral.config.settings import Settings
from corral.later import Later
from corral.network.apis import HANDLERS, ApiKey, api_table
from corral.security.acls import AclBinding, AclPermission, PatternType, ResourceType

EVERYTHING = {
    "resource_type_filter": 1,
    "resource_name_filter": None,
    "pattern_type_filter": 1,
    "principal_filter": None,
    "host_filter": None,
    "operation": 1,
    "permission_type": 1,
}


def creation(name: str, principal: str = "User:alice", pattern: int = 3, op: int = 3) -> dict:
    return {
        "resource_type": 2,
        "resource_name": name,
        "resource_pattern_type": pattern,
        "principal": principal,
        "host": "*",
        "operation": op,
        "permission_type": 3,
    }


STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


ADMIN, ALICE, BOB = "User:admin", "User:alice", "User:bob"


TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER


TABLE = api_table()


def acl(
    rtype, name, op, principal=ALICE, perm=AclPermission.ALLOW, pattern=PatternType.LITERAL
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


class Network:
    """The network thread as the sessions see it: what Python told it."""

    def __init__(self) -> None:
        self.authorized: list[tuple[int, str]] = []
        self.authorized_topics: list[tuple[int, list[str]]] = []
        self.forgotten = 0

    def authorize_group(self, connection: int, group_id: str) -> None:
        self.authorized.append((connection, group_id))

    def authorize_topics(self, connection: int, topics: list[str]) -> None:
        self.authorized_topics.append((connection, topics))

    def forget_authorizations(self) -> None:
        self.forgotten += 1


async def call(broker, principal: str, key: ApiKey, version: int, body: dict) -> dict:
    """One request from `principal`, answered by its handler: the response body as encoded and
    decoded by the codec."""
    connection = _core.Connection(TABLE, 1 << 20, principal=principal)
    connection.feed(_core.encode_request(key, version, 1, body, "test"))
    request = connection.next()
    answer = HANDLERS[key](broker, request)
    if inspect.isawaitable(answer):
        answer = await answer
    if isinstance(answer, Later):
        while not answer.resolved:
            await trio.sleep(0.005)
        answer = answer.value
    frame = answer if isinstance(answer, bytes) else request.respond(answer)
    return _core.decode_response(key, version, frame[4:])[1]


def with_broker(tmp_path, scenario, acls=(), **settings) -> None:
    """Runs `await scenario(broker)` with a broker whose authorizer holds `acls`."""
    config = Settings(
        {"log.dirs": str(tmp_path / "d"), "group.initial.rebalance.delay.ms": 0, **settings}
    )

    async def main():
        broker = Broker(config)
        broker.sessions.attach(Network())
        async with trio.open_nursery() as nursery:
            for run in (broker.groups.run, broker.logs.run, broker.topics.run):
                nursery.start_soon(run)
            for name in ("orders", "payments"):
                await broker.topics.create(name, 2)
            if broker.authorizer is not None:
                await broker.authorizer.create(list(acls))
            with trio.fail_after(30):
                await scenario(broker)
            nursery.cancel_scope.cancel()

    trio.run(main)


def secured(tmp_path, scenario, acls=(), **settings) -> None:
    with_broker(
        tmp_path,
        scenario,
        acls,
        **{"authorizer.class.name": STANDARD, "super.users": ADMIN, **settings},
    )


def commit_body(group: str, topics: list[str]) -> dict:
    return {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [
            {
                "name": t,
                "partitions": [
                    {"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}
                ],
            }
            for t in topics
        ],
    }


def codes(response: dict) -> dict[str, list[int]]:
    return {t["name"]: [p["error_code"] for p in t["partitions"]] for t in response["topics"]}
