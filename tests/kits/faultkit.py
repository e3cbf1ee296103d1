"""The fault tests' kit (docs/faults.md), for the Java and franz-go clients
(tests/clients/java/test_faults_java.py, tests/clients/go/test_faults_go.py) and the Python
ones: a corral with the fault API on (`start_broker`), its address (`faults_url`), its
`FaultsClient` (`faults_of`), the CLI (`faults_cli`), requests counted in /metrics
(`requests`), and the scenario both run with their group members (`coordinator_moves`): the
group's requests answered NOT_COORDINATOR while its members consume, commit and take in a new
member; they find the coordinator again and go on, the ownership invariant holding throughout.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from cgkit import (
    CG_FAST,
    FAST_GROUPS,
    MemberProcess,
    create_topics,
    members_of,
    produce,
    stop_processes,
    wait_consumed,
    wait_stable,
    wait_until,
)
from ownership import all_partitions, check_ownership, partitioned
from raw_groups import describe_groups_raw
from scraper import Scraper

from corral.faults.client import FaultsClient

FAULTS_AT = re.compile(r"faults on http://(\S+):(\d+)/faults")
SETTINGS = {
    **FAST_GROUPS,
    **CG_FAST,
    "corral.faults.enable": "true",
    "corral.faults.listen": "127.0.0.1:0",
    "corral.metrics.listen": "127.0.0.1:0",
}
# Classic members: sessions of 6 s, heartbeats every 300 ms (so a Heartbeat fault fires soon).
CLASSIC = {"protocol": "classic", "session_timeout_ms": 6000, "heartbeat_interval_ms": 300}


def start_broker(data_dir):
    """A corral with the fault API and /metrics on, fast group settings (for a module)."""
    from conftest import CorralProcess

    broker = CorralProcess(data_dir, SETTINGS)
    broker.start()
    return broker


def faults_url(broker) -> str:
    """The faults API of a corral started with it on (its bound port is logged at startup)."""
    match = FAULTS_AT.search(broker.log())
    assert match, "the bound faults port is logged at startup"
    return f"http://127.0.0.1:{match.group(2)}"


def faults_of(broker, **auth: str) -> FaultsClient:
    return FaultsClient(faults_url(broker), **auth)


def faults_cli(url: str, *args: str) -> tuple[int, Any, str]:
    """`corral faults VERB --url URL ARGS...`: (exit code, its JSON answer or None, stderr)."""
    done = subprocess.run(
        [sys.executable, "-m", "corral.cli", "faults", *args[:1], "--url", url, *args[1:]],
        capture_output=True,
        text=True,
        timeout=30,
    )
    out = json.loads(done.stdout) if done.stdout.strip() else None
    return done.returncode, out, done.stderr


def requests(scraper: Scraper, api: str) -> float:
    """Requests of `api` (Kafka's name) the broker received, every version."""
    return sum(
        value
        for (name, labels), value in scraper.samples().items()
        if name == "kafka_network_requests_total" and ("request", api) in labels
    )


def wait_fired(faults: FaultsClient, ids: list[int], timeout: float, what: str) -> None:
    """Until every fault of `ids` fired its whole count (and so is done)."""

    def done() -> bool:
        return all(faults.get(i)["fired"] == faults.get(i)["count"] for i in ids)

    try:
        wait_until(done, timeout, what)
    except AssertionError as e:
        raise AssertionError(f"{e}: {[faults.get(i) for i in ids]}") from None


def classic_stable(bootstrap: str, group: str, processes, partitions) -> bool:
    """A settled classic group: every partition owned once by the live members, DescribeGroups
    says Stable with exactly them, each holding (in the coordinator's view) what it reports."""
    members = members_of(processes)
    check_ownership(members)
    live = [m for m in members if m.live]
    if not partitioned(members, partitions):
        return False
    g = describe_groups_raw(bootstrap, group)
    if g["group_state"] != "Stable" or len(g["members"]) != len(live):
        return False
    by_client = {m["client_id"]: m["assigned"] for m in g["members"]}
    return all(by_client.get(m.name) == m.owned for m in live)


def wait_group_stable(bootstrap: str, group: str, protocol: str, processes, partitions) -> None:
    """Until the group is settled (classic: DescribeGroups; consumer: ConsumerGroupDescribe,
    cgkit.wait_stable), the ownership invariant checked on the way."""
    if protocol == "consumer":
        wait_stable(bootstrap, group, processes, partitions, timeout=40)
        return
    try:
        wait_until(
            lambda: classic_stable(bootstrap, group, processes, partitions),
            40,
            f"classic group {group} stable",
        )
    except AssertionError as e:
        logs = "".join(f"\n--- {p.client} log\n{p.log_tail()}" for p in processes)
        raise AssertionError(
            f"{e}\nmembers: {members_of(processes)}\n"
            f"describe: {describe_groups_raw(bootstrap, group)}{logs}"
        ) from None


# The group's own requests of each protocol, and those a member's join adds.
STEADY = {
    "classic": ("Heartbeat", "OffsetCommit"),
    "consumer": ("ConsumerGroupHeartbeat", "OffsetCommit"),
}
JOINING = {"classic": ("JoinGroup", "SyncGroup"), "consumer": ("ConsumerGroupHeartbeat",)}


def coordinator_moves(broker, client: str, protocol: str, count: int = 2) -> dict:
    """Members "a" and "b" of `client` ("java", "franz-go") in a `protocol` group consume and
    commit; then each member's steady requests (heartbeats, commits) are answered
    NOT_COORDINATOR once each, and each must look the coordinator up again (a FindCoordinator
    with its client id) and go on; then the requests of a join (JoinGroup and SyncGroup, or
    ConsumerGroupHeartbeat) are answered NOT_COORDINATOR for the next `count` matches while a
    third member, "c", joins. Every record is consumed exactly once (each member commits
    synchronously what it read before its next poll), the group settles with every partition
    owned once, and no partition is ever owned by two members at once. Returns each member's
    FindCoordinator requests ("lookups": before the steady faults, after them, at the end) and
    the errors the members reported to their application ("errors", by member)."""
    group = topic = f"moved-{client}-{protocol}"
    bootstrap = broker.bootstrap
    topics = {topic: 6}
    create_topics(bootstrap, topics)
    partitions = all_partitions(topics)
    config = CLASSIC if protocol == "classic" else {"protocol": "consumer"}
    faults = faults_of(broker)
    # A FindCoordinator counter per member (client id = member name): a fault that delays them
    # by 1 ms fires on each, and its `fired` counts them. (Not 0 ms: corral refuses
    # `"delay_ms": 0` as no action given, src/corral/faults/model.py's _action.)
    lookups = {m: faults.add(api="FindCoordinator", client_id=m, delay_ms=1) for m in "abc"}

    def looked_up() -> dict[str, int]:
        return {m: faults.get(i)["fired"] for m, i in lookups.items()}

    processes = [MemberProcess(client, bootstrap, group, ["a", "b"], topics=[topic], **config)]
    members: Callable[[], list] = lambda: members_of(processes)  # noqa: E731
    try:
        wait_group_stable(bootstrap, group, protocol, processes, partitions)
        records = produce(bootstrap, topics, 5)
        wait_consumed(members(), records)
        before = looked_up()
        ids = [
            faults.add(api=api, group=group, client_id=m, error="NOT_COORDINATOR", count=1)
            for api in STEADY[protocol]
            for m in "ab"
        ]
        records |= produce(bootstrap, topics, 5)  # consumed, then committed
        wait_fired(faults, ids, 20, f"{STEADY[protocol]} answered NOT_COORDINATOR")
        wait_consumed(members(), records)
        wait_until(
            lambda: all(looked_up()[m] > before[m] for m in "ab"),
            10,
            f"a FindCoordinator from each member after NOT_COORDINATOR: {before} {looked_up()}",
        )
        after = looked_up()
        wait_group_stable(bootstrap, group, protocol, processes, partitions)
        # A join while the coordinator "moves".
        ids = [
            faults.add(api=api, group=group, error="NOT_COORDINATOR", count=count)
            for api in JOINING[protocol]
        ]
        processes.append(MemberProcess(client, bootstrap, group, ["c"], topics=[topic], **config))
        wait_fired(faults, ids, 30, f"{JOINING[protocol]} answered NOT_COORDINATOR")
        wait_group_stable(bootstrap, group, protocol, processes, partitions)
        assert all(m.owned for m in members()), members()
        records |= produce(bootstrap, topics, 5)
        wait_consumed(members(), records)
        for p in processes:
            p.close_all()
        check_ownership(members())
        return {
            "lookups": {m: (before[m], after[m], n) for m, n in looked_up().items()},
            "errors": {m.name: m.errors for m in members() if m.errors},
        }
    finally:
        faults.clear()
        stop_processes(processes)
