"""/metrics: Prometheus exposition over plain HTTP, on `corral.metrics.listen` (off by default).

Everything is read when a scrape comes (a custom Collector), nothing is pushed on the hot path:
- requests, their latency and the errors of what the core answers: the network thread counts
  them per API key and version (rust/network/request_stats.rs; it sees every request, including the
  heartbeats and ApiVersions it answers without Python);
- the errors of what Python answers: `note_errors`, called once per response (the rule is there);
- connections and queued request bytes: published by the network thread each loop turn;
- the group coordinator: gauges from its groups, counters from groups/metrics.py;
- the log store: partitions, segments and bytes, and the flush (fsync) times.
Names follow Kafka's JMX names as the Prometheus JMX exporter renders them; docs/operations.md
has the mapping. The HTTP side is a trio task in the broker's nursery: no thread.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

import trio
from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from corral.errors import ErrorCode
from corral.faults import metrics as faults_metrics
from corral.network.apis import ApiKey
from corral.observability.durations import DURATION_BOUNDS, Durations

if TYPE_CHECKING:
    from corral.server import Server

log = logging.getLogger("corral.metrics")

# Kafka's request names (ApiKeys' names: "OffsetCommit", "ConsumerGroupHeartbeat").
API_NAMES = {int(k): "".join(part.capitalize() for part in k.name.split("_")) for k in ApiKey}
MAX_REQUEST_HEAD = 8192
REQUEST_TIMEOUT_S = 10.0


def api_name(key: int) -> str:
    return API_NAMES.get(key, str(key))


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class PythonErrors:
    """Error codes of the responses Python answers, per (API key, code).

    The rule, close to Kafka's `errorCounts()`: a response body's top-level `error_code` when it
    is not NONE; otherwise each non-NONE `error_code` of its items, one or two lists deep (groups,
    topics, partitions). Frames Python gets already encoded by the core (Fetch and Produce
    answers, OffsetCommit's) are not opened, except Heartbeat's, whose only field is the error
    code at a fixed place."""

    def __init__(self) -> None:
        self.counts: dict[tuple[int, int], int] = {}

    def note(self, api_key: int, api_version: int, body) -> None:
        if isinstance(body, dict):
            for code in _error_codes(body):
                self._add(api_key, code)
        elif api_key == ApiKey.HEARTBEAT and isinstance(body, bytes):
            # size, correlation id, [tagged fields (v4+)], [throttle time (v1+)], error code.
            at = 8 + (api_version >= 4) + 4 * (api_version >= 1)
            code = int.from_bytes(body[at : at + 2], "big", signed=True)
            if code:
                self._add(api_key, code)

    def _add(self, api_key: int, code: int) -> None:
        key = (api_key, code)
        self.counts[key] = self.counts.get(key, 0) + 1


def _error_codes(body: dict, depth: int = 0) -> Iterator[int]:
    code = body.get("error_code")
    if code:
        yield code
        return
    if depth == 2:
        return
    for value in body.values():
        if isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    yield from _error_codes(item, depth + 1)


def _histogram(name: str, doc: str, labels: list[str]) -> HistogramMetricFamily:
    return HistogramMetricFamily(name, doc, labels=labels)


def _buckets(bounds, counts) -> list[tuple[str, float]]:
    """Cumulative (le, count) pairs from per-bucket counts, +Inf last."""
    out, total = [], 0
    for bound, n in zip([*bounds, float("inf")], counts):
        total += n
        out.append(("+Inf" if bound == float("inf") else repr(bound), total))
    return out


def _add_durations(family: HistogramMetricFamily, labels: list[str], d: Durations) -> None:
    family.add_metric(labels, _buckets(DURATION_BOUNDS, d.buckets), d.sum)


class BrokerCollector:
    """Reads the server's state at scrape time."""

    def __init__(self, server: Server):
        self.server = server

    def collect(self) -> Iterator[Metric]:
        yield from self._requests()
        yield from self._groups()
        yield from self._log()
        yield from self._shares()
        yield from faults_metrics.collect(self.server.faults)

    def _requests(self) -> Iterator[Metric]:
        reactor = self.server.reactor
        if reactor is None:
            return
        requests = CounterMetricFamily(
            "kafka_network_requests",
            "Requests received (Kafka's RequestMetrics RequestsPerSec)",
            labels=["request", "version"],
        )
        latency = _histogram(
            "kafka_network_request_total_time_seconds",
            "From taking a request to queueing its answer (Kafka's RequestMetrics TotalTimeMs)",
            ["request", "version"],
        )
        errors: dict[tuple[int, int], int] = dict(self.server.errors.counts)
        bounds = reactor.latency_bounds()
        for key, version, count, buckets, total, core_errors in reactor.request_stats():
            labels = [api_name(key), str(version)]
            requests.add_metric(labels, count)
            latency.add_metric(labels, _buckets(bounds, buckets), total)
            for code, n in core_errors:
                errors[(key, code)] = errors.get((key, code), 0) + n
        errors_family = CounterMetricFamily(
            "kafka_network_errors",
            "Error codes in responses (Kafka's RequestMetrics ErrorsPerSec)",
            labels=["request", "error"],
        )
        for (key, code), n in sorted(errors.items()):
            errors_family.add_metric([api_name(key), error_name(code)], n)
        connections, queued = reactor.network_stats()
        yield requests
        yield latency
        yield errors_family
        yield GaugeMetricFamily(
            "kafka_server_socket_server_metrics_connection_count",
            "Open client connections",
            value=connections,
        )
        yield GaugeMetricFamily(
            "kafka_network_socket_server_memory_pool_used_bytes",
            "Bytes of requests held against queued.max.request.bytes (0 when it is -1)",
            value=queued,
        )

    def _groups(self) -> Iterator[Metric]:
        groups = self.server.broker.groups
        prefix = "kafka_server_group_coordinator_metrics_"
        by_protocol = {"classic": 0, "consumer": 0, "share": 0}
        by_state: dict[str, dict[str, int]] = {"classic": {}, "consumer": {}, "share": {}}
        members = {"classic": 0, "consumer": 0, "share": 0}
        for group in groups.groups.values():
            kind = group.type
            by_protocol[kind] = by_protocol.get(kind, 0) + 1
            states = by_state.setdefault(kind, {})
            states[group.state_name] = states.get(group.state_name, 0) + 1
            members[kind] = members.get(kind, 0) + len(group.members)
        family = GaugeMetricFamily(
            prefix + "group_count", "Groups per protocol", labels=["protocol"]
        )
        for kind, n in by_protocol.items():
            family.add_metric([kind], n)
        yield family
        for kind, doc in (
            ("classic", "Classic groups per state"),
            ("consumer", "Consumer (KIP-848) groups per state"),
            ("share", "Share (KIP-932) groups per state"),
        ):
            family = GaugeMetricFamily(f"{prefix}{kind}_group_count", doc, labels=["state"])
            for state, n in sorted(by_state[kind].items()):
                family.add_metric([state], n)
            yield family
        family = GaugeMetricFamily(
            "corral_group_members", "Members of groups per protocol", labels=["protocol"]
        )
        for kind, n in members.items():
            family.add_metric([kind], n)
        yield family
        yield GaugeMetricFamily(
            prefix + "offset_count",
            "Committed offsets",
            value=sum(groups.offsets.map.count(g) for g in groups.groups),
        )
        m = groups.metrics
        core = groups.writer.core_commits  # commits the network thread wrote
        core_requests, core_partitions = core.committed() if core is not None else (0, 0)
        yield CounterMetricFamily(
            "corral_offset_commit_short_path",
            "OffsetCommit requests written and answered by the network "
            "thread (rust/short_paths/commit_path.rs)",
            value=core_requests,
        )
        view = groups.consumer_heartbeat_view
        yield CounterMetricFamily(
            "corral_consumer_epoch_short_path",
            "Consumer-group members moved to their group's new target epoch "
            "by the network thread (rust/groups/consumer_epoch_moves.rs)",
            value=view.moved if view is not None else 0,
        )
        for name, doc, value in (
            (
                "offset_commit",
                "Offsets committed (Kafka's offset-commit-count)",
                m.offset_commits + core_partitions,
            ),
            (
                "offset_expiration",
                "Offsets expired (offset-expiration-count)",
                m.offset_expirations,
            ),
            (
                "offset_deletion",
                "Offsets deleted by OffsetDelete (offset-deletion-count)",
                m.offset_deletions,
            ),
            (
                "group_completed_rebalance",
                "Classic rebalances completed (group-completed-rebalance-count)",
                m.classic_rebalances,
            ),
            (
                "consumer_group_rebalance",
                "Consumer group epoch bumps (consumer-group-rebalance-count)",
                m.consumer_rebalances,
            ),
            (
                "share_group_rebalance",
                "Share group epoch bumps (share-group-rebalance-count)",
                m.share_rebalances,
            ),
        ):
            yield CounterMetricFamily(prefix + name, doc, value=value)
        family = _histogram(
            "corral_group_rebalance_duration_seconds",
            "Classic groups' join phase: PreparingRebalance to the new generation",
            [],
        )
        _add_durations(family, [], m.rebalance_seconds)
        yield family
        family = _histogram(
            "corral_group_assignor_time_seconds",
            "Computing a consumer group's target assignment",
            [],
        )
        _add_durations(family, [], m.assignor_seconds)
        yield family

    def _log(self) -> Iterator[Metric]:
        logs = self.server.broker.logs
        partitions, segments, size = logs.store.totals()
        yield GaugeMetricFamily(
            "kafka_log_partitions", "Open partitions of the log store", value=partitions
        )
        yield GaugeMetricFamily(
            "kafka_log_num_log_segments",
            "Segment files (Kafka's Log NumLogSegments, summed)",
            value=segments,
        )
        yield GaugeMetricFamily(
            "kafka_log_size_bytes", "Bytes in segment files (Kafka's Log Size, summed)", value=size
        )
        family = _histogram(
            "kafka_log_flush_time_seconds",
            "fsync passes of the log store (Kafka's LogFlushRateAndTimeMs)",
            [],
        )
        _add_durations(family, [], logs.flush_seconds)
        yield family

    def _shares(self) -> Iterator[Metric]:
        shares = self.server.broker.shares
        if shares is None:
            return
        acks = CounterMetricFamily(
            "kafka_server_share_group_metrics_record_acknowledgements",
            "Records acknowledged by share consumers (ShareGroupMetrics RecordAcknowledgementsPerSec)",
            labels=["ack_type"],
        )
        for kind, n in shares.metrics.acknowledgements.items():
            acks.add_metric([kind.capitalize()], n)
        yield acks
        yield CounterMetricFamily(
            "kafka_server_share_partition_metrics_acquisition_lock_timeout",
            "Acquired records whose lock expired (SharePartitionMetrics AcquisitionLockTimeoutPerSec)",
            value=shares.metrics.lock_timeouts,
        )
        partitions, in_flight, acquired, memory = shares.gauges()
        for name, doc, value in (
            (
                "kafka_server_share_session_cache_share_sessions_count",
                "Share sessions (ShareSessionCache ShareSessionsCount)",
                len(shares.sessions),
            ),
            (
                "kafka_server_share_session_cache_share_partitions_count",
                "Share partitions in memory (ShareSessionCache SharePartitionsCount)",
                partitions,
            ),
            (
                "kafka_server_share_partition_metrics_in_flight_message_count",
                "Records in share partitions' in-flight windows (InFlightMessageCount, summed)",
                in_flight,
            ),
            (
                "corral_share_acquired_records",
                "Records acquired and not yet acknowledged",
                acquired,
            ),
            (
                "corral_share_in_flight_bytes",
                "Bytes of share partitions' in-flight windows (rust/shares/in_flight.rs)",
                memory,
            ),
        ):
            yield GaugeMetricFamily(name, doc, value=value)


def registry(server: Server) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(BrokerCollector(server))
    ProcessCollector(registry=reg)  # process_cpu_seconds_total, resident memory, open fds
    return reg


async def serve(listeners: list[trio.SocketListener], reg: CollectorRegistry) -> None:
    """Answers GET /metrics on each connection, then closes it (HTTP/1.0 style)."""

    async def handle(stream: trio.SocketStream) -> None:
        head = b""
        with trio.move_on_after(REQUEST_TIMEOUT_S):
            while b"\r\n\r\n" not in head and len(head) < MAX_REQUEST_HEAD:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    break
                head += chunk
        method, _, rest = head.partition(b" ")
        path = rest.split(b" ", 1)[0].split(b"?", 1)[0]
        if method == b"GET" and path == b"/metrics":
            status, ctype, body = b"200 OK", CONTENT_TYPE_LATEST.encode(), generate_latest(reg)
        else:
            status, ctype, body = b"404 Not Found", b"text/plain", b"GET /metrics\n"
        try:
            await stream.send_all(
                b"HTTP/1.1 "
                + status
                + b"\r\nContent-Type: "
                + ctype
                + b"\r\nContent-Length: "
                + str(len(body)).encode()
                + b"\r\nConnection: close\r\n\r\n"
                + body
            )
        except trio.BrokenResourceError:
            pass
        finally:
            await stream.aclose()

    await trio.serve_listeners(handle, listeners)
