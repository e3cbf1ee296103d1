"""The broker's state, shared by every handler: settings, identity, data dir and topic registry."""

from __future__ import annotations

import logging
import uuid
import base64
from pathlib import Path

from .config import Settings, parse_listener
from .groups import coordinator_for
from .log import PartitionLogs
from .producers import ProducerIdAllocator
from .topics import TopicStore

log = logging.getLogger("corral.broker")


class Broker:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.node_id: int = settings["node.id"]
        self.data_dir = Path(settings["log.dirs"])
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = self._load_or_create_cluster_id()
        self.topics = TopicStore(self.data_dir, settings)
        # Topic-partition logs; the server runs `self.logs.run`, which closes them at shutdown.
        self.logs = PartitionLogs(self.data_dir, settings, self.topics)
        self.producer_ids = ProducerIdAllocator(self.data_dir)
        # Consumer groups and committed offsets; the server runs `self.groups.run` for its lifetime.
        self.groups = coordinator_for(self)
        # Set once the listener is bound (the port may be 0 until then).
        self.advertised_host, self.advertised_port = parse_listener(settings["listeners"])

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
            # Kafka's cluster ids are URL-safe base64 of a random UUID, without padding.
            props["cluster.id"] = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            props["node.id"] = str(self.node_id)
            props["version"] = "1"
            meta.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return props["cluster.id"]

    def bound(self, host: str, port: int) -> None:
        """Records the address actually bound, and what to advertise."""
        advertised = self.settings["advertised.listeners"]
        if advertised:
            self.advertised_host, self.advertised_port = parse_listener(advertised)
        else:
            self.advertised_host = host if host not in ("0.0.0.0", "::") else "localhost"
            self.advertised_port = port
        log.info("listening on %s:%d, advertising %s:%d", host, port,
                 self.advertised_host, self.advertised_port)
