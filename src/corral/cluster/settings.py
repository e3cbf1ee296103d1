"""The cluster mode settings (corral only; docs/cluster.md). config/broker.py lists them with the
broker's others."""

from __future__ import annotations

from corral.config.types import ConfigType, Setting, int_in, string_value

CLUSTER_SETTINGS: list[Setting] = [
    Setting(
        "corral.cluster.url",
        ConfigType.STRING,
        "",
        string_value,
        "corral only: the engine a cluster of corral nodes runs on (`corral serve --cluster "
        "URL`): postgresql://... or etcd://HOST:PORT[,HOST:PORT...]. Every node with the same "
        "URL (and a node.id of its own) is one cluster: the coordinator shards are spread over "
        "the live nodes and their state lives in the engine. Empty (the default): corral runs "
        "alone.",
    ),
    Setting(
        "corral.cluster.lease.ms",
        ConfigType.LONG,
        6000,
        int_in(500, 3_600_000),
        "corral only: how long a node's registration and its shard leases last without "
        "renewal (renewed every third of it). A killed node's shards are taken by others "
        "within about this long.",
    ),
]
