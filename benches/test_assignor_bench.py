"""The server-side assignors, corral against Kafka's own, on Kafka's benchmark shapes
(ServerSideAssignorBenchmark): 1,000 topics; 1,000 / 5,000 / 10,000 members x 10 or 50
partitions per member (so every topic has members x ratio / 1,000 partitions); homogeneous
(everyone subscribes to every topic) or heterogeneous (5 buckets of members, each subscribed to
its own fifth of the topics); a full assignment, or an incremental one after a member joins (the
group had members - 1, "newMember" takes the last member's subscription) or leaves (the first).

    python -m pytest benches/test_assignor_bench.py                  # all 72 rows, ~5 min
    python -m pytest benches/test_assignor_bench.py -k "1000-10-"    # a few rows

corral: `assign()` through corral.assignors (Python wrapper, Cython, the result), timed by
pytest-benchmark (median of warmed rounds). Kafka: UniformAssignor / RangeAssignor of
kafka-group-coordinator 4.4.0 through tests/clients/java/AssignorHarness.java on the same inputs, timed
inside the JVM (5 warm-up calls, median of 15). Incremental rows start, on each side, from that
side's own full assignment. corral's result is read lazily: "read all" is the extra time to
materialize every member's {topic: partitions} afterwards, not part of the ratio. The table goes
to the terminal and to .benchmarks/assignors.md; docs/benchmarks.md has a run.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "kits"))
from kafka_assignors import KafkaAssignors  # noqa: E402

from corral.assignors import GroupSpec, MemberSpec, RangeAssignor, SubscriptionType, UniformAssignor  # noqa: E402

TOPICS = 1000
BUCKETS = 5
SIZES = [(1000, 10), (1000, 50), (5000, 10), (5000, 50), (10000, 10), (10000, 50)]
KINDS = ["homogeneous", "heterogeneous"]
ASSIGNORS = {"uniform": UniformAssignor(), "range": RangeAssignor()}
SCENARIOS = ["full", "join", "leave"]
ROWS = [(a, m, r, k, s) for a in ASSIGNORS for k in KINDS for m, r in SIZES for s in SCENARIOS]
KAFKA_WARMUP, KAFKA_RUNS = 5, 15

RESULTS: dict[tuple, dict[str, float]] = {}


def topic(i: int) -> bytes:
    return i.to_bytes(16, "big")


def base_group(members: int, ratio: int, kind: str, scenario: str) -> tuple[GroupSpec, dict]:
    """The group before the timed call, as Kafka's benchmark builds it (for join: one member
    fewer, "newMember" comes next)."""
    topics = [topic(i) for i in range(TOPICS)]
    counts = dict.fromkeys(topics, members * ratio // TOPICS)
    n = members - 1 if scenario == "join" else members
    if kind == "homogeneous":
        everything = frozenset(topics)
        return GroupSpec(
            {f"member{i}": MemberSpec(everything) for i in range(n)}, SubscriptionType.HOMOGENEOUS
        ), counts
    buckets = min(BUCKETS, n)
    per_topic_bucket, per_member_bucket = -(-TOPICS // buckets), -(-n // buckets)
    subscriptions = [
        frozenset(topics[b * per_topic_bucket : (b + 1) * per_topic_bucket]) for b in range(buckets)
    ]
    return GroupSpec(
        {f"member{i}": MemberSpec(subscriptions[i // per_member_bucket]) for i in range(n)},
        SubscriptionType.HETEROGENEOUS,
    ), counts


def timed_group(assignor, group: GroupSpec, counts: dict, scenario: str) -> tuple[GroupSpec, dict]:
    """The group of the timed call (for join and leave, with the full assignment as previous)
    and that previous assignment."""
    if scenario == "full":
        return group, {}
    previous = assignor.assign(group, counts)
    members = {m: MemberSpec(s.subscribed_topic_ids, previous[m]) for m, s in group.members.items()}
    if scenario == "join":
        members["newMember"] = MemberSpec(
            group.members[list(group.members)[-1]].subscribed_topic_ids
        )
    else:
        del members["member0"]
    return GroupSpec(members, group.subscription_type), previous


@pytest.fixture(scope="module")
def kafka(request):
    with KafkaAssignors(heap="4g") as assignors:
        yield assignors
    if RESULTS:
        table = results_table()
        out = ROOT / ".benchmarks" / "assignors.md"
        out.parent.mkdir(exist_ok=True)
        out.write_text(table + "\n")
        reporter = request.config.pluginmanager.getplugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("")
            for line in table.splitlines():
                reporter.write_line(line)


def results_table() -> str:
    lines = [
        "| assignor | subscriptions | members x partitions/member | change | corral ms | Kafka ms | "
        "corral / Kafka | moved (corral / Kafka) | read all, ms |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in ROWS:
        r = RESULTS.get(row, {})
        if "corral" not in r and "kafka" not in r:
            continue
        assignor, members, ratio, kind, scenario = row
        corral, kafka_ms = r.get("corral"), r.get("kafka")
        ratio_text = f"{corral / kafka_ms:.2f}" if corral and kafka_ms else ""
        moved = (
            f"{r.get('corral_moved', '')} / {r.get('kafka_moved', '')}"
            if scenario != "full"
            else ""
        )
        lines.append(
            f"| {assignor} | {kind} | {members:,} x {ratio} | {scenario} | "
            f"{corral:.2f} | {kafka_ms:.2f} | {ratio_text} | {moved} | {r.get('read_all', 0):.1f} |"
            if corral and kafka_ms
            else f"| {assignor} | {kind} | {members:,} x {ratio} | {scenario} | "
            f"{corral or ''} | {kafka_ms or ''} | | | |"
        )
    return "\n".join(lines)


def moved(before, after) -> int:
    owners = {(t, p): m for m, a in after.items() for t, ps in a.items() for p in ps}
    return sum(
        1 for m, a in before.items() for t, ps in a.items() for p in ps if owners.get((t, p)) != m
    )


@pytest.mark.parametrize("row", ROWS, ids=["-".join(map(str, r)) for r in ROWS])
def test_corral(benchmark, kafka, row):
    assignor_name, members, ratio, kind, scenario = row
    assignor = ASSIGNORS[assignor_name]
    group, counts = base_group(members, ratio, kind, scenario)
    timed, previous = timed_group(assignor, group, counts, scenario)
    start = time.perf_counter()
    result = benchmark.pedantic(
        assignor.assign, (timed, counts), rounds=15, warmup_rounds=3, iterations=1
    )
    entry = RESULTS.setdefault(row, {})
    # With --benchmark-disable (a smoke run) the call ran once, untimed by the plugin.
    entry["corral"] = (
        time.perf_counter() - start if benchmark.disabled else benchmark.stats.stats.median
    ) * 1e3
    if scenario != "full":
        entry["corral_moved"] = moved(previous, result)
    reads = []
    for _ in range(3):
        fresh = assignor.assign(timed, counts)
        start = time.perf_counter()
        for assignment in fresh.values():
            assignment.materialized()
        reads.append(time.perf_counter() - start)
    entry["read_all"] = statistics.median(reads) * 1e3
    benchmark.extra_info.update(entry)


@pytest.mark.parametrize("row", ROWS, ids=["-".join(map(str, r)) for r in ROWS])
def test_kafka(kafka, row):
    assignor_name, members, ratio, kind, scenario = row
    group, counts = base_group(members, ratio, kind, scenario)
    median, moved_count = kafka.bench(
        assignor_name, group, counts, scenario, KAFKA_WARMUP, KAFKA_RUNS
    )
    entry = RESULTS.setdefault(row, {})
    entry["kafka"] = median
    if scenario != "full":
        entry["kafka_moved"] = moved_count
