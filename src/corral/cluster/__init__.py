"""Cluster mode (docs/cluster.md): several corral nodes on one engine (etcd or PostgreSQL), the
coordinator shards spread over the live nodes, each shard's state in the engine.

engine.py is the interface to the engine (engines.py makes one from the `--cluster` URL;
etcd.py, postgres.py implement it), node.py this node's registration and leases, placement.py
which node should own a shard, replication.py the coordinator's write path through the engine.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from corral.cluster.engine import Engine
    from corral.cluster.node import ClusterNode
    from corral.config.settings import Settings

log = logging.getLogger("corral.cluster")

# The network thread's writers append without Python: in cluster mode every write goes through
# the engine (replication.py), so they are off.
_SHORT_WRITERS = (
    "corral.group.offset.commit.short.path.enable",
    "corral.group.consumer.epoch.short.path.enable",
)


def cluster_node_for(settings: Settings, engine: Engine | None = None) -> ClusterNode | None:
    """This node of the cluster `corral.cluster.url` names, or None (corral runs alone).
    `engine`: one already made (else connected from the URL)."""
    url = settings["corral.cluster.url"]
    if not url:
        return None
    from corral.cluster.engine import Node
    from corral.cluster.node import ClusterNode

    for name in _SHORT_WRITERS:
        settings.set(name, "false")
    if engine is None:
        from corral.cluster.engines import connect

        engine = connect(url)
    log.info("cluster mode on %s as node %d", url, settings["node.id"])
    return ClusterNode(
        engine, Node(settings["node.id"], "", 0), settings["corral.cluster.lease.ms"]
    )
