"""/metrics (docs/operations.md): a real corral with `corral.metrics.listen`, real traffic (exact
requests over the wire, then confluent-kafka producing and consuming in a KIP-848 group), scraped
over HTTP and read with prometheus_client's text parser; and the example Grafana dashboard only
queries metrics corral exports."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request

import pytest
from cgkit import FAST_GROUPS, wait_until
from checkout import ROOT
from confluent_kafka import Consumer, Producer
from rawwire import RawClient
from scraper import Scraper
from wire_groups import commit, heartbeat, join, sync

from corral.errors import ErrorCode
from corral.network.apis import ApiKey

PREFIX = "kafka_server_group_coordinator_metrics_"


@pytest.fixture
def broker(corral_factory):
    broker = corral_factory(**FAST_GROUPS, **{"corral.metrics.listen": "127.0.0.1:0"})
    with RawClient(broker.port) as c:
        c.call(
            ApiKey.CREATE_TOPICS,
            4,
            {
                "topics": [{"name": "t", "num_partitions": 4, "replication_factor": 1}],
                "timeout_ms": 5000,
            },
        )
    return broker


def test_requests_errors_connections_and_groups_over_the_wire(broker):
    scraper = Scraper(broker)
    before = scraper.samples()

    def delta(name: str, **labels) -> float:
        key = (name, frozenset(labels.items()))
        return scraper.samples().get(key, 0.0) - before.get(key, 0.0)

    with RawClient(broker.port) as a, RawClient(broker.port) as b:
        joined = join(a, "g")
        member, generation = joined["member_id"], joined["generation_id"]
        assert sync(a, "g", generation, member, [(member, b"A")])["error_code"] == ErrorCode.NONE
        # Steady-state heartbeats: the network thread answers them without Python.
        for _ in range(25):
            assert heartbeat(a, "g", generation, member) == ErrorCode.NONE
        # A stale generation goes to the coordinator, which answers ILLEGAL_GENERATION.
        assert heartbeat(b, "g", generation + 5, member) == ErrorCode.ILLEGAL_GENERATION
        # An unknown group: the top-level error of a dict body.
        assert heartbeat(b, "nobody", 1, "x") == ErrorCode.UNKNOWN_MEMBER_ID
        commit(a, "g", generation, member, [("t", 0, 10), ("t", 1, 11), ("t", 2, 12)])
        b.call(
            ApiKey.API_VERSIONS, 3, {"client_software_name": "m", "client_software_version": "1"}
        )

        assert delta("kafka_network_requests_total", request="Heartbeat", version="4") == 27
        assert (
            delta(
                "kafka_network_request_total_time_seconds_count", request="Heartbeat", version="4"
            )
            == 27
        )
        assert delta("kafka_network_requests_total", request="ApiVersions", version="3") == 1
        assert delta("kafka_network_requests_total", request="OffsetCommit", version="8") == 1
        assert delta("kafka_network_requests_total", request="JoinGroup", version="9") == 2
        assert (
            delta("kafka_network_errors_total", request="Heartbeat", error="ILLEGAL_GENERATION")
            == 1
        )
        assert (
            delta("kafka_network_errors_total", request="Heartbeat", error="UNKNOWN_MEMBER_ID") == 1
        )
        # KIP-394's first JoinGroup answers MEMBER_ID_REQUIRED.
        assert (
            delta("kafka_network_errors_total", request="JoinGroup", error="MEMBER_ID_REQUIRED")
            == 1
        )
        assert delta(PREFIX + "offset_commit_total") == 3
        assert delta("corral_offset_commit_short_path_total") == 1  # written by the network thread
        assert scraper.value(PREFIX + "offset_count") == 3
        assert scraper.value(PREFIX + "group_count", protocol="classic") == 1
        assert scraper.value(PREFIX + "classic_group_count", state="Stable") == 1
        assert scraper.value("corral_group_members", protocol="classic") == 1
        assert delta(PREFIX + "group_completed_rebalance_total") == 1
        assert delta("corral_group_rebalance_duration_seconds_count") == 1
        # Published by the network thread at the end of its loop turn: wait for the turn.
        wait_until(
            lambda: scraper.value("kafka_server_socket_server_metrics_connection_count") == 2,
            10,
            "2 connections",
        )
        left = a.call(
            ApiKey.LEAVE_GROUP,
            5,
            {"group_id": "g", "members": [{"member_id": member, "group_instance_id": None}]},
        )
        assert left["error_code"] == ErrorCode.NONE
        assert scraper.value(PREFIX + "classic_group_count", state="Empty") == 1
        assert scraper.value(PREFIX + "classic_group_count", state="Stable") == 0
        assert scraper.value("corral_group_members", protocol="classic") == 0
    wait_until(
        lambda: scraper.value("kafka_server_socket_server_metrics_connection_count") == 0,
        10,
        "no connections",
    )


def test_real_clients_produce_and_consume_in_a_consumer_group(broker):
    scraper = Scraper(broker)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(200):
        producer.produce("t", value=b"x" * 100, key=str(i).encode())
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "cg",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["t"])
    try:
        seen, deadline = 0, time.monotonic() + 60
        while seen < 200:
            assert time.monotonic() < deadline, f"{seen} of 200 messages consumed"
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen += 1
        consumer.commit(asynchronous=False)
        wait_until(
            lambda: scraper.value(PREFIX + "consumer_group_count", state="Stable") == 1,
            30,
            "the consumer group stable",
        )
        assert scraper.value(PREFIX + "group_count", protocol="consumer") == 1
        assert scraper.value("corral_group_members", protocol="consumer") == 1
        assert scraper.value(PREFIX + "consumer_group_rebalance_total") >= 1
        assert scraper.value("corral_group_assignor_time_seconds_count") >= 1
        assert scraper.value(PREFIX + "offset_commit_total") >= 1
        produce = sum(
            v
            for (name, labels), v in scraper.samples().items()
            if name == "kafka_network_requests_total" and ("request", "Produce") in labels
        )
        assert produce >= 1
        heartbeats = lambda: sum(  # noqa: E731
            v
            for (name, labels), v in scraper.samples().items()
            if name == "kafka_network_requests_total"
            and ("request", "ConsumerGroupHeartbeat") in labels
        )
        first = heartbeats()
        # Steady-state heartbeats keep coming (every group.consumer.heartbeat.interval.ms).
        wait_until(
            lambda: consumer.poll(0.2) is None and heartbeats() > first,
            30,
            "more heartbeats counted",
        )
        assert scraper.value("kafka_log_size_bytes") >= 200 * 100
        assert scraper.value("kafka_log_num_log_segments") >= 1
        assert scraper.value("kafka_log_flush_time_seconds_count") >= 1
    finally:
        consumer.close()


def test_the_dashboard_queries_only_exported_metrics(broker):
    families = Scraper(broker).families()
    # The names a query may use: each family's samples' names by its type (a family without
    # samples yet, such as errors before any error, is still declared).
    suffixes = {"counter": ["_total"], "gauge": [""], "histogram": ["_bucket", "_sum", "_count"]}
    exported = {
        family.name + suffix
        for family in families.values()
        for suffix in suffixes.get(family.type, [""])
    }
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(Scraper(broker).url.replace("/metrics", "/other"), timeout=10)
    assert refused.value.code == 404
    dashboard = json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    assert len(exprs) >= 10
    used = {
        name for expr in exprs for name in re.findall(r"\b(?:kafka|corral|process)_[a-z_]+", expr)
    }
    assert used, "the dashboard queries corral's metrics"
    assert used <= exported, f"not exported: {sorted(used - exported)}"


def test_share_group_metrics(broker):
    from sharekit import (
        ACCEPT,
        RELEASE,
        acquired,
        join,
        new_member_id,
        set_group_configs,
        share_fetch,
        topic_id,
    )
    from wire_data import batch, produce

    scraper = Scraper(broker)
    with RawClient(broker.port) as c:
        set_group_configs(c, "sg", **{"share.auto.offset.reset": "earliest"})
        assert produce(c, "t", 0, batch(10))["error_code"] == 0
        tid = topic_id(c, "t")
        member = new_member_id()
        join(c, "sg", member, ["t"])
        assert acquired(share_fetch(c, "sg", member, 0, {tid: [0]})) == {(tid, 0): [(0, 9, 1)]}
        samples = scraper.samples()
        assert samples[("corral_share_acquired_records", frozenset())] == 10
        assert samples[("kafka_server_share_session_cache_share_sessions_count", frozenset())] == 1
        assert samples[(PREFIX + "share_group_count", frozenset({("state", "Stable")}))] == 1
        share_fetch(c, "sg", member, 1, {}, {(tid, 0): [(0, 6, [ACCEPT]), (7, 9, [RELEASE])]})
        samples = scraper.samples()
        name = "kafka_server_share_group_metrics_record_acknowledgements_total"
        assert samples[(name, frozenset({("ack_type", "Accept")}))] == 7
        assert samples[(name, frozenset({("ack_type", "Release")}))] == 3
        assert samples[(PREFIX + "group_count", frozenset({("protocol", "share")}))] == 1
        assert samples[("corral_share_in_flight_bytes", frozenset())] > 0
