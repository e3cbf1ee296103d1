"""A generated history for `corral analyze`'s benchmark, in corral's own on-disk format.

    python benches/analyze_history.py --commits 50000000 --out /tmp/history [--parquet DIR]

writes a corral data directory (topics.json, the log store's segments) that `corral serve
--data-dir` loads: `__consumer_offsets` with exactly N offset-commit records (the core's encoder,
`_core.offset_commit_batch`, one RecordBatch per OffsetCommit as the coordinator writes them, each
group in its partition as Kafka places it) and `__corral_analytics` with a `log_end` sample every
5 s of every partition whose log end moved (analytics_log.encode, docs/analytics.md). Appended
through corral's own PartitionLogs / LogStore, so the layout is the broker's by construction. The
data topics themselves are not created: their log ends live in the samples only.

`--parquet DIR` also writes the same rows as the analysis inputs (DIR/commits, DIR/samples,
DIR/events, corral.analyze.inputs' schemas, `read_landed`), `seq` being each record's offset.

The groups (thousands at 50 M commits), each on one topic of 8 partitions, commit all their
partitions every 1, 2, 5 or 10 s over a span set by N. Topics produce at steady rates, some with
quiet stretches. Groups are steady (caught up), lagging (consume at 70% of the produce rate),
stalled (the committed offset freezes midway), rewinding (jump back now and then) or stopped
(stop committing midway).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from corral import _core
from corral.config.settings import Settings
from corral.groups import OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIGS
from corral.groups.storage.placement import partition_for
from corral.observability.analytics_topic import LOG_END, VERSION
from corral.observability.analytics_topic import TOPIC as ANALYTICS_TOPIC
from corral.partitions.store import PartitionLogs
from corral.topics.registry import TopicStore

PARTITIONS = 8
SAMPLE_MS = 5000
INTERVALS_MS = np.array([1000, 2000, 5000, 10000])
KINDS = ("steady", "lagging", "stalled", "rewinding", "stopped")
KIND_SHARES = (0.6, 0.15, 0.08, 0.07, 0.1)
APPEND_BYTES = 8 << 20


def _plan(commits: int, groups: int, rng: np.random.Generator):
    topics = max(1, groups // 10)
    topic_of = rng.integers(0, topics, groups)
    interval = rng.choice(INTERVALS_MS, groups)
    kind = rng.choice(len(KINDS), groups, p=KIND_SHARES)
    # Batches per group ~ span / interval, with span set so that the total reaches N.
    span = int(np.ceil(commits / PARTITIONS / (1 / interval).sum()))
    batches = np.maximum(1, span // interval + 1)
    records = batches * PARTITIONS
    # Trim the excess from the groups' last batches, round robin.
    excess = int(records.sum()) - commits
    while excess > 0:
        for g in range(groups):
            take = min(excess, PARTITIONS, int(records[g]) - 1)
            records[g] -= take
            excess -= take
            if not excess:
                break
    return topics, topic_of, interval, kind, span, records


def _log_ends(topics: int, span: int, rng: np.random.Generator) -> np.ndarray:
    """[topic, partition, tick]: each partition's log end at every sample tick."""
    ticks = span // SAMPLE_MS + 3
    rate = rng.lognormal(4.5, 1.2, (topics, PARTITIONS, 1))  # records/s
    produced = rng.poisson(rate * SAMPLE_MS / 1000, (topics, PARTITIONS, ticks))
    # A third of the topics go quiet for stretches (a minute to half an hour).
    quiet = rng.random(topics) < 0.33
    for t in np.flatnonzero(quiet):
        for _ in range(rng.integers(1, 6)):
            start = rng.integers(0, ticks)
            produced[t, :, start : start + rng.integers(12, 360)] = 0
    return np.cumsum(produced, axis=2)


def _offsets(kind: str, ends: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Committed offsets at commits whose log ends are `ends` [batch, partition]."""
    n = len(ends)
    behind = rng.integers(0, 50, ends.shape)
    steady = np.maximum.accumulate(np.maximum(ends - behind, 0), axis=0)
    if kind == "steady" or n < 2:
        return steady
    if kind == "lagging":
        return (ends[0] + (ends - ends[0]) * 0.7).astype(np.int64)
    if kind == "stalled":
        frozen = steady.copy()
        frozen[n // 2 :] = frozen[n // 2]
        return frozen
    if kind == "rewinding":
        back = np.zeros(ends.shape, np.int64)
        for at in rng.integers(1, n, max(1, n // 200)):
            back[at : at + rng.integers(5, 60)] += rng.integers(100, 5000)
        return np.maximum(steady - back, 0)
    return steady  # stopped: fewer batches (see _commit_times)


def _group_commits(g: int, plan, ends: np.ndarray, start_ms: int, rng: np.random.Generator):
    """One group's batches: times [batch] and offsets [batch, partition], and its record count."""
    topics, topic_of, interval, kind, span, records = plan
    n = -(-int(records[g]) // PARTITIONS)
    # A stopped group commits as many times, more often, over the first half of the span only.
    active = span // 2 if KINDS[kind[g]] == "stopped" else span
    times = np.arange(n) * (active // n if n > 1 else 0) + rng.integers(0, 1000)
    times = np.minimum(times + rng.integers(0, 200, n), span)
    times.sort()
    ends_at = ends[topic_of[g]][:, np.minimum(times // SAMPLE_MS, ends.shape[2] - 1)].T
    return start_ms + times, _offsets(KINDS[kind[g]], ends_at, rng), int(records[g])


def generate(
    out: str | Path,
    commits: int,
    groups: int | None = None,
    seed: int = 1,
    parquet: str | Path | None = None,
    end_ms: int | None = None,
) -> dict:
    """Writes the history; returns counts and timings. The span ends at `end_ms` (default now,
    so that a broker started on it soon after keeps it all: __consumer_offsets keeps a week)."""
    started = time.monotonic()
    rng = np.random.default_rng(seed)
    groups = groups or int(min(5000, max(4, commits // 10_000)))
    plan = _plan(commits, groups, rng)
    topics, topic_of, interval, kind, span, records = plan
    ends = _log_ends(topics, span, rng)
    start_ms = (end_ms or int(time.time() * 1000)) - span - SAMPLE_MS
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    settings = Settings({"log.dirs": str(out)})
    store = TopicStore(out, settings)
    offsets_topic = store.create_at_startup(
        OFFSETS_TOPIC,
        settings["offsets.topic.num.partitions"],
        OFFSETS_TOPIC_CONFIGS,
        internal=True,
    )
    retention = str(settings["corral.analytics.retention.ms"])
    analytics = store.create_at_startup(
        ANALYTICS_TOPIC, 1, {"retention.ms": retention}, internal=True
    )
    logs = PartitionLogs(out, settings, store)
    names = [f"topic-{t:05d}" for t in range(topics)]
    group_names = [f"group-{g:05d}" for g in range(groups)]
    placed = [partition_for(name, offsets_topic.partitions) for name in group_names]
    columns = {k: [] for k in ("group", "topic", "partition", "time_ms", "offset", "seq")}
    written = 0
    for p in range(offsets_topic.partitions):
        members = [g for g in range(groups) if placed[g] == p]
        batches = []  # (time, group, offsets [partition], records)
        for g in members:
            times, offs, n = _group_commits(g, plan, ends, start_ms, rng)
            for b in range(len(times)):
                take = min(PARTITIONS, n - b * PARTITIONS) if b == len(times) - 1 else PARTITIONS
                batches.append((int(times[b]), g, offs[b, :take].tolist()))
        batches.sort(key=lambda b: (b[0], b[1]))
        seq, pending, size = 0, [], 0
        for t, g, offs in batches:
            data = _core.offset_commit_batch(
                group_names[g],
                [(names[topic_of[g]], [(i, o, 0, "") for i, o in enumerate(offs)])],
                t,
                -1,
            )
            pending.append(data)
            size += len(data)
            if size >= APPEND_BYTES:
                logs.store.append(OFFSETS_TOPIC, p, b"".join(pending))
                pending, size = [], 0
        if pending:
            logs.store.append(OFFSETS_TOPIC, p, b"".join(pending))
        if parquet is not None and batches:
            counts = np.array([len(b[2]) for b in batches])
            gs = np.repeat([b[1] for b in batches], counts)
            columns["group"].append(np.array(group_names, object)[gs])
            columns["topic"].append(np.array(names, object)[topic_of[gs]])
            columns["partition"].append(np.concatenate([np.arange(c) for c in counts]))
            columns["time_ms"].append(np.repeat([b[0] for b in batches], counts))
            columns["offset"].append(np.concatenate([b[2] for b in batches]))
            columns["seq"].append(np.arange(len(gs)) + seq)
        written += sum(len(b[2]) for b in batches)
    assert written == commits, (written, commits)
    commits_s = time.monotonic() - started
    samples = _write_samples(logs, analytics, names, ends, start_ms)
    logs.store.flush()
    logs.store.close()
    if parquet is not None:
        _write_parquet(Path(parquet), columns, samples)
    return {
        "commits": written,
        "groups": groups,
        "topics": topics,
        "span_ms": span,
        "samples": len(samples[0]),
        "commits_s": round(commits_s, 1),
        "total_s": round(time.monotonic() - started, 1),
    }


def _write_samples(logs, analytics, names, ends, start_ms):
    """One `log_end` record per partition whose log end moved, every 5 s (as the broker's
    sampler); returns their columns (topic index, partition, time, log end, offset)."""
    topics, partitions, ticks = ends.shape
    moved = np.ones(ends.shape, bool)
    moved[:, :, 1:] = ends[:, :, 1:] != ends[:, :, :-1]
    cols = [[], [], [], [], []]
    offset, pending, size = 0, [], 0
    for k in range(ticks):
        t_idx, p_idx = np.nonzero(moved[:, :, k])
        if not len(t_idx):
            continue
        ts = start_ms + k * SAMPLE_MS
        le = ends[t_idx, p_idx, k]
        records = [
            (
                LOG_END,
                json.dumps(
                    {
                        "v": VERSION,
                        "topic": names[t],
                        "partition": int(p),
                        "log_start_offset": 0,
                        "log_end_offset": int(e),
                    },
                    separators=(",", ":"),
                ).encode(),
            )
            for t, p, e in zip(t_idx.tolist(), p_idx.tolist(), le.tolist())
        ]
        data = _core.build_batch(records, ts)
        pending.append(data)
        size += len(data)
        for c, v in zip(
            cols, (t_idx, p_idx, np.full(len(le), ts), le, np.arange(offset, offset + len(le)))
        ):
            c.append(v)
        offset += len(le)
        if size >= APPEND_BYTES:
            logs.store.append(ANALYTICS_TOPIC, 0, b"".join(pending))
            pending, size = [], 0
    if pending:
        logs.store.append(ANALYTICS_TOPIC, 0, b"".join(pending))
    return [np.concatenate(c) if c else np.empty(0, np.int64) for c in cols]


def _write_parquet(directory: Path, columns, samples) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    def cat(name):
        return np.concatenate(columns[name]) if columns[name] else np.empty(0, np.int64)

    commits = pa.table(
        {
            "group": pa.array(cat("group") if columns["group"] else [], pa.string()),
            "topic": pa.array(cat("topic") if columns["topic"] else [], pa.string()),
            "partition": pa.array(cat("partition"), pa.int32()),
            "time_ms": pa.array(cat("time_ms"), pa.int64()),
            "offset": pa.array(cat("offset"), pa.int64()),
            "seq": pa.array(cat("seq"), pa.int64()),
        }
    )
    names = np.array([f"topic-{t:05d}" for t in range(int(samples[0].max(initial=-1)) + 1)], object)
    sample_table = pa.table(
        {
            "topic": pa.array(names[samples[0]] if len(samples[0]) else [], pa.string()),
            "partition": pa.array(samples[1], pa.int32()),
            "time_ms": pa.array(samples[2], pa.int64()),
            "log_end_offset": pa.array(samples[3], pa.int64()),
            "log_start_offset": pa.array(np.zeros(len(samples[3]), np.int64), pa.int64()),
            "seq": pa.array(samples[4], pa.int64()),
        }
    )
    events = pa.table(
        {
            "time_ms": pa.array([], pa.int64()),
            "group": pa.array([], pa.string()),
            "event": pa.array([], pa.string()),
            "protocol": pa.array([], pa.string()),
            "value": pa.array([], pa.string()),
            "seq": pa.array([], pa.int64()),
        }
    )
    for name, table in (("commits", commits), ("samples", sample_table), ("events", events)):
        (directory / name).mkdir(parents=True, exist_ok=True)
        pq.write_table(table, directory / name / "part-0.parquet", row_group_size=1 << 20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, required=True)
    parser.add_argument("--out", required=True, help="the corral data directory to write")
    parser.add_argument("--groups", type=int, default=None)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--parquet", default=None, help="also write the analysis inputs here")
    args = parser.parse_args()
    print(json.dumps(generate(args.out, args.commits, args.groups, args.seed, args.parquet)))


if __name__ == "__main__":
    main()
