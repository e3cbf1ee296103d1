"""`corral load` itself, against real brokers: against Apache Kafka (the reference broker from
benches/kafka_ref.py) and against corral its runs (join storms, heartbeat ramps, commits read back,
churn, a failover after kill -9) end with zero violations. Against fake brokers:
tests/wire/test_load_fake_brokers.py."""

from __future__ import annotations

import sys
import threading

import pytest
import trio
from conftest import CorralProcess
from kafka_ref import kafka_broker
from loadkit import run_scenario

from corral.load.probe import LoadError

# No initial rebalance delay: the tests measure the generator, not Kafka's 3 s wait. KIP-848
# members heartbeat every 500 ms rather than 5 s: a consumer group converges, and is seen to,
# within a few of the broker's heartbeat intervals.
GROUP_SETTINGS = {
    "group.initial.rebalance.delay.ms": 0,
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.min.heartbeat.interval.ms": 500,
}


@pytest.fixture(scope="module")
def kafka():
    with kafka_broker(settings=GROUP_SETTINGS) as bootstrap:
        yield bootstrap


@pytest.fixture(scope="module")
def corral_broker(tmp_path_factory):
    broker = CorralProcess(
        tmp_path_factory.mktemp("load") / "corral", {k: str(v) for k, v in GROUP_SETTINGS.items()}
    ).start()
    yield broker.bootstrap
    broker.proc.kill()
    broker.proc.wait()


@pytest.fixture(params=["kafka", "corral_broker"])
def broker(request):
    """The same runs against the reference broker and against corral."""
    return request.getfixturevalue(request.param)


@pytest.mark.kafka
def test_join_storm_of_50_members(broker):
    result = run_scenario(broker, "join-storm", "--members", "50", "--duration", "60")
    assert result["failures"] == []
    assert result["metrics"]["stable"] is True
    assert 0 < result["metrics"]["join_seconds"] < 60
    assert result["violations"] == 0, result["violation_examples"]
    assert result["latency_ms"]["SYNC_GROUP"]["count"] >= 50
    assert result["broker"]["versions_used"]["JOIN_GROUP"] >= 4  # KIP-394 two-step join
    # Its first step is the protocol's normal answer: counted, not an error.
    assert result["counts"]["JOIN_GROUP:MEMBER_ID_REQUIRED"] == 50
    # With no initial rebalance delay the coordinator closes the first generation as soon as no
    # member arrived since it last looked: a generator slowed by a busy machine spreads its joins
    # and a late member starts another generation. Members of the older one are told by
    # REBALANCE_IN_PROGRESS (SyncGroup or Heartbeat), counted too, and only then.
    rejoins = sum(n for k, n in result["counts"].items() if k.endswith(":REBALANCE_IN_PROGRESS"))
    assert (rejoins > 0) == (result["metrics"]["generations_seen"] > 1), result["counts"]
    assert result["errors"] == {}
    group = result["parameters"]["group"]
    assert result["parameters"]["topic"] == group  # corral-load-<id>, not corral-load-corral-load-
    assert result["cleanup"] == {
        "deleted_groups": [group],
        "deleted_topics": [group],
        "not_deleted": {},
    }


@pytest.mark.kafka
def test_consumer_join_storm_of_50_members(broker):
    """KIP-848 members: every member at one epoch, the partitions owned once between them, and
    never a partition owned by two members on the way."""
    result = run_scenario(
        broker, "join-storm", "--group-protocol", "consumer", "--members", "50", "--duration", "60"
    )
    assert result["failures"] == []
    assert result["violations"] == 0, result["violation_examples"]
    metrics = result["metrics"]
    assert metrics["stable"] is True and metrics["group_protocol"] == "consumer"
    assert 0 < metrics["join_seconds"] < 30
    assert metrics["stable_generation"] >= 2
    assert result["broker"]["versions_used"]["CONSUMER_GROUP_HEARTBEAT"] == 1
    assert set(result["latency_ms"]) == {"CONSUMER_GROUP_HEARTBEAT"}
    assert result["latency_ms"]["CONSUMER_GROUP_HEARTBEAT"]["count"] >= 100
    assert result["errors"] == {}
    group = result["parameters"]["group"]
    assert result["cleanup"] == {
        "deleted_groups": [group, f"{group}-probe"],
        "deleted_topics": [group],
        "not_deleted": {},
    }


@pytest.mark.kafka
def test_consumer_commits_with_member_epochs(broker):
    result = run_scenario(
        broker,
        "commit",
        "--group-protocol",
        "consumer",
        "--members",
        "10",
        "--partitions-per-member",
        "3",
        "--duration",
        "6",
        "--step-seconds",
        "2",
        "--start-rate",
        "50",
        "--verify-every",
        "2",
        "--settle-seconds",
        "1",
    )
    assert result["failures"] == []
    assert result["violations"] == 0, result["violation_examples"]
    assert result["broker"]["versions_used"]["OFFSET_COMMIT"] == 9
    assert result["latency_ms"]["OFFSET_FETCH"]["count"] > 0
    assert result["counts"]["offsets_committed"] > 0


def test_skip_join_without_classic_members_is_refused():
    with pytest.raises(LoadError, match="--skip-join heartbeats classic Heartbeat frames"):
        run_scenario("127.0.0.1:1", "heartbeat", "--group-protocol", "consumer", "--skip-join")


@pytest.mark.kafka
def test_heartbeat_ramp(broker):
    # What is checked is that the scenario runs and checks every answer on both brokers, not a
    # limit: a bound far above these rates' latency, so that one JIT or GC stall of a freshly
    # started Kafka (a first step's p99 of 72-112 ms was seen) cannot make its only step "saturated".
    result = run_scenario(
        broker,
        "heartbeat",
        "--members",
        "30",
        "--duration",
        "6",
        "--step-seconds",
        "2",
        "--start-rate",
        "60",
        "--ramp-factor",
        "2",
        "--heartbeat-interval-ms",
        "500",
        "--settle-seconds",
        "1",
        "--p99-bound-ms",
        "2000",
    )
    assert result["failures"] == []
    assert result["violations"] == 0, result["violation_examples"]
    steps = result["metrics"]["steps"]
    assert steps and steps[0]["achieved"] > 0
    assert result["metrics"]["sustained_per_s"] > 0
    assert result["latency_ms"]["HEARTBEAT"]["count"] > 100
    assert result["generator"]["cpu_seconds"] > 0


@pytest.mark.kafka
def test_consumer_heartbeat_ramp(broker):
    """KIP-848 members ramp their incremental ConsumerGroupHeartbeat from the broker's interval
    (500 ms: 60/s for 30 members) once the group is stable, every answer checked. A KIP-848
    group is seen stable only after a quiet heartbeat round: a longer run than the classic one."""
    result = run_scenario(
        broker,
        "heartbeat",
        "--group-protocol",
        "consumer",
        "--members",
        "30",
        "--duration",
        "10",
        "--step-seconds",
        "2",
        "--ramp-factor",
        "2",
        "--settle-seconds",
        "1",
        "--p99-bound-ms",
        "2000",
    )
    assert result["failures"] == []
    assert result["violations"] == 0, result["violation_examples"]
    metrics = result["metrics"]
    assert metrics["heartbeat_interval_ms"] == 500
    steps = metrics["steps"]
    assert steps and steps[0]["target"] == 60 and steps[0]["achieved"] > 0, steps
    assert metrics["sustained_per_s"] > 0
    assert set(result["latency_ms"]) == {"CONSUMER_GROUP_HEARTBEAT"}
    assert result["latency_ms"]["CONSUMER_GROUP_HEARTBEAT"]["count"] > 200
    assert result["errors"] == {}


@pytest.mark.kafka
def test_commit_offsets_read_back(broker):
    result = run_scenario(
        broker,
        "commit",
        "--members",
        "10",
        "--partitions-per-member",
        "3",
        "--duration",
        "6",
        "--step-seconds",
        "2",
        "--start-rate",
        "50",
        "--verify-every",
        "2",
        "--heartbeat-interval-ms",
        "500",
        "--settle-seconds",
        "1",
    )
    assert result["failures"] == []
    assert result["violations"] == 0, result["violation_examples"]
    assert result["latency_ms"]["OFFSET_FETCH"]["count"] > 0
    assert result["counts"]["offsets_committed"] > 0


@pytest.mark.kafka
def test_churn_rebalances_without_violations(broker):
    # Members leave only while the group is stable (about half the time here), in what is left
    # of --duration once it first was: 2 a second over ~7 s makes a run without one leave a
    # ~1e-6 event, where 1 a second over a slow start's ~3 s made it one in ~20.
    result = run_scenario(
        broker,
        "churn",
        "--members",
        "12",
        "--churn-rate",
        "2",
        "--rejoin-delay",
        "0.5",
        "--duration",
        "8",
        "--heartbeat-interval-ms",
        "500",
    )
    assert result["failures"] == []
    assert result["violations"] == 0, result["violation_examples"]
    metrics = result["metrics"]
    assert 0 < metrics["churn_seconds"] <= 8
    assert metrics["left_and_rejoined"] > 0
    assert metrics["rebalances_completed"] > 0


@pytest.mark.kafka
def test_consumer_churn_without_violations(broker):
    """KIP-848 members leave (epoch -1) and rejoin (epoch 0, same id): no partition ever owned by
    two members, epochs at which the members in the group met with every partition owned."""
    result = run_scenario(
        broker,
        "churn",
        "--group-protocol",
        "consumer",
        "--members",
        "12",
        "--churn-rate",
        "1",
        "--rejoin-delay",
        "0.5",
        "--duration",
        "9",
    )
    assert result["failures"] == []
    assert result["violations"] == 0, result["violation_examples"]
    metrics = result["metrics"]
    assert {
        "members",
        "rebalances_completed",
        "generations_seen",
        "time_in_rebalance_share",
        "left_and_rejoined",
    } <= set(metrics)  # the classic run's figures
    assert metrics["left_and_rejoined"] > 0
    assert 0 < metrics["rebalances_completed"] <= metrics["generations_seen"]
    assert 0 <= metrics["time_in_rebalance_share"] <= 1
    assert result["errors"] == {}


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_failover_after_kill_9_loses_no_acknowledged_commit(tmp_path, protocol):
    """The broker is killed (-9) mid-run and started again on its data dir: every member is
    answered again, and no offset a member saw acknowledged reads back lower (a violation).
    KIP-848 members keep their partitions meanwhile and are taken back at their epochs; the run
    ends with the group stable again, every partition owned once."""
    broker = CorralProcess(
        tmp_path / "corral", {k: str(v) for k, v in GROUP_SETTINGS.items()}
    ).start()
    restarted = threading.Event()

    def start_again_once_killed() -> None:
        broker.proc.wait()
        broker.log_path.rename(broker.log_path.with_suffix(".killed.log"))
        broker.start()
        restarted.set()

    watcher = threading.Thread(target=start_again_once_killed, daemon=True)
    watcher.start()
    wait_port = tmp_path / "wait_port.py"
    wait_port.write_text(
        "import socket, sys, time\n"
        "while True:\n"
        "    try:\n"
        f"        socket.create_connection(('127.0.0.1', {broker.port}), 1).close(); break\n"
        "    except OSError:\n"
        "        time.sleep(0.05)\n"
    )
    restart_cmd = f"kill -9 {broker.proc.pid}; sleep 0.2; {sys.executable} {wait_port}"
    try:
        result = run_scenario(
            broker.bootstrap,
            "failover",
            "--members",
            "10",
            "--restart-at",
            "2",
            "--commit-interval",
            "0.5",
            "--duration",
            "60",
            "--heartbeat-interval-ms",
            "500",
            "--restart-cmd",
            restart_cmd,
            "--group-protocol",
            protocol,
        )
        assert restarted.is_set()
        assert result["failures"] == []
        assert result["violations"] == 0, result["violation_examples"]
        metrics = result["metrics"]
        assert metrics["restart_exit_code"] == 0
        assert metrics["stable_again_seconds"] is not None
        assert metrics["stable_generation"] is not None and "timed_out" not in metrics
        assert result["latency_ms"]["OFFSET_FETCH"]["count"] >= 10  # every member read back
        # The members lost their connections (and may have found the coordinator loading), but
        # the restarted coordinator knew every one of them: none was fenced.
        fenced = {"FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION"}
        assert not fenced & {k.split(":")[1] for k in result["errors"]}, result["errors"]
    finally:
        watcher.join(30)
        broker.proc.kill()
        broker.proc.wait()


def test_consumer_member_fenced_drops_everything_and_rejoins(corral_broker):
    """FENCED_MEMBER_EPOCH: the member gives every partition up (reported to the run), rejoins at
    epoch 0 under the same id and is assigned again; leaving is epoch -1."""
    from corral.load.checks import Violations
    from corral.load.consumer_member import ConsumerMember
    from corral.load.member import Events, MemberConfig
    from corral.load.probe import probe
    from corral.load.stats import Recorder
    from corral.network.apis import ApiKey

    async def main():
        info = await probe(
            corral_broker, {ApiKey.CONSUMER_GROUP_HEARTBEAT}, "fenced", "fenced-t", 2, False, True
        )
        config = MemberConfig(
            group="fenced",
            host=info.coordinator[0],
            port=info.coordinator[1],
            versions=info.versions,
            topics=["fenced-t"],
            partitions=info.partitions,
            topic_ids=info.topic_ids,
        )
        recorder, events = Recorder(), Events()
        member = ConsumerMember(config, recorder, Violations(), events)
        member_id = member.member_id
        await member.join()
        assert member.assignment == {"fenced-t": [0, 1]} and member.generation > 0
        assert member.next_heartbeat_in(3.0) == 0  # the new partitions are acknowledged at once
        assert await member.heartbeat()
        member.generation += 5  # an epoch the coordinator never gave
        assert await member.heartbeat() is False
        assert member.assignment == {} and not member.stable
        assert recorder.errors["CONSUMER_GROUP_HEARTBEAT:FENCED_MEMBER_EPOCH"] == 1
        await member.join()
        assert member.member_id == member_id and member.assignment == {"fenced-t": [0, 1]}
        await member.leave()
        epochs = [e[2] for e in events.drain() if e[0] == "owned"]
        assert epochs[0] > 0 and epochs[1:] == [-1, epochs[0], -1]

    trio.run(main)
