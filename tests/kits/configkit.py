"""Config admin helpers: a confluent-kafka AdminClient on a broker, DescribeConfigs as a dict of
(value, source), and IncrementalAlterConfigs with SET (or DELETE for None) per setting."""

from __future__ import annotations

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)


def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def described(client: AdminClient, resource: ConfigResource) -> dict[str, tuple[str, int]]:
    configs = client.describe_configs([resource])[resource].result(timeout=10)
    return {name: (entry.value, entry.source) for name, entry in configs.items()}


def incremental(client: AdminClient, resource: ConfigResource, **ops) -> None:
    entries = [
        ConfigEntry(
            name.replace("_", "."),
            value,
            incremental_operation=AlterConfigOpType.DELETE
            if value is None
            else AlterConfigOpType.SET,
        )
        for name, value in ops.items()
    ]
    resource = ConfigResource(resource.restype, resource.name, incremental_configs=entries)
    client.incremental_alter_configs([resource])[resource].result(timeout=10)
