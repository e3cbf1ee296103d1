"""The cluster engine on PostgreSQL (psycopg 3): `postgresql://USER@HOST:PORT/DB`.

Tables (created if absent, under an advisory lock so that nodes starting together do not race):

    corral_nodes      node_id, host, port, rack, expires_at
    corral_leases     shard, node_id (NULL: released), epoch, expires_at
    corral_log        shard, epoch, offset, data: a shard's RecordBatches after its snapshot
    corral_snapshots  shard, epoch, offset, data: its latest snapshot and where replay continues
    corral_meta       key, value: cluster metadata (the topics)

Expiry is by the database's clock (`now()`), never a node's. Fencing is by transactions: an
append or a snapshot takes a share lock on the shard's lease row *at the lease's epoch*
(`SELECT ... FOR SHARE`) in the transaction that writes (an append is one statement, one round
trip); no such row means another node took the shard (`Fenced`). Taking a
shard updates that row, so it waits for a write in progress under the old epoch to commit and
every later write under it finds the epoch moved. Every write is committed with the server's
`synchronous_commit` (on by default: the WAL fsynced, and a synchronous standby's too when
`synchronous_standby_names` is set) before the method returns.

Each thread that calls in gets a connection of its own (autocommit); a connection that fails is
dropped and the call raises EngineError, so the next call connects again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import psycopg

from corral.cluster.engine import EngineError, Fenced, Lease, Node, Position, ShardImage

T = TypeVar("T")

SCHEMA = """
SELECT pg_advisory_xact_lock(7340033);
CREATE TABLE IF NOT EXISTS corral_nodes (
    node_id integer PRIMARY KEY, host text NOT NULL, port integer NOT NULL, rack text,
    expires_at timestamptz NOT NULL);
CREATE TABLE IF NOT EXISTS corral_leases (
    shard integer PRIMARY KEY, node_id integer, epoch bigint NOT NULL,
    expires_at timestamptz NOT NULL);
CREATE TABLE IF NOT EXISTS corral_log (
    shard integer NOT NULL, epoch bigint NOT NULL, "offset" bigint NOT NULL, data bytea NOT NULL,
    PRIMARY KEY (shard, epoch, "offset"));
CREATE TABLE IF NOT EXISTS corral_snapshots (
    shard integer PRIMARY KEY, epoch bigint NOT NULL, "offset" bigint NOT NULL,
    data bytea NOT NULL);
CREATE TABLE IF NOT EXISTS corral_meta (key text PRIMARY KEY, value bytea NOT NULL);
"""

TABLES = ("corral_nodes", "corral_leases", "corral_log", "corral_snapshots", "corral_meta")


class PostgresEngine:
    def __init__(self, url: str, connect_timeout_s: int = 5):
        self.url = url
        self.connect_timeout_s = connect_timeout_s
        self._local = threading.local()
        self._all: list[psycopg.Connection[Any]] = []
        self._lock = threading.Lock()
        self._schema_ready = False

    def __repr__(self) -> str:
        return f"PostgresEngine({self.url})"

    def _connection(self) -> psycopg.Connection[Any]:
        conn: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            conn = psycopg.connect(
                self.url, autocommit=True, connect_timeout=self.connect_timeout_s
            )
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        if not self._schema_ready:
            with conn.transaction():
                conn.execute(SCHEMA)
            self._schema_ready = True
        return conn

    def _run(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        # A kept connection the server dropped meanwhile (a restart) is tried again once on a
        # new one; every method is safe to repeat (upserts, compare-and-set, epochs).
        for attempt in (1, 2):
            reused = getattr(self._local, "conn", None) is not None
            try:
                return work(self._connection())
            except psycopg.OperationalError as e:
                conn = getattr(self._local, "conn", None)
                if conn is not None:
                    conn.close()
                    self._local.conn = None
                if attempt == 1 and reused:
                    continue
                raise EngineError(f"PostgreSQL at {self.url}: {e}") from e
            except psycopg.Error as e:
                raise EngineError(f"PostgreSQL at {self.url}: {e}") from e
        raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()

    # Nodes

    def register(self, node: Node, ttl_ms: int) -> None:
        self._run(
            lambda c: c.execute(
                "INSERT INTO corral_nodes VALUES (%s, %s, %s, %s, now() + %s * interval '1 ms')"
                " ON CONFLICT (node_id) DO UPDATE SET host = EXCLUDED.host,"
                " port = EXCLUDED.port, rack = EXCLUDED.rack, expires_at = EXCLUDED.expires_at",
                (node.node_id, node.host, node.port, node.rack, ttl_ms),
            )
        )

    def deregister(self, node_id: int) -> None:
        self._run(lambda c: c.execute("DELETE FROM corral_nodes WHERE node_id = %s", (node_id,)))

    def live_nodes(self) -> list[Node]:
        rows = self._run(
            lambda c: c.execute(
                "SELECT node_id, host, port, rack FROM corral_nodes WHERE expires_at > now()"
                " ORDER BY node_id"
            ).fetchall()
        )
        return [Node(*row) for row in rows]

    # Shard leases

    def owners(self) -> dict[int, Lease]:
        rows = self._run(
            lambda c: c.execute(
                "SELECT shard, node_id, epoch FROM corral_leases"
                " WHERE node_id IS NOT NULL AND expires_at > now()"
            ).fetchall()
        )
        return {shard: Lease(shard, node, epoch) for shard, node, epoch in rows}

    def acquire(self, shard: int, node_id: int, ttl_ms: int) -> Lease | None:
        row = self._run(
            lambda c: c.execute(
                "INSERT INTO corral_leases VALUES (%s, %s, 1, now() + %s * interval '1 ms')"
                " ON CONFLICT (shard) DO UPDATE SET node_id = EXCLUDED.node_id,"
                " epoch = corral_leases.epoch + 1, expires_at = EXCLUDED.expires_at"
                " WHERE corral_leases.node_id IS NULL OR corral_leases.expires_at <= now()"
                " OR corral_leases.node_id = EXCLUDED.node_id"
                " RETURNING epoch",
                (shard, node_id, ttl_ms),
            ).fetchone()
        )
        return None if row is None else Lease(shard, node_id, row[0])

    def renew(self, leases: Sequence[Lease], ttl_ms: int) -> list[Lease]:
        if not leases:
            return []
        by_node: dict[int, list[Lease]] = {}
        for lease in leases:
            by_node.setdefault(lease.node_id, []).append(lease)
        kept: list[Lease] = []
        for node_id, mine in by_node.items():

            def work(
                conn: psycopg.Connection[Any], node_id: int = node_id, mine: list[Lease] = mine
            ) -> list[Any]:
                return conn.execute(
                    "UPDATE corral_leases l SET expires_at = now() + %s * interval '1 ms'"
                    " FROM unnest(%s::integer[], %s::bigint[]) AS k(shard, epoch)"
                    " WHERE l.shard = k.shard AND l.epoch = k.epoch AND l.node_id = %s"
                    " RETURNING l.shard, l.epoch",
                    (ttl_ms, [x.shard for x in mine], [x.epoch for x in mine], node_id),
                ).fetchall()

            kept += [Lease(shard, node_id, epoch) for shard, epoch in self._run(work)]
        return kept

    def release(self, lease: Lease) -> None:
        self._run(
            lambda c: c.execute(
                "UPDATE corral_leases SET node_id = NULL, expires_at = now()"
                " WHERE shard = %s AND epoch = %s AND node_id = %s",
                (lease.shard, lease.epoch, lease.node_id),
            )
        )

    # A shard's durable state

    @staticmethod
    def _fence(conn: psycopg.Connection[Any], lease: Lease) -> None:
        held = conn.execute(
            "SELECT 1 FROM corral_leases WHERE shard = %s AND epoch = %s FOR SHARE",
            (lease.shard, lease.epoch),
        ).fetchone()
        if held is None:
            raise Fenced(f"shard {lease.shard}: epoch {lease.epoch} is no longer the shard's")

    def append(self, lease: Lease, position: Position, data: bytes) -> None:
        # One statement, one round trip: the insert happens only if the share lock on the
        # lease row at its epoch is taken (the statement is its own transaction).
        inserted = self._run(
            lambda c: (
                c.execute(
                    "INSERT INTO corral_log SELECT %s, %s, %s, %s WHERE EXISTS (SELECT 1 FROM"
                    " corral_leases WHERE shard = %s AND epoch = %s FOR SHARE)"
                    ' ON CONFLICT (shard, epoch, "offset") DO UPDATE SET data = EXCLUDED.data',
                    (lease.shard, position[0], position[1], data, lease.shard, lease.epoch),
                ).rowcount
            )
        )
        if inserted != 1:
            raise Fenced(f"shard {lease.shard}: epoch {lease.epoch} is no longer the shard's")

    def put_snapshot(self, lease: Lease, position: Position, data: bytes) -> None:
        def work(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                self._fence(conn, lease)
                conn.execute(
                    "INSERT INTO corral_snapshots VALUES (%s, %s, %s, %s) ON CONFLICT (shard)"
                    ' DO UPDATE SET epoch = EXCLUDED.epoch, "offset" = EXCLUDED."offset",'
                    " data = EXCLUDED.data",
                    (lease.shard, position[0], position[1], data),
                )
                conn.execute(
                    'DELETE FROM corral_log WHERE shard = %s AND (epoch, "offset") < (%s, %s)',
                    (lease.shard, position[0], position[1]),
                )

        self._run(work)

    def load(self, shard: int) -> ShardImage:
        def work(conn: psycopg.Connection[Any]) -> ShardImage:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                row = conn.execute(
                    'SELECT epoch, "offset", data FROM corral_snapshots WHERE shard = %s',
                    (shard,),
                ).fetchone()
                image = ShardImage()
                if row is not None:
                    image.snapshot_position, image.snapshot = (row[0], row[1]), bytes(row[2])
                batches = conn.execute(
                    'SELECT epoch, "offset", data FROM corral_log WHERE shard = %s'
                    ' AND (epoch, "offset") >= (%s, %s) ORDER BY epoch, "offset"',
                    (shard, *image.snapshot_position),
                ).fetchall()
                image.batches = [((epoch, offset), bytes(data)) for epoch, offset, data in batches]
                return image

        return self._run(work)

    # Cluster metadata

    def put_meta(self, key: str, value: bytes | None, expected: bytes | None) -> bool:
        def work(conn: psycopg.Connection[Any]) -> bool:
            if expected is None and value is not None:
                cur = conn.execute(
                    "INSERT INTO corral_meta VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
                    (key, value),
                )
            elif expected is None:
                return (
                    conn.execute("SELECT 1 FROM corral_meta WHERE key = %s", (key,)).fetchone()
                    is None
                )
            elif value is None:
                cur = conn.execute(
                    "DELETE FROM corral_meta WHERE key = %s AND value = %s", (key, expected)
                )
            else:
                cur = conn.execute(
                    "UPDATE corral_meta SET value = %s WHERE key = %s AND value = %s",
                    (value, key, expected),
                )
            return cur.rowcount == 1

        return self._run(work)

    def get_meta(self, prefix: str) -> dict[str, bytes]:
        rows = self._run(
            lambda c: c.execute(
                "SELECT key, value FROM corral_meta WHERE starts_with(key, %s)", (prefix,)
            ).fetchall()
        )
        return {key: bytes(value) for key, value in rows}

    def drop_everything(self) -> None:
        """Removes corral's tables (tests and benchmarks start each cluster afresh)."""
        self._run(lambda c: c.execute(f"DROP TABLE IF EXISTS {', '.join(TABLES)}"))
        self._schema_ready = False
