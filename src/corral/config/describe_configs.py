"""DescribeConfigs: topic, broker and group settings with their true values and where each came
from (Kafka's sources and synonyms, most significant first)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral.config import loggers as broker_loggers
from corral.config.groups import GROUP_SETTINGS, broker_default
from corral.config.settings import (
    BROKER_SETTINGS,
    TOPIC_SETTINGS,
    ConfigSource,
    ConfigType,
    Setting,
    render,
)
from corral.errors import ErrorCode
from corral.network.apis import ApiKey, handles
from corral.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from corral.security.authorize import allowed

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.config.messages import (
        DescribeConfigsRequest,
        DescribeConfigsResourceResult,
        DescribeConfigsResponse,
        DescribeConfigsResult,
    )
    from corral.config.settings import Settings

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
GROUP = 32


# Which ACL resource guards a config resource type, and the code that says it was refused.
GUARDS = {
    TOPIC: (ResourceType.TOPIC, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    GROUP: (ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED),
    BROKER: (ResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    BROKER_LOGGER: (ResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
}
# The messages of Kafka's authorization errors.
REFUSED_MESSAGES = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
}


def refusal(
    broker: Broker, request: Request[object], operation: int, kind: int, name: str
) -> ErrorCode | None:
    """The authorization error of `operation` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config
    resource, or None when allowed (or the type is not one corral has: refused later)."""
    guard = GUARDS.get(kind)
    if guard is None:
        return None
    resource_type, code = guard
    acl_name = CLUSTER_NAME if resource_type == ResourceType.CLUSTER else name
    return None if allowed(broker, request, operation, resource_type, acl_name) else code


class Refused(Exception):
    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def broker_resource(broker: Broker, name: str) -> bool:
    """Whether a BROKER resource names this broker (else the cluster-wide default, "")."""
    if name == "":
        return False
    if name == str(broker.node_id):
        return True
    raise Refused(
        ErrorCode.INVALID_REQUEST,
        f"Unexpected broker id, expected {broker.node_id} or empty string, but received {name}",
    )


def logger_resource(broker: Broker, name: str) -> None:
    """A BROKER_LOGGER resource names a broker: this one."""
    if name != str(broker.node_id):
        raise Refused(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {broker.node_id}, but received {name}",
        )


@handles(ApiKey.DESCRIBE_CONFIGS, 1, 4)
def describe_configs(
    broker: Broker, request: Request[DescribeConfigsRequest]
) -> DescribeConfigsResponse:
    body, version = request.body, request.api_version
    results: list[DescribeConfigsResult] = []
    refused: list[DescribeConfigsResult] = []
    for resource in body["resources"]:
        kind, name, keys = (
            resource["resource_type"],
            resource["resource_name"],
            resource["configuration_keys"],
        )
        result: DescribeConfigsResult = {
            "resource_type": kind,
            "resource_name": name,
            "configs": [],
            "error_code": ErrorCode.NONE,
            "error_message": None,
        }
        code = refusal(broker, request, AclOperation.DESCRIBE_CONFIGS, kind, name)
        if code is not None:
            # Kafka answers these after the others.
            result.update({"error_code": code, "error_message": REFUSED_MESSAGES[code]})
            refused.append(result)
            continue
        try:
            result["configs"] = [
                _entry(d, body, version)
                for d in _describe(broker, kind, name)
                if keys is None or d[0].name in keys
            ]
        except Refused as e:
            result.update({"error_code": e.code, "error_message": e.message})
        results.append(result)
    return {"results": results + refused}


Synonym = tuple[str, Any, ConfigSource]  # (name, value, source)
Described = tuple[Setting, Any, list[Synonym], bool]  # (setting, value, synonyms, read-only)


def _describe(broker: Broker, kind: int, name: str) -> list[Described]:
    settings = broker.settings
    if kind == TOPIC:
        topic = broker.topics.get(name)
        if topic is None:
            raise Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
        return [
            (
                s,
                topic.configs.get(s.name, settings.topic_default(s.name)),
                _own(s, topic.configs, ConfigSource.DYNAMIC_TOPIC_CONFIG) + _synonyms(broker, s),
                False,
            )
            for s in TOPIC_SETTINGS.values()
        ]
    if kind == BROKER:
        if broker_resource(broker, name):
            # Kafka: a broker setting is read-only unless it is dynamic.
            return [
                (s, settings[s.name], _broker_synonyms(settings, s.name), not s.dynamic)
                for s in BROKER_SETTINGS.values()
            ]
        # The cluster-wide default: only what was set there, as Kafka shows it.
        return [
            (BROKER_SETTINGS[n], v, [(n, v, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)], False)
            for n, v in settings.dynamic_default.items()
        ]
    if kind == BROKER_LOGGER:
        logger_resource(broker, name)
        return broker_loggers.describe()
    if kind == GROUP:
        if not name:
            raise Refused(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
        own = broker.dynamic_configs.groups.get(name, {})
        return [
            (
                s,
                own.get(s.name, broker_default(s, settings)),
                _own(s, own, ConfigSource.GROUP_CONFIG) + _synonyms(broker, s),
                False,
            )
            for s in GROUP_SETTINGS.values()
        ]
    raise Refused(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {kind}")


def _own(setting: Setting, overrides: dict[str, str], source: ConfigSource) -> list[Synonym]:
    if setting.name in overrides:
        return [(setting.name, overrides[setting.name], source)]
    return []


def _synonyms(broker: Broker, setting: Setting) -> list[Synonym]:
    """A topic or group setting's broker-level synonyms, or its own default when it has none."""
    if setting.broker_synonym is None:
        return [(setting.name, setting.default, ConfigSource.DEFAULT_CONFIG)]
    return _broker_synonyms(broker.settings, setting.broker_synonym)


def _broker_synonyms(settings: Settings, name: str) -> list[Synonym]:
    """Where `name` is set, most significant first; log.retention.ms lists its minutes and
    hours synonyms after it, as Kafka does."""
    names = [name]
    if name == "log.retention.ms":
        names += ["log.retention.minutes", "log.retention.hours"]
    found = [
        (n, value, source)
        for n in names
        for value, source in settings.layers(n)
        if source != ConfigSource.DEFAULT_CONFIG or value is not None
    ]
    set_ones = [f for f in found if f[2] != ConfigSource.DEFAULT_CONFIG]
    return set_ones + [f for f in found if f[2] == ConfigSource.DEFAULT_CONFIG][-1:]


def _entry(
    described: Described, body: DescribeConfigsRequest, version: int
) -> DescribeConfigsResourceResult:
    setting, value, synonyms, read_only = described
    # A setting without a value anywhere (log.retention.minutes) has no synonyms.
    source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
    # Passwords and PEM keys are never shown, as Kafka answers them: null and sensitive.
    sensitive = setting.type == ConfigType.PASSWORD
    entry: DescribeConfigsResourceResult = {
        "name": setting.name,
        "value": None if sensitive else render(value),
        "config_source": source,
        "is_sensitive": sensitive,
        "read_only": read_only,
    }
    if body["include_synonyms"]:
        entry["synonyms"] = [
            {"name": n, "value": None if sensitive else render(v), "source": s}
            for n, v, s in synonyms
        ]
    if version >= 3:
        entry["config_type"] = setting.type
        # Kafka sends null, not "", when documentation was not asked for.
        entry["documentation"] = setting.doc if body["include_documentation"] else None
    return entry
