"""Reading whole partitions of a topic with Fetch, on corral's own admin client
(corral.ops.admin): each partition from a start offset up to an end offset, from its leader,
the leader's partitions in one request, and the RecordBatches decoded here.

Fetch v12 at most: the highest version both corral (4-12) and Kafka 4 (4-18) answer that still
names topics (v13+ wants topic ids). Batches: uncompressed ones are decoded by the compiled core
(`_core.decode_batches`); gzip (zlib), lz4 and zstd (pyarrow's streams, already a dependency of
`corral analyze`) are decompressed and their records parsed here; snappy (Kafka's xerial framing)
batches are skipped and counted. The read is read_committed: batches of aborted transactions
are left out as Kafka's consumer leaves them out (the answer's aborted transactions, the abort
markers); control batches hold no data.
"""

from __future__ import annotations

import struct
import zlib
from collections import Counter
from collections.abc import Callable

import pyarrow as pa
import trio

from corral import _core
from corral.errors import ErrorCode
from corral.network.apis import ApiKey
from corral.ops.admin import RETRY_EVERY_S, Admin, AdminError, error_name

Record = tuple[int, int, bytes | None, bytes | None]  # (offset, timestamp ms, key, value)

READ_COMMITTED = 1
FETCH_MAX_BYTES = 16 << 20
PARTITION_MAX_BYTES = 4 << 20
# Leaders move or are being elected: ask the metadata again, this many times in a row at most.
MAX_LEADER_RETRIES = 20
MAX_EMPTY_ANSWERS = 3

# RecordBatch v2 header: baseOffset int64, batchLength int32, partitionLeaderEpoch int32,
# magic int8, crc uint32, attributes int16, lastOffsetDelta int32, baseTimestamp int64,
# maxTimestamp int64, producerId int64, producerEpoch int16, baseSequence int32, count int32.
HEADER = 61
_HEAD = struct.Struct(">qi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
COMPRESSION = 0x07
TIMESTAMP_LOG_APPEND = 0x08
TRANSACTIONAL = 0x10
CONTROL = 0x20
CODECS = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def decode(
    data: bytes, start: int, skipped: Counter, aborted: list[dict] | None = None
) -> tuple[list[Record], int | None]:
    """The records at offsets >= `start` of the whole batches in `data` (a Fetch answer may end
    in a partial one), and the offset after the last whole batch (None: no whole batch).
    `aborted`: the answer's aborted transactions (read_committed); their batches are left out,
    as Kafka's consumer does: a transactional batch of a producer whose aborted transaction
    began at or before the batch, up to that producer's abort marker."""
    out: list[Record] = []
    pending = sorted(((a["first_offset"], a["producer_id"]) for a in aborted or ()), reverse=True)
    aborting: set[int] = set()
    run = -1  # where a run of plain batches starts: decoded in one call into the core
    pos, after = 0, None
    while pos + 17 <= len(data):
        base, length = _HEAD.unpack_from(data, pos)
        end = pos + 12 + length
        if end > len(data):
            break
        magic = data[pos + 16]
        kind = "skip"
        if magic != 2:  # message formats v0/v1: Kafka 4 and corral write none
            skipped["batches in message format v0/v1"] += 1
            after = base + 1
        else:
            (attributes,) = _I16.unpack_from(data, pos + 21)
            after = base + _I32.unpack_from(data, pos + 23)[0] + 1
            (producer,) = _I64.unpack_from(data, pos + 43)
            while pending and pending[-1][0] < after:
                aborting.add(pending.pop()[1])
            if attributes & CONTROL:
                if producer in aborting and _is_abort_marker(data, pos, end):
                    aborting.discard(producer)
            elif attributes & TRANSACTIONAL and producer in aborting:
                skipped["records of aborted transactions"] += _I32.unpack_from(data, pos + 57)[0]
            else:
                kind = "compressed" if attributes & COMPRESSION else "plain"
        if kind == "plain":
            run = pos if run < 0 else run
            pos = end
            continue
        if run >= 0:
            out.extend(r for r in _core.decode_batches(data[run:pos]) if r[0] >= start)
            run = -1
        if kind == "compressed":
            out.extend(r for r in _compressed(data, pos, end, attributes, skipped) if r[0] >= start)
        pos = end
    if run >= 0:
        out.extend(r for r in _core.decode_batches(data[run:pos]) if r[0] >= start)
    return out, after


def _is_abort_marker(data: bytes, pos: int, end: int) -> bool:
    """A control batch's record key: version int16, type int16 (0 abort, 1 commit)."""
    records = _records(data[pos + HEADER : end], 0, 0, 1, False)
    key = records[0][2] if records else None
    return key is not None and len(key) >= 4 and _I16.unpack_from(key, 2)[0] == 0


def _compressed(data: bytes, pos: int, end: int, attributes: int, skipped: Counter) -> list[Record]:
    codec = attributes & COMPRESSION
    name = CODECS.get(codec, f"codec {codec}")
    payload = data[pos + HEADER : end]
    try:
        if codec == 1:
            raw = zlib.decompress(payload, 16 + zlib.MAX_WBITS)  # a gzip stream
        elif codec in (3, 4):
            raw = pa.CompressedInputStream(pa.BufferReader(payload), name).read()
        else:
            skipped[f"{name} batches (no decompressor)"] += 1
            return []
        base = _I64.unpack_from(data, pos)[0]
        timestamp = _I64.unpack_from(data, pos + (35 if attributes & TIMESTAMP_LOG_APPEND else 27))[
            0
        ]
        return _records(
            bytes(raw),
            base,
            timestamp,
            _I32.unpack_from(data, pos + 57)[0],
            bool(attributes & TIMESTAMP_LOG_APPEND),
        )
    except (zlib.error, OSError, pa.ArrowException, IndexError, struct.error):
        skipped[f"undecodable {name} batches"] += 1
        return []


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint (the record fields' encoding) and the position after it."""
    n = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return (n >> 1) ^ -(n & 1), pos
        shift += 7


def _records(raw: bytes, base: int, timestamp: int, count: int, log_append: bool) -> list[Record]:
    """The records of a decompressed batch body (headers are not kept)."""
    out: list[Record] = []
    pos = 0
    for _ in range(count):
        length, pos = _varint(raw, pos)
        after = pos + length
        delta, pos = _varint(raw, pos + 1)  # after the attributes byte
        offset_delta, pos = _varint(raw, pos)
        fields: list[bytes | None] = []
        for _ in range(2):  # key, value
            n, pos = _varint(raw, pos)
            fields.append(None if n < 0 else raw[pos : pos + n])
            pos += max(n, 0)
        out.append((base + offset_delta, timestamp if log_append else timestamp + delta, *fields))
        pos = after
    return out


async def consume(
    admin: Admin,
    topic: str,
    ranges: dict[int, tuple[int, int]],
    handle: Callable[[int, list[Record]], None],
    skipped: Counter,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Fetches every partition p of `topic` from ranges[p][0] up to (not including) ranges[p][1],
    `handle(p, records)` called in offset order per partition; returns the bytes fetched.
    Records that retention removed meanwhile are skipped and counted."""
    positions = {p: s for p, (s, e) in ranges.items() if s < e}
    ends = {p: e for p, (_, e) in ranges.items()}
    leaders = (await admin.metadata([topic])).get(topic, {})
    stalled: Counter = Counter()  # empty answers in a row, per partition
    alone: set[int] = set()  # a batch larger than its share of a shared answer: asked alone
    fetched = retries = 0
    while positions:
        moved = False
        for leader, parts in _requests(positions, leaders, alone):
            if leader < 0:
                moved = True
                continue
            answer = await admin.call(
                await admin.node(leader),
                ApiKey.FETCH,
                fetch_body(topic, {p: positions[p] for p in parts}),
            )
            if answer.get("error_code"):
                raise AdminError(f"Fetch {topic}: {error_name(answer['error_code'])}")
            for part in (p for t in answer["responses"] for p in t["partitions"]):
                p, code = part["partition_index"], part["error_code"]
                if code in (
                    ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    ErrorCode.LEADER_NOT_AVAILABLE,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    ErrorCode.FENCED_LEADER_EPOCH,
                ):
                    moved = True
                elif (
                    code == ErrorCode.OFFSET_OUT_OF_RANGE
                    and part["log_start_offset"] > positions[p]
                ):
                    skipped[f"{topic} records removed by retention while reading"] += (
                        part["log_start_offset"] - positions[p]
                    )
                    positions[p] = part["log_start_offset"]
                elif code:
                    raise AdminError(f"Fetch {topic}-{p} at {positions[p]}: {error_name(code)}")
                else:
                    data = part["records"] or b""
                    fetched += len(data)
                    records, after = decode(
                        data, positions[p], skipped, part.get("aborted_transactions")
                    )
                    handle(p, [r for r in records if r[0] < ends[p]])
                    if after is not None:
                        positions[p] = max(after, positions[p])
                        alone.discard(p)
                        stalled.pop(p, None)
                    elif data:
                        alone.add(p)
                    else:  # nothing below the end seen at the start: it went back, or a gap
                        stalled[p] += 1
                        if part["high_watermark"] <= positions[p] or stalled[p] > MAX_EMPTY_ANSWERS:
                            skipped[f"{topic} offsets the leader no longer served"] += (
                                ends[p] - positions[p]
                            )
                            ends[p] = positions[p]
                if positions[p] >= ends[p]:
                    positions.pop(p)
        if progress is not None:
            progress(fetched)
        if moved:
            retries += 1
            if retries > MAX_LEADER_RETRIES:
                raise AdminError(f"Fetch {topic}: partitions without a leader")
            await trio.sleep(RETRY_EVERY_S)
            leaders = (await admin.metadata([topic])).get(topic, {})
        else:
            retries = 0
    return fetched


def _requests(positions: dict[int, int], leaders: dict[int, int], alone: set[int]):
    """(leader, partitions) of each request of a round: a leader's partitions together, except
    those asked alone."""
    shared: dict[int, list[int]] = {}
    for p in sorted(positions):
        leader = leaders.get(p, -1)
        if p in alone:
            yield leader, [p]
        else:
            shared.setdefault(leader, []).append(p)
    yield from shared.items()


def fetch_body(topic: str, positions: dict[int, int]) -> dict:
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": FETCH_MAX_BYTES,
        "isolation_level": READ_COMMITTED,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": p,
                        "fetch_offset": o,
                        "log_start_offset": -1,
                        "current_leader_epoch": -1,
                        "partition_max_bytes": PARTITION_MAX_BYTES,
                    }
                    for p, o in positions.items()
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
