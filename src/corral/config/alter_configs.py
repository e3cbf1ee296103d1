"""AlterConfigs and IncrementalAlterConfigs (kafka-configs --alter): topic overrides, dynamic
broker settings (this broker's and the cluster-wide default) and consumer group settings, each
change durable before it is answered and in effect at once."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.config import loggers as broker_loggers
from corral.config.describe_configs import (
    BROKER,
    BROKER_LOGGER,
    GROUP,
    REFUSED_MESSAGES,
    TOPIC,
    Refused,
    broker_resource,
    logger_resource,
    refusal,
)
from corral.config.groups import GROUP_SETTINGS, broker_default
from corral.config.settings import (
    BROKER_SETTINGS,
    TOPIC_SETTINGS,
    ConfigError,
    DynamicConfigRefused,
    render,
)
from corral.config.types import ConfigType, Setting
from corral.errors import ErrorCode
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation
from corral.topics.registry import TopicError, validate_configs

if TYPE_CHECKING:
    from typing import TypeAlias

    from corral._core import Request
    from corral.broker import Broker
    from corral.config.messages import (
        AlterConfigsRequest,
        AlterConfigsRequestAlterConfigsResource,
        AlterConfigsResponse,
        AlterConfigsResponseAlterConfigsResourceResponse,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsRequestAlterConfigsResource,
        IncrementalAlterConfigsResponse,
    )

    # A resource's answer: AlterConfigs' and IncrementalAlterConfigs' have the same fields.
    Answer: TypeAlias = AlterConfigsResponseAlterConfigsResourceResponse
    Resource: TypeAlias = (
        AlterConfigsRequestAlterConfigsResource | IncrementalAlterConfigsRequestAlterConfigsResource
    )
    # IncrementalAlterConfigs' operations: (name, SET/DELETE/APPEND/SUBTRACT, value).
    Ops: TypeAlias = list[tuple[str, int, str | None]]

log = logging.getLogger("corral.configs")

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

# The new layer of overrides from the current one ({name: text}).
Change = Callable[[dict[str, str], Callable[[str], str | None]], dict[str, str]]


@handles(ApiKey.ALTER_CONFIGS, 0, 2)
async def alter_configs(
    broker: Broker, request: Request[AlterConfigsRequest]
) -> AlterConfigsResponse:
    """Replaces a resource's whole set of overrides with the ones given (Kafka's legacy API)."""
    body = request.body
    responses: list[Answer] = []
    for resource in body["resources"]:
        names = [c["name"] for c in resource["configs"]]
        configs = {c["name"]: c["value"] for c in resource["configs"]}

        def replace_all(
            current: dict[str, str],
            effective: Callable[[str], str | None],
            configs: dict[str, str | None] = configs,
            names: list[str] = names,
        ) -> dict[str, str]:
            if len(set(names)) != len(names):
                raise Refused(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
            nulls = sorted(n for n, v in configs.items() if v is None)
            if nulls:
                raise Refused(
                    ErrorCode.INVALID_REQUEST, f"Null value not supported for : {','.join(nulls)}"
                )
            return {n: v for n, v in configs.items() if v is not None}  # none is null by now

        responses.append(
            await _alter(broker, request, resource, replace_all, body["validate_only"])
        )
    return {"responses": responses}


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1)
async def incremental_alter_configs(
    broker: Broker, request: Request[IncrementalAlterConfigsRequest]
) -> IncrementalAlterConfigsResponse:
    """SET, DELETE, APPEND and SUBTRACT (the last two for list settings) on a resource's
    overrides; settings not named keep theirs."""
    body = request.body
    responses: list[Answer] = []
    for resource in body["resources"]:
        ops: Ops = [(c["name"], c["config_operation"], c["value"]) for c in resource["configs"]]
        if resource["resource_type"] == BROKER_LOGGER:
            responses.append(_alter_loggers(broker, request, resource, ops, body["validate_only"]))
            continue

        def apply_ops(
            current: dict[str, str],
            effective: Callable[[str], str | None],
            ops: Ops = ops,
            kind: int = resource["resource_type"],
        ) -> dict[str, str]:
            names = [name for name, _, _ in ops]
            if len(set(names)) != len(names):
                raise Refused(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
            layer = dict(current)
            for name, op, value in ops:
                if op == SET:
                    if value is None:
                        raise Refused(
                            ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}"
                        )
                    layer[name] = value
                elif op == DELETE:
                    layer.pop(name, None)
                elif op in (APPEND, SUBTRACT):
                    layer[name] = _list_op(_setting(kind, name), op, effective(name), value)
                else:
                    raise Refused(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op}")
            return layer

        responses.append(await _alter(broker, request, resource, apply_ops, body["validate_only"]))
    return {"responses": responses}


def _alter_loggers(
    broker: Broker,
    request: Request[IncrementalAlterConfigsRequest],
    resource: IncrementalAlterConfigsRequestAlterConfigsResource,
    ops: Ops,
    validate_only: bool,
) -> Answer:
    name = resource["resource_name"]
    response: Answer = {
        "resource_type": BROKER_LOGGER,
        "resource_name": name,
        "error_code": ErrorCode.NONE,
        "error_message": None,
    }
    code = refusal(broker, request, AclOperation.ALTER_CONFIGS, BROKER_LOGGER, name)
    if code is not None:
        return {**response, "error_code": code, "error_message": REFUSED_MESSAGES[code]}
    try:
        logger_resource(broker, name)
        broker_loggers.alter(ops, validate_only)
    except Refused as e:
        response.update({"error_code": e.code, "error_message": e.message})
    except broker_loggers.LoggerRefused as e:
        code = ErrorCode.INVALID_CONFIG if e.invalid_config else ErrorCode.INVALID_REQUEST
        response.update({"error_code": code, "error_message": e.message})
    else:
        if not validate_only:
            log.info("log levels changed: %s", ", ".join(f"{n}={v}" for n, _, v in ops))
    return response


def _setting(kind: int, name: str) -> Setting | None:
    table = {TOPIC: TOPIC_SETTINGS, BROKER: BROKER_SETTINGS, GROUP: GROUP_SETTINGS}.get(kind, {})
    return table.get(name)


def _list_op(setting: Setting | None, op: int, current: str | None, value: str | None) -> str:
    """Kafka's APPEND (add the items not there yet) and SUBTRACT (remove them), list settings
    only."""
    if setting is None or setting.type != ConfigType.LIST:
        verb = "append" if op == APPEND else "subtract"
        name = setting.name if setting else "unknown"
        raise Refused(
            ErrorCode.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: {name}"
        )
    items = [i.strip() for i in (current or "").split(",") if i.strip()]
    given = [i.strip() for i in (value or "").split(",") if i.strip()]
    if op == APPEND:
        return ",".join(items + [i for i in given if i not in items])
    return ",".join(i for i in items if i not in given)


async def _alter(
    broker: Broker,
    request: Request[AlterConfigsRequest] | Request[IncrementalAlterConfigsRequest],
    resource: Resource,
    change: Change,
    validate_only: bool,
) -> Answer:
    kind, name = resource["resource_type"], resource["resource_name"]
    response: Answer = {
        "resource_type": kind,
        "resource_name": name,
        "error_code": ErrorCode.NONE,
        "error_message": None,
    }
    code = refusal(broker, request, AclOperation.ALTER_CONFIGS, kind, name)
    if code is not None:
        return {**response, "error_code": code, "error_message": REFUSED_MESSAGES[code]}
    try:
        if kind == TOPIC:
            await _alter_topic(broker, name, change, validate_only)
        elif kind == BROKER:
            await _alter_broker(broker, name, change, validate_only)
        elif kind == GROUP:
            await _alter_group(broker, name, change, validate_only)
        else:
            raise Refused(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {kind}")
    except (Refused, TopicError) as e:
        response.update({"error_code": e.code, "error_message": e.message})
    except DynamicConfigRefused as e:
        response.update({"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(e)})
    except ConfigError as e:
        response.update({"error_code": ErrorCode.INVALID_CONFIG, "error_message": str(e)})
    except OSError as e:
        response.update(
            {
                "error_code": ErrorCode.KAFKA_STORAGE_ERROR,
                "error_message": f"Could not write the change: {e}",
            }
        )
    return response


async def _alter_topic(broker: Broker, name: str, change: Change, validate_only: bool) -> None:
    topic = broker.topics.get(name)
    if topic is None:
        raise Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
    configs = validate_configs(change(topic.configs, lambda n: broker.topics.config(topic, n)))
    if validate_only:
        return
    await broker.topics.set_configs(topic, configs)
    log.info("topic %s configs now %s", name, configs)


async def _alter_broker(broker: Broker, name: str, change: Change, validate_only: bool) -> None:
    per_broker = broker_resource(broker, name)
    dynamic = broker.dynamic_configs
    current = dynamic.broker if per_broker else dynamic.broker_default
    layer = change(current, lambda n: render(broker.settings[n]) if n in BROKER_SETTINGS else None)
    await dynamic.alter_broker(per_broker, layer, validate_only)


async def _alter_group(broker: Broker, name: str, change: Change, validate_only: bool) -> None:
    if not name:
        raise Refused(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
    dynamic = broker.dynamic_configs
    current = dynamic.groups.get(name, {})

    def effective(n: str) -> str | None:
        setting = GROUP_SETTINGS.get(n)
        return current.get(n) or (
            render(broker_default(setting, broker.settings)) if setting else None
        )

    await dynamic.alter_group(name, change(current, effective), validate_only)
