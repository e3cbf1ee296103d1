"""The cluster engine on etcd (v3, through its JSON gateway on the client port, with the standard
library's HTTP client): `etcd://HOST:PORT[,HOST:PORT...]`.

Keys, under /corral/:

    nodes/<id>                      the node's address, attached to its etcd lease (ttl)
    shards/<n>/owner                "node:epoch", attached to the owner's etcd lease
    shards/<n>/epoch                the shard's epoch (kept after the owner key expires)
    log/<n>/<epoch>/<offset>        RecordBatches after the snapshot (numbers zero-padded)
    snapshot/<n>                    "<epoch>/<offset>" and the latest snapshot
    chunks/<n>/<epoch>/<offset>/<token>/<i>
                                    the parts of a value above 1 MiB (a snapshot, a big batch)
    meta/<key>                      cluster metadata (the topics)

Expiry is etcd's: a node keeps one etcd lease alive (`register`), and its registration and the
owner keys of its shards go with it. Fencing is etcd's transactions: an append or a snapshot
commits only if the shard's owner key still holds exactly this lease's "node:epoch" (a shard
taken by another node, or whose owner key expired, refuses it: `Fenced`). Taking a shard is a
transaction on the owner and epoch keys' revisions as read. A write is answered by etcd once a
quorum of its members has it in their fsynced raft log.

etcd takes requests of at most 1.5 MiB (`--max-request-bytes`): a value above 1 MiB (a snapshot,
or a classic group's record of thousands of members) is written in parts first, under a token of
that write's own, and made visible by the fenced transaction that writes the key naming them; a
fenced writer's parts are removed (or dropped with the next snapshot), never someone else's. Its MVCC history keeps every overwritten or deleted key until compacted: run etcd with
`--auto-compaction-mode=revision --auto-compaction-retention=10000` (docs/cluster.md).
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import threading
import uuid
from collections.abc import Sequence
from typing import Any

from corral.cluster.engine import EngineError, Fenced, Lease, Node, Position, ShardImage

PREFIX = "/corral/"
# A value above this is written in parts (etcd takes requests of at most 1.5 MiB by default).
CHUNK_BYTES = 1 << 20
INLINE, CHUNKED = b"\x00", b"\x01"
PAGE = 500  # keys per range read


def _b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text)


def _range_end(prefix: str) -> str:
    """The key after every key starting with `prefix` (etcd's prefix ranges)."""
    raw = prefix.encode()
    return _b64(raw[:-1] + bytes([raw[-1] + 1]))


def _num(n: int) -> str:
    return f"{n:020d}"


def _position(position: Position) -> str:
    return f"{_num(position[0])}/{_num(position[1])}"


class EtcdEngine:
    def __init__(self, url: str, timeout_s: float = 5.0):
        self.url = url
        self.endpoints = [e.strip() for e in url.partition("://")[2].split(",") if e.strip()]
        if not self.endpoints:
            raise ValueError(f"no etcd endpoint in {url!r}")
        self.timeout_s = timeout_s
        self._local = threading.local()
        self._lock = threading.Lock()
        self._preferred = 0
        # node id -> its etcd lease id
        self._node_leases: dict[int, int] = {}

    def __repr__(self) -> str:
        return f"EtcdEngine({self.url})"

    # HTTP

    def _call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps(body)
        last: Exception | None = None
        # Each endpoint in turn; a kept connection the server dropped meanwhile (a restart) is
        # tried again once on a new one (every call is safe to repeat).
        tries = [(self._preferred + i) % len(self.endpoints) for i in range(len(self.endpoints))]
        for index in [tries[0], *tries]:
            conn = self._connection(index)
            try:
                conn.request("POST", "/v3/" + path, data, {"Content-Type": "application/json"})
                response = conn.getresponse()
                payload = response.read()
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                self._local.conns.pop(index, None)
                last = e
                continue
            self._preferred = index
            answer: dict[str, Any] = json.loads(payload or b"{}")
            if response.status != 200:
                raise EngineError(f"etcd {path}: {response.status} {answer.get('message', '')}")
            return answer
        raise EngineError(f"etcd at {self.url}: {last}")

    def _connection(self, index: int) -> http.client.HTTPConnection:
        conns: dict[int, http.client.HTTPConnection] = getattr(self._local, "conns", None) or {}
        self._local.conns = conns
        conn = conns.get(index)
        if conn is None:
            host, _, port = self.endpoints[index].rpartition(":")
            conn = conns[index] = http.client.HTTPConnection(host, int(port), self.timeout_s)
        return conn

    def _range(
        self, prefix: str, start: str | None = None, revision: int = 0
    ) -> list[tuple[str, bytes]]:
        """Every key from `start` (default `prefix`) to the end of `prefix`, in order, at one
        revision (`revision`, default the current one)."""
        out: list[tuple[str, bytes]] = []
        key = start or prefix
        while True:
            body: dict[str, Any] = {
                "key": _b64(key),
                "range_end": _range_end(prefix),
                "limit": PAGE,
            }
            if revision:
                body["revision"] = revision
            answer = self._call("kv/range", body)
            revision = int(answer["header"]["revision"])
            kvs = answer.get("kvs", [])
            out += [(_unb64(kv["key"]).decode(), _unb64(kv.get("value", ""))) for kv in kvs]
            if not answer.get("more") or not kvs:
                return out
            key = out[-1][0] + "\0"

    def _get(self, key: str) -> dict[str, Any] | None:
        kvs = self._call("kv/range", {"key": _b64(key)}).get("kvs", [])
        return kvs[0] if kvs else None

    def _txn(self, compare: list[dict[str, Any]], success: list[dict[str, Any]]) -> bool:
        return bool(self._call("kv/txn", {"compare": compare, "success": success}).get("succeeded"))

    @staticmethod
    def _put(key: str, value: bytes | str, lease: int = 0) -> dict[str, Any]:
        put: dict[str, Any] = {"key": _b64(key), "value": _b64(value)}
        if lease:
            put["lease"] = str(lease)
        return {"request_put": put}

    @staticmethod
    def _delete_prefix(prefix: str, end: str | None = None) -> dict[str, Any]:
        return {
            "request_delete_range": {
                "key": _b64(prefix),
                "range_end": _b64(end) if end is not None else _range_end(prefix),
            }
        }

    @staticmethod
    def _value_is(key: str, value: bytes | str) -> dict[str, Any]:
        return {"key": _b64(key), "target": "VALUE", "result": "EQUAL", "value": _b64(value)}

    @staticmethod
    def _mod_revision_is(key: str, revision: int) -> dict[str, Any]:
        return {
            "key": _b64(key),
            "target": "MOD",
            "result": "EQUAL",
            "mod_revision": str(revision),
        }

    def close(self) -> None:
        for conn in (getattr(self._local, "conns", None) or {}).values():
            conn.close()

    # Nodes

    def _node_lease(self, node_id: int, ttl_ms: int) -> int:
        """The node's etcd lease, kept alive (granted anew when it expired)."""
        with self._lock:
            lease = self._node_leases.get(node_id)
        if lease is not None:
            answer = self._call("lease/keepalive", {"ID": str(lease)})
            if int(answer.get("result", {}).get("TTL", 0)) > 0:
                return lease
        ttl_s = max(1, -(-ttl_ms // 1000))
        lease = int(self._call("lease/grant", {"TTL": ttl_s})["ID"])
        with self._lock:
            self._node_leases[node_id] = lease
        return lease

    def register(self, node: Node, ttl_ms: int) -> None:
        lease = self._node_lease(node.node_id, ttl_ms)
        value = json.dumps({"host": node.host, "port": node.port, "rack": node.rack})
        self._call(
            "kv/put", self._put(f"{PREFIX}nodes/{node.node_id}", value, lease)["request_put"]
        )

    def deregister(self, node_id: int) -> None:
        with self._lock:
            lease = self._node_leases.pop(node_id, None)
        if lease is not None:
            self._call("lease/revoke", {"ID": str(lease)})  # its keys go with it

    def live_nodes(self) -> list[Node]:
        nodes = []
        for key, value in self._range(f"{PREFIX}nodes/"):
            address = json.loads(value)
            nodes.append(
                Node(int(key.rsplit("/", 1)[1]), address["host"], address["port"], address["rack"])
            )
        return sorted(nodes, key=lambda n: n.node_id)

    # Shard leases

    def owners(self) -> dict[int, Lease]:
        found = {}
        for key, value in self._range(f"{PREFIX}shards/"):
            if key.endswith("/owner"):
                shard = int(key.split("/")[-2])
                node, _, epoch = value.decode().partition(":")
                found[shard] = Lease(shard, int(node), int(epoch))
        return found

    def acquire(self, shard: int, node_id: int, ttl_ms: int) -> Lease | None:
        lease_id = self._node_lease(node_id, ttl_ms)
        owner_key, epoch_key = f"{PREFIX}shards/{shard}/owner", f"{PREFIX}shards/{shard}/epoch"
        owner, epoch_kv = self._get(owner_key), self._get(epoch_key)
        if owner is not None and _unb64(owner["value"]).decode().partition(":")[0] != str(node_id):
            return None
        epoch = int(_unb64(epoch_kv["value"])) + 1 if epoch_kv is not None else 1
        taken = self._txn(
            [
                self._mod_revision_is(owner_key, int(owner["mod_revision"]) if owner else 0),
                self._mod_revision_is(epoch_key, int(epoch_kv["mod_revision"]) if epoch_kv else 0),
            ],
            [
                self._put(epoch_key, str(epoch)),
                self._put(owner_key, f"{node_id}:{epoch}", lease_id),
            ],
        )
        return Lease(shard, node_id, epoch) if taken else None

    def renew(self, leases: Sequence[Lease], ttl_ms: int) -> list[Lease]:
        if not leases:
            return []
        for node_id in {lease.node_id for lease in leases}:
            self._node_lease(node_id, ttl_ms)  # keeps every owner key of the node alive
        held = self.owners()
        return [lease for lease in leases if held.get(lease.shard) == lease]

    def release(self, lease: Lease) -> None:
        owner_key = f"{PREFIX}shards/{lease.shard}/owner"
        self._txn(
            [self._value_is(owner_key, f"{lease.node_id}:{lease.epoch}")],
            [{"request_delete_range": {"key": _b64(owner_key)}}],
        )

    # A shard's durable state

    def _fence(self, lease: Lease) -> dict[str, Any]:
        return self._value_is(
            f"{PREFIX}shards/{lease.shard}/owner", f"{lease.node_id}:{lease.epoch}"
        )

    def _value(self, shard: int, position: Position, data: bytes) -> tuple[bytes, str | None]:
        """What a log or snapshot key holds for `data`: the bytes inline, or (above CHUNK_BYTES)
        the token and count of parts written here first, under a prefix of this write's own
        (returned, to be removed if the write is fenced)."""
        if len(data) <= CHUNK_BYTES:
            return INLINE + data, None
        token = uuid.uuid4().hex
        prefix = f"{PREFIX}chunks/{shard}/{_position(position)}/{token}/"
        parts = range(0, len(data), CHUNK_BYTES)
        for i, start in enumerate(parts):
            put = self._put(f"{prefix}{i:06d}", data[start : start + CHUNK_BYTES])
            self._call("kv/put", put["request_put"])
        return CHUNKED + json.dumps({"token": token, "parts": len(parts)}).encode(), prefix

    def _commit(self, lease: Lease, ops: list[dict[str, Any]], parts: str | None) -> None:
        """`ops` in one transaction if `lease` still owns its shard; else its parts removed and
        Fenced raised."""
        if self._txn([self._fence(lease)], ops):
            return
        if parts is not None:
            with contextlib.suppress(EngineError):  # else a later snapshot drops them
                self._call("kv/deleterange", self._delete_prefix(parts)["request_delete_range"])
        raise Fenced(f"shard {lease.shard}: epoch {lease.epoch} is no longer the shard's")

    def append(self, lease: Lease, position: Position, data: bytes) -> None:
        value, parts = self._value(lease.shard, position, data)
        key = f"{PREFIX}log/{lease.shard}/{_position(position)}"
        self._commit(lease, [self._put(key, value)], parts)

    def put_snapshot(self, lease: Lease, position: Position, data: bytes) -> None:
        shard = lease.shard
        value, parts = self._value(shard, position, data)
        log_prefix, chunks = f"{PREFIX}log/{shard}/", f"{PREFIX}chunks/{shard}/"
        ops = [
            self._put(f"{PREFIX}snapshot/{shard}", f"{_position(position)}\n".encode() + value),
            # The batches before it, and every part stored before its position (dropped
            # batches', older snapshots', fenced writers').
            self._delete_prefix(log_prefix, f"{log_prefix}{_position(position)}"),
            self._delete_prefix(chunks, f"{chunks}{_position(position)}"),
        ]
        previous = self._get(f"{PREFIX}snapshot/{shard}")
        if previous is not None:
            at, old = _unb64(previous["value"]).split(b"\n", 1)
            if at.decode() == _position(position) and old[:1] == CHUNKED:
                token = json.loads(old[1:])["token"]  # replaced at the same position
                ops.append(self._delete_prefix(f"{chunks}{_position(position)}/{token}/"))
        self._commit(lease, ops, parts)

    def _resolve(self, shard: int, position: Position, value: bytes, revision: int) -> bytes:
        if value[:1] == INLINE:
            return value[1:]
        meta = json.loads(value[1:])
        prefix = f"{PREFIX}chunks/{shard}/{_position(position)}/{meta['token']}/"
        pieces = self._range(prefix, revision=revision)
        if len(pieces) != meta["parts"]:
            raise EngineError(f"shard {shard}: parts of {position} missing")
        return b"".join(piece for _, piece in pieces)

    def load(self, shard: int) -> ShardImage:
        """The shard's snapshot and batches, read at one revision of etcd (consistent)."""
        image = ShardImage()
        answer = self._call("kv/range", {"key": _b64(f"{PREFIX}snapshot/{shard}")})
        revision = int(answer["header"]["revision"])
        log_prefix = f"{PREFIX}log/{shard}/"
        start = None
        for kv in answer.get("kvs", []):
            at, value = _unb64(kv["value"]).split(b"\n", 1)
            epoch, offset = at.decode().split("/")
            image.snapshot_position = (int(epoch), int(offset))
            image.snapshot = self._resolve(shard, image.snapshot_position, value, revision)
            start = f"{log_prefix}{at.decode()}"
        for key, value in self._range(log_prefix, start, revision=revision):
            epoch, offset = key[len(log_prefix) :].split("/")
            position = (int(epoch), int(offset))
            image.batches.append((position, self._resolve(shard, position, value, revision)))
        return image

    # Cluster metadata

    def put_meta(self, key: str, value: bytes | None, expected: bytes | None) -> bool:
        full = f"{PREFIX}meta/{key}"
        compare = (
            [{"key": _b64(full), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}]
            if expected is None
            else [self._value_is(full, expected)]
        )
        op = (
            {"request_delete_range": {"key": _b64(full)}}
            if value is None
            else self._put(full, value)
        )
        return self._txn(compare, [op])

    def get_meta(self, prefix: str) -> dict[str, bytes]:
        base = f"{PREFIX}meta/"
        return {key[len(base) :]: value for key, value in self._range(base + prefix)}

    def drop_everything(self) -> None:
        """Removes corral's keys (tests and benchmarks start each cluster afresh)."""
        self._call("kv/deleterange", self._delete_prefix(PREFIX)["request_delete_range"])
        with self._lock:
            self._node_leases.clear()
