"""`corral analyze --bootstrap`: the three inputs (corral.analyze.inputs) read from a live
cluster, corral or Apache Kafka, with corral's own client (corral.ops.admin, the Fetch of
corral.analyze.inputs.fetching), landed as Parquet under `<directory>/commits`, `/samples`,
`/events` for `inputs.read_landed`.

- live samples first: for `sample_for_s` seconds, every `sample_interval_s`, ListOffsets LATEST
  and EARLIEST of every partition of every non-internal topic (one request per leader); their
  `seq` counts up from LIVE_SAMPLE_SEQ (after any log offset). On Kafka, they are what lag in
  seconds needs.
- then commits: `__consumer_offsets`, every partition from its log start up to the last stable
  offset seen when sampling is done (the history as of then, commits made while sampling
  included; read_committed: offsets committed in aborted transactions are left out, as Kafka
  leaves them out); every OffsetCommitValue is a row (`seq` = its offset), tombstones and other
  record types are not commits.
- samples and events: `__corral_analytics` when the cluster has it (corral), turned into rows by
  corral.analyze.inputs.analytics_records; else events derived from the GroupMetadata records
  (corral.analyze.inputs.classic_events) and samples from live sampling only.

Memory stays bounded whatever the history: rows go to Parquet a row group at a time, a new file
every FILE_ROWS rows. `from_ms` / `to_ms` keep rows with from_ms <= time_ms < to_ms.
"""

from __future__ import annotations

import logging
import signal
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import trio

from corral import _core
from corral.analyze.inputs import analytics_records
from corral.analyze.inputs.classic_events import ClassicEvents
from corral.analyze.inputs.fetching import READ_COMMITTED, Record, consume
from corral.groups.storage.records import (
    GROUP_METADATA_KEY,
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_KEY_V0,
    read_key,
)
from corral.observability.analytics_topic import TOPIC as ANALYTICS_TOPIC
from corral.ops.admin import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Admin, AdminError

OFFSETS_TOPIC = "__consumer_offsets"
COMMITS = pa.schema(
    [
        ("group", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("time_ms", pa.int64()),
        ("offset", pa.int64()),
        ("seq", pa.int64()),
    ]
)
log = logging.getLogger("corral.analyze")

# Live samples' `seq` counts up from here: after any `__corral_analytics` offset.
LIVE_SAMPLE_SEQ = 1 << 62
SCHEMAS = {
    "commits": COMMITS,
    "samples": analytics_records.SAMPLES,
    "events": analytics_records.EVENTS,
}
DEFAULT_SAMPLE_FOR_S = 30.0
GROUP_ROWS = 100_000
FILE_ROWS = 5_000_000
MAX_KEYS = 1_000_000

Progress = Callable[[str, int, int | None], None]


async def _on_interrupt(interrupted: trio.Event) -> None:
    """Ctrl-C (SIGINT) while sampling ends the sampling, not the run: what was sampled so far is
    used, and the history is read up to now. Outside the main thread (no signals): nothing."""
    try:
        with trio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                interrupted.set()
                return
    except RuntimeError:  # not in the main thread
        await trio.sleep_forever()


class IngestError(Exception):
    """The cluster could not be read (unreachable, a request refused or timed out): the message
    says which broker or request."""


def land(
    bootstrap: str,
    directory: str,
    *,
    sample_for_s: float | None,
    sample_interval_s: float = 5.0,
    from_ms: int | None = None,
    to_ms: int | None = None,
    timeout_s: float = 30.0,
    progress: Progress | None = None,
) -> dict:
    """Reads the cluster at `bootstrap` and writes the inputs under `directory`; the summary:
    rows, files and bytes written per input, what was read from each source, what was skipped
    and why, seconds taken. `sample_for_s` None: DEFAULT_SAMPLE_FOR_S on a cluster without
    `__corral_analytics` (its samples are all there is), none on corral. Raises IngestError."""
    started = time.monotonic()
    landing = _Landing(directory, from_ms, to_ms, progress or (lambda stage, done, total: None))
    try:
        trio.run(landing.run, bootstrap, sample_for_s, sample_interval_s, timeout_s)
    except AdminError as e:
        raise IngestError(str(e)) from e
    finally:
        written = {name: sink.close() for name, sink in landing.sinks.items()}
    return {
        "bootstrap": bootstrap,
        "directory": directory,
        "cluster": "corral" if landing.has_analytics else "kafka",
        "window": {"from_ms": from_ms, "to_ms": to_ms},
        "inputs": written,
        "sources": landing.sources,
        "events_derived_from_group_metadata": not landing.has_analytics,
        "skipped": {k: n for k, n in sorted(landing.skipped.items()) if n},
        "elapsed_s": round(time.monotonic() - started, 3),
    }


class _Sink:
    """Rows of one input into Parquet files under `directory`, a row group at a time."""

    def __init__(self, directory: Path, schema: pa.Schema):
        self.directory, self.schema = directory, schema
        directory.mkdir(parents=True, exist_ok=True)
        for old in directory.glob("part-*.parquet"):  # a landing again: replaced, never mixed
            old.unlink()
        self.rows: list[tuple] = []
        self.files: list[Path] = []
        self.writer: pq.ParquetWriter | None = None
        self.in_file = self.total = 0

    def add(self, row: tuple) -> None:
        self.rows.append(row)
        if len(self.rows) >= GROUP_ROWS:
            self._flush()

    def add_table(self, table: pa.Table) -> None:
        if table.num_rows:
            self._flush()
            self._write(table)

    def _flush(self) -> None:
        if self.rows:
            columns = list(zip(*self.rows))
            self.rows = []
            self._write(
                pa.Table.from_arrays(
                    [pa.array(c, f.type) for c, f in zip(columns, self.schema)], schema=self.schema
                )
            )

    def _write(self, table: pa.Table) -> None:
        if self.writer is None or self.in_file >= FILE_ROWS:
            self._close_file()
            self.files.append(self.directory / f"part-{len(self.files):05d}.parquet")
            self.writer = pq.ParquetWriter(self.files[-1], self.schema)
        self.writer.write_table(table, row_group_size=GROUP_ROWS)
        self.in_file += table.num_rows
        self.total += table.num_rows

    def _close_file(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer, self.in_file = None, 0

    def close(self) -> dict:
        """Flushes and closes: {rows, files, bytes}. An input without rows still gets one
        (empty) file, so that Spark reads it with its schema."""
        self._flush()
        if not self.files:
            self._write(self.schema.empty_table())
        self._close_file()
        return {
            "rows": self.total,
            "files": len(self.files),
            "bytes": sum(f.stat().st_size for f in self.files),
        }


class _Landing:
    def __init__(self, directory: str, from_ms: int | None, to_ms: int | None, progress: Progress):
        self.sinks = {
            name: _Sink(Path(directory) / name, schema) for name, schema in SCHEMAS.items()
        }
        self.from_ms = -(1 << 63) if from_ms is None else from_ms
        self.to_ms = (1 << 63) - 1 if to_ms is None else to_ms
        self.windowed = from_ms is not None or to_ms is not None
        self.progress = progress
        self.skipped: Counter = Counter()
        self.sources: dict[str, dict] = {}
        self.has_analytics = False
        self.classic = ClassicEvents()
        # Keys decoded once: a history repeats each (group, topic, partition) many times.
        self.keys: dict[bytes, tuple] = {}

    def _in(self, time_ms: int) -> bool:
        return self.from_ms <= time_ms < self.to_ms

    async def run(
        self, bootstrap: str, sample_for_s: float | None, interval_s: float, timeout_s: float
    ) -> None:
        async with Admin(bootstrap, timeout_s) as admin:
            leaders = await admin.metadata(None)
            self.has_analytics = ANALYTICS_TOPIC in leaders
            if sample_for_s is None:
                sample_for_s = 0.0 if self.has_analytics else DEFAULT_SAMPLE_FOR_S
            # Sampling first, then the history up to its end now: the commits made while
            # sampling are read too (the other order would sample a stretch with no commits).
            await self._sample(admin, sample_for_s, interval_s, LIVE_SAMPLE_SEQ)
            if sample_for_s > 0:  # Kafka creates __consumer_offsets at the first group's use
                leaders = await admin.metadata(None)
            await self._read(admin, leaders, OFFSETS_TOPIC, self._offsets_records)
            if self.has_analytics:
                await self._read(admin, leaders, ANALYTICS_TOPIC, self._analytics_records)

    async def _read(
        self,
        admin: Admin,
        leaders: dict[str, dict[int, int]],
        topic: str,
        handle: Callable[[int, list[Record]], None],
    ) -> dict[int, int]:
        """Every partition of `topic` from its log start to its last stable offset now (the high
        watermark when no transaction is open): the ends."""
        partitions = [(topic, p) for p in sorted(leaders.get(topic, {}))]
        starts = await admin.list_offsets(leaders, partitions, EARLIEST_TIMESTAMP)
        ends = await admin.list_offsets(leaders, partitions, LATEST_TIMESTAMP, READ_COMMITTED)
        missing = [p for _, p in partitions if (topic, p) not in starts or (topic, p) not in ends]
        if missing:
            raise AdminError(f"ListOffsets {topic}: no answer for partitions {missing}")
        ranges = {p: (starts[(topic, p)], ends[(topic, p)]) for _, p in partitions}
        total = sum(e - s for s, e in ranges.values())
        counted = Counter()

        def counting(p: int, records: list[Record]) -> None:
            counted["records"] += len(records)
            handle(p, records)

        fetched = await consume(
            admin,
            topic,
            ranges,
            counting,
            self.skipped,
            lambda _: self.progress(topic, counted["records"], total),
        )
        self.sources[topic] = {
            "partitions": len(ranges),
            "records": counted["records"],
            "offsets": total,
            "bytes_fetched": fetched,
        }
        return {p: e for p, (_, e) in ranges.items()}

    def _offsets_records(self, _partition: int, records: list[Record]) -> None:
        commits, events, keys = self.sinks["commits"], self.sinks["events"], self.keys
        for offset, time_ms, key, value in records:
            try:
                known = keys.get(key)
                if known is None:
                    if len(keys) >= MAX_KEYS:
                        keys.clear()
                    known = keys[key] = read_key(key)
                kind, fields = known
                if kind in (OFFSET_COMMIT_KEY_V0, OFFSET_COMMIT_KEY):
                    if value is None:
                        continue  # an offset deleted or expired: not a commit
                    _, v = _core.decode_record_value(kind, value)
                    commit_ms, committed = v[3], v[0]
                    if self._in(commit_ms):
                        commits.add((*fields, commit_ms, committed, offset))
                    else:
                        self.skipped["commits outside the window"] += 1
                elif kind == GROUP_METADATA_KEY and not self.has_analytics:
                    for row in self.classic.record(fields[0], value, time_ms, offset):
                        if self._in(row[0]):
                            events.add(row)
                        else:
                            self.skipped["events outside the window"] += 1
            except (ValueError, IndexError, UnicodeDecodeError, TypeError):
                self.skipped[f"undecodable {OFFSETS_TOPIC} records"] += 1

    def _analytics_records(self, _partition: int, records: list[Record]) -> None:
        split = analytics_records.split(records)
        self.skipped[f"{ANALYTICS_TOPIC} records of an unknown kind or version"] += split.skipped
        for name, table in (("samples", split.samples), ("events", split.events)):
            if self.windowed:
                kept = pc.and_(
                    pc.greater_equal(table["time_ms"], self.from_ms),
                    pc.less(table["time_ms"], self.to_ms),
                )
                self.skipped[f"{name} outside the window"] += (
                    table.num_rows - pc.sum(kept).as_py() if table.num_rows else 0
                )
                table = table.filter(kept)
            self.sinks[name].add_table(table)

    async def _sample(self, admin: Admin, sample_for_s: float, interval_s: float, seq: int) -> None:
        """ListOffsets of every partition of every non-internal topic, every `interval_s` for
        `sample_for_s` seconds (at least one round when sample_for_s > 0)."""
        if sample_for_s <= 0:
            return
        if time.time() * 1000 >= self.to_ms:
            self.skipped["live samples (the window ended before now)"] += 1
            return
        rounds = int(sample_for_s / interval_s) + 1  # at 0, interval_s, ... sample_for_s
        sampled = {"rounds": 0, "rows": 0, "interrupted": False}
        self.sources["live samples"] = sampled
        interrupted = trio.Event()
        log.info(
            "sampling log-end offsets every %g s for %g s (Ctrl-C ends it sooner)",
            interval_s,
            sample_for_s,
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_on_interrupt, interrupted)
            await self._sample_rounds(admin, rounds, interval_s, seq, sampled, interrupted)
            nursery.cancel_scope.cancel()
        sampled["interrupted"] = interrupted.is_set()

    async def _sample_rounds(
        self,
        admin: Admin,
        rounds: int,
        interval_s: float,
        seq: int,
        sampled: dict,
        interrupted: trio.Event,
    ) -> None:
        samples = self.sinks["samples"]
        next_at = trio.current_time()
        for i in range(rounds):
            # Only the wait between rounds is cut short: a request is never abandoned midway.
            with trio.move_on_at(next_at):
                await interrupted.wait()
            if interrupted.is_set():
                return
            next_at += interval_s
            leaders = await admin.metadata(None)
            partitions = [
                (t, p)
                for t, ps in sorted(leaders.items())
                if t not in admin.internal
                for p in sorted(ps)
            ]
            latest = await admin.list_offsets(leaders, partitions, LATEST_TIMESTAMP)
            time_ms = int(time.time() * 1000)
            earliest = await admin.list_offsets(leaders, partitions, EARLIEST_TIMESTAMP)
            self.skipped["sampled partitions without an answer"] += len(partitions) - len(latest)
            if not self._in(time_ms):
                self.skipped["samples outside the window"] += len(latest)
                continue
            for (topic, p), end in sorted(latest.items()):
                samples.add((topic, p, time_ms, end, earliest.get((topic, p)), seq))
                seq += 1
                sampled["rows"] += 1
            sampled["rounds"] += 1
            self.progress("live samples", i + 1, rounds)
