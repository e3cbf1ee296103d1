"""DescribeConfigs: the topic and broker settings corral really has, with their true values."""

from __future__ import annotations

from typing import Any

from .apis import ApiKey, handles
from .config import BROKER_SETTINGS, TOPIC_SETTINGS, ConfigSource, Setting, render
from .errors import ErrorCode

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8


@handles(ApiKey.DESCRIBE_CONFIGS, 1, 4)
def describe_configs(broker, request) -> dict[str, Any]:
    body, version = request.body, request.api_version
    results = []
    for resource in body["resources"]:
        kind, name, keys = resource["resource_type"], resource["resource_name"], resource["configuration_keys"]
        result: dict[str, Any] = {"resource_type": kind, "resource_name": name, "configs": []}
        if kind == TOPIC:
            topic = broker.topics.get(name)
            if topic is None:
                result.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              error_message=f"Topic {name} does not exist")
            else:
                result["configs"] = [
                    _topic_entry(broker, topic, s, body, version)
                    for s in TOPIC_SETTINGS.values() if keys is None or s.name in keys
                ]
        elif kind == BROKER:
            if name not in ("", str(broker.node_id)):
                result.update(error_code=ErrorCode.INVALID_REQUEST,
                              error_message=f"Unexpected broker id, expected {broker.node_id} or empty string, but received {name}")
            else:
                result["configs"] = [
                    _broker_entry(broker, s, body, version)
                    for s in BROKER_SETTINGS.values() if keys is None or s.name in keys
                ]
        else:
            result.update(error_code=ErrorCode.INVALID_REQUEST,
                          error_message=f"Unsupported resource type {kind}")
        results.append(result)
    return {"results": results}


def _entry(setting: Setting, value: str, source: ConfigSource, synonyms, body, version) -> dict[str, Any]:
    entry = {"name": setting.name, "value": value, "read_only": False,
             "config_source": source, "is_sensitive": False}
    if body["include_synonyms"]:
        entry["synonyms"] = synonyms
    if version >= 3:
        entry["config_type"] = setting.type
        # Kafka sends null, not "", when documentation was not asked for.
        entry["documentation"] = setting.doc if body["include_documentation"] else None
    return entry


def _broker_source(broker, name: str) -> ConfigSource:
    return ConfigSource.STATIC_BROKER_CONFIG if name in broker.settings.explicit else ConfigSource.DEFAULT_CONFIG


def _topic_entry(broker, topic, setting: Setting, body, version) -> dict[str, Any]:
    broker_name = setting.broker_synonym
    broker_value = render(broker.settings[broker_name])
    synonyms = [{"name": broker_name, "value": broker_value, "source": _broker_source(broker, broker_name)}]
    if setting.name in topic.configs:
        value, source = topic.configs[setting.name], ConfigSource.DYNAMIC_TOPIC_CONFIG
        synonyms.insert(0, {"name": setting.name, "value": value, "source": source})
    else:
        value, source = broker_value, _broker_source(broker, broker_name)
    return _entry(setting, value, source, synonyms, body, version)


def _broker_entry(broker, setting: Setting, body, version) -> dict[str, Any]:
    value = render(broker.settings[setting.name])
    source = _broker_source(broker, setting.name)
    synonyms = [{"name": setting.name, "value": value, "source": source}]
    return _entry(setting, value, source, synonyms, body, version)
