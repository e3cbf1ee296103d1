"""The broker's state, shared by every handler: settings, identity, data dir and topic registry."""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path

from corral.cluster import cluster_node_for
from corral.cluster.engine import Engine, Node
from corral.config.dynamic import DynamicConfigs
from corral.config.settings import ConfigError, Settings
from corral.groups import coordinator_for
from corral.network import listeners as listeners
from corral.network.listeners import Listener, advertised
from corral.observability.analytics_topic import analytics_log_for
from corral.partitions.producer_ids import ProducerIdAllocator
from corral.partitions.store import PartitionLogs
from corral.security.authorizer import FILE as ACLS_FILE
from corral.security.authorizer import authorizer_for
from corral.security.credentials import FILE as CREDENTIALS_FILE
from corral.security.credentials import Credentials
from corral.security.sessions import Sessions
from corral.shares import SharePartitions
from corral.topics.registry import Topic, TopicStore
from corral.transactions.coordinator import TransactionCoordinator
from corral.uuids import random_uuid_text

log = logging.getLogger("corral.broker")

LOCK_FILE = ".lock"  # as Kafka's log dirs have


class StartupError(Exception):
    """The broker cannot start (data dir in use or unusable, port taken): one line for the user."""


class BrokerFailed(Exception):
    """The running broker cannot go on (its network thread stopped): it shut down, exit non-zero."""


def lock_data_dir(data_dir: Path) -> int:
    """Takes the data dir's lock (flock, held until the process exits) so that no second broker
    runs on it: two would interleave writes, and the one exiting first would mark the directory
    cleanly shut down while the other still writes. Returns the descriptor that holds it."""
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StartupError(
            f"data directory {data_dir} is in use by another corral (its {LOCK_FILE} "
            "is locked); stop it or choose another --data-dir"
        ) from None
    return fd


class Broker:
    def __init__(self, settings: Settings, engine: Engine | None = None):
        """`engine`: in cluster mode, the engine to use instead of connecting to
        `corral.cluster.url` (an embedder's own, or a test's)."""
        self.settings = settings
        self.node_id: int = settings["node.id"]
        self.data_dir = Path(settings["log.dirs"])
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self._lock_fd = lock_data_dir(self.data_dir)
            self.cluster_id = self._load_or_create_cluster_id()
            # Before anything reads the settings: the dynamic ones stored by a previous run.
            self.dynamic_configs = DynamicConfigs(self.data_dir, settings)
            self.topics = TopicStore(self.data_dir, settings)
            # Topic-partition logs; the server runs `self.logs.run`, which closes them at shutdown.
            self.logs = PartitionLogs(self.data_dir, settings, self.topics)
        except OSError as e:
            raise StartupError(
                f"data directory {self.data_dir}: {e.strerror or e}"
                + (f" ({e.filename})" if e.filename else "")
            ) from None
        except (ValueError, ConfigError) as e:
            raise StartupError(
                f"data directory {self.data_dir}: unreadable dynamic settings: {e}"
            ) from None
        # ACLs (None: no authorizer configured, everything allowed); acls.json read now.
        try:
            self.authorizer = authorizer_for(settings, self.data_dir)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise StartupError(
                f"{self.data_dir / ACLS_FILE}: unreadable ACLs: {type(e).__name__}: {e}"
            ) from None
        self.producer_ids = ProducerIdAllocator(self.data_dir)
        # Cluster mode (docs/cluster.md): this node's part of a cluster on an engine, or None;
        # the topic registry is then the cluster's.
        try:
            self.cluster = cluster_node_for(settings, engine)
        except ValueError as e:
            raise StartupError(str(e)) from None
        if self.cluster is not None:
            # The first node's id becomes the cluster's (kept in the engine); until it is read
            # this node's own is answered.
            self.cluster.cluster_id = self.cluster_id
            self.cluster.on_cluster_id = lambda cluster_id: setattr(self, "cluster_id", cluster_id)
        if self.cluster is not None:
            self.topics.shared = self.cluster.share_topics(self.topics)
        # Consumer groups and committed offsets; the server runs `self.groups.run` for its lifetime.
        self.groups = coordinator_for(self)
        # Transactions (None in cluster mode, which has none yet); the server runs
        # `self.transactions.run`.
        self.transactions = TransactionCoordinator(self) if self.cluster is None else None
        # __corral_analytics: log-end samples and group events; the server runs `analytics.run`.
        self.analytics = analytics_log_for(self)
        # Connections' security state (SASL exchanges) and the way to tell the network thread.
        self.sessions = Sessions()
        # Share groups' share partitions and their state (None in cluster mode, which has none
        # yet); the server runs `self.shares.run`.
        self.shares = SharePartitions(self) if self.cluster is None else None
        self.groups.share_states = self.shares
        # Users' SCRAM credentials (SASL; Describe/AlterUserScramCredentials), read now.
        try:
            self.credentials = Credentials(self.data_dir)
        except (OSError, ValueError) as e:
            raise StartupError(
                f"{self.data_dir / CREDENTIALS_FILE}: unreadable SCRAM credentials: {e}"
            ) from None
        # The listeners, as configured until bound (a port may be 0 until then).
        try:
            configured = listeners.configured(settings)
            self.listeners = {listener.name: listener for listener in configured}
            self.endpoints = advertised(settings, configured)
        except ConfigError as e:
            raise StartupError(str(e)) from None

    def _load_or_create_cluster_id(self) -> str:
        """Like Kafka's meta.properties: the cluster id is made once and kept with the data."""
        meta = self.data_dir / "meta.properties"
        props = {}
        if meta.exists():
            for line in meta.read_text().splitlines():
                key, sep, value = line.partition("=")
                if sep and not key.startswith("#"):
                    props[key.strip()] = value.strip()
        if "cluster.id" not in props:
            props["cluster.id"] = random_uuid_text()  # as kafka-storage random-uuid
            props["node.id"] = str(self.node_id)
            props["version"] = "1"
            meta.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return props["cluster.id"]

    def bound(self, listeners: list[Listener]) -> None:
        """Records the listeners as bound (ports chosen) and what to advertise for each."""
        self.listeners = {listener.name: listener for listener in listeners}
        self.endpoints = advertised(self.settings, listeners)
        if self.cluster is not None:
            # The others reach this node at its first listener's advertised address.
            self.cluster.node = Node(self.node_id, *next(iter(self.endpoints.values())))
        for listener in listeners:
            log.info(
                "listener %s (%s) listening on %s:%d, advertising %s:%d",
                listener.name,
                listener.protocol,
                listener.host,
                listener.port,
                *self.endpoints[listener.name],
            )

    def leads(self, topic: Topic, partition: int) -> bool:
        """Whether this broker leads the partition (always, alone; in cluster mode, the node the
        partition was given to at creation)."""
        return self.cluster is None or self.cluster.leads(topic, partition)

    def endpoint(self, listener: str) -> tuple[str, int]:
        """The advertised (host, port) of a listener (the first one's for an unknown name: a
        request made in process)."""
        return self.endpoints.get(listener) or next(iter(self.endpoints.values()))

    def listener_protocol(self, listener: str) -> str:
        """PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""
        found = self.listeners.get(listener)
        return found.protocol if found is not None else "PLAINTEXT"
