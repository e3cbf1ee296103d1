"""Snapshots of the coordinator's state, so that a restart does not replay the whole log.

A snapshot is a coordinator shard's state written as `__consumer_offsets` records (the very bytes
the log holds: every committed offset and every group's metadata record) plus, for its partition
of the log, the offset from which replay continues. Each shard has its own file,
`__consumer_offsets-<partition>.snapshot`; `FILE_NAME` is the single snapshot of every partition
that data dirs written before shards hold (read once, then replaced). Loading = the snapshot's
records, then the log from those offsets on, in order; a key rewritten after the snapshot point
simply ends with its latest record, so replaying a little more than needed is harmless.

File layout: MAGIC, u32 header length, JSON header {"positions": {partition: offset}}, then
records as [i32 key length][key][i32 value length][value]. It is written to a temporary file,
fsynced, renamed over the previous snapshot, and the directory fsynced: a crash leaves either the
old snapshot or the new one.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path

from corral.partitions.files import replace_durably

MAGIC = b"corral-coordinator-snapshot-1\n"
FILE_NAME = "__consumer_offsets.snapshot"

Record = tuple[bytes, bytes]


def write(path: Path, positions: dict[int, int], records: list[Record]) -> int:
    """Writes the snapshot durably; returns its size in bytes. Blocking: run it in a thread."""
    header = json.dumps({"positions": {str(p): o for p, o in positions.items()}}).encode()
    parts = [MAGIC, struct.pack(">I", len(header)), header]
    for key, value in records:
        parts += [struct.pack(">i", len(key)), key, struct.pack(">i", len(value)), value]
    data = b"".join(parts)
    replace_durably(path, data)
    return len(data)


def read(path: Path) -> tuple[dict[int, int], Iterator[Record]] | None:
    """(replay positions, records) of the snapshot at `path`, or None when there is none."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if not data.startswith(MAGIC):
        raise ValueError(f"{path} is not a coordinator snapshot")
    return parse(data)


def parse(data: bytes) -> tuple[dict[int, int], Iterator[Record]]:
    """(replay positions, records) of a snapshot's bytes (a cluster's engine keeps them)."""
    if not data.startswith(MAGIC):
        raise ValueError("not a coordinator snapshot")
    pos = len(MAGIC)
    (size,) = struct.unpack_from(">I", data, pos)
    pos += 4
    header = json.loads(data[pos : pos + size])
    pos += size
    positions = {int(p): o for p, o in header["positions"].items()}

    def records() -> Iterator[Record]:
        at = pos
        while at < len(data):
            (klen,) = struct.unpack_from(">i", data, at)
            key = data[at + 4 : at + 4 + klen]
            at += 4 + klen
            (vlen,) = struct.unpack_from(">i", data, at)
            value = data[at + 4 : at + 4 + vlen]
            at += 4 + vlen
            yield key, value

    return positions, records()
