"""Kafka's ACL model: bindings, the filters DescribeAcls and DeleteAcls match them with, and the
checks CreateAcls makes. Codes are the wire's (org.apache.kafka.common.acl.AclOperation,
AclPermissionType, resource.ResourceType, resource.PatternType)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from enum import IntEnum
from typing import NamedTuple


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


Op = AclOperation
# The one name of the CLUSTER resource (Resource.CLUSTER_NAME).
CLUSTER_NAME = "kafka-cluster"
# A literal resource name, host or principal that matches every one.
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"

# AclEntry.supportedOperations: what a resource type's authorized-operations bit field covers.
# Keyed by ResourceType, looked up with the wire's codes (ints).
SUPPORTED_OPERATIONS: dict[int, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        Op.READ,
        Op.WRITE,
        Op.CREATE,
        Op.DESCRIBE,
        Op.DELETE,
        Op.ALTER,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    ResourceType.CLUSTER: (
        Op.CREATE,
        Op.CLUSTER_ACTION,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
        Op.IDEMPOTENT_WRITE,
        Op.ALTER,
        Op.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE, Op.TWO_PHASE_COMMIT),
    ResourceType.DELEGATION_TOKEN: (Op.DESCRIBE,),
    ResourceType.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}


def operations_bits(operations: Iterable[int]) -> int:
    """Kafka's Utils.to32BitField of the operations' codes."""
    bits = 0
    for op in operations:
        bits |= 1 << op
    return bits


ALL_SUPPORTED_BITS: dict[int, int] = {
    rtype: operations_bits(ops) for rtype, ops in SUPPORTED_OPERATIONS.items()
}

# An ALLOW for one of these also allows DESCRIBE (DESCRIBE_CONFIGS), as in StandardAuthorizerData.
IMPLIES_DESCRIBE = frozenset((Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER))
IMPLIES_DESCRIBE_CONFIGS = frozenset((Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS))


class AclBinding(NamedTuple):
    """One ACL: a resource pattern and an access control entry. Fields hold wire codes."""

    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def as_json(self) -> list[int | str]:
        return list(self)


class AclFilter(NamedTuple):
    """AclBindingFilter: None (a null string) and ANY match everything; a MATCH pattern type
    matches the literal, wildcard and prefixed bindings that would apply to the name."""

    resource_type: int
    name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def matches(self, acl: AclBinding) -> bool:
        return self._pattern_matches(acl) and self._entry_matches(acl)

    def _pattern_matches(self, acl: AclBinding) -> bool:
        # ResourcePatternFilter.matches
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, acl.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, acl.pattern_type):
            return self.name == acl.name
        if acl.pattern_type == PatternType.LITERAL:
            return self.name == acl.name or acl.name == WILDCARD
        return self.name.startswith(acl.name)

    def _entry_matches(self, acl: AclBinding) -> bool:
        # AccessControlEntryFilter.matches
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != acl.operation:
            return False
        return self.permission in (AclPermission.ANY, acl.permission)


class AclRefused(Exception):
    """A binding CreateAcls refuses: INVALID_REQUEST with Kafka's message."""


class Unbuildable(Exception):
    """A creation Kafka cannot even make into an AclBinding (ANY where a concrete value is
    needed): its constructor throws, and the whole request fails with UNKNOWN_SERVER_ERROR."""


def has_unknown(
    *codes: int,
    enums: tuple[type[IntEnum], ...] = (ResourceType, PatternType, AclOperation, AclPermission),
) -> bool:
    """Whether a code is UNKNOWN or not one of its enum's (Kafka's fromCode maps those to
    UNKNOWN): such a request fails to parse in Kafka, which closes the connection."""
    return any(code == 0 or code not in enum._value2member_map_ for code, enum in zip(codes, enums))


def check_buildable(acl: AclBinding) -> None:
    """ResourcePattern's and AccessControlEntry's constructor checks."""
    if acl.resource_type == ResourceType.ANY:
        raise Unbuildable("resourceType must not be ANY")
    if acl.pattern_type in (PatternType.MATCH, PatternType.ANY):
        raise Unbuildable(f"patternType must not be {PatternType(acl.pattern_type).name}")
    if acl.operation == AclOperation.ANY:
        raise Unbuildable("operation must not be ANY")
    if acl.permission == AclPermission.ANY:
        raise Unbuildable("permissionType must not be ANY")


def check_new(acl: AclBinding) -> None:
    """AclApis.handleCreateAcls's checks, then AclControlManager.validateNewAcl's (what is left
    of them once the binding could be built): AclRefused with Kafka's message."""
    if acl.resource_type == ResourceType.CLUSTER and acl.name != CLUSTER_NAME:
        raise AclRefused(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not acl.name:
        raise AclRefused("Invalid empty resource name")
    if ":" not in acl.principal:
        raise AclRefused(
            f"Could not parse principal from `{acl.principal}` (no colon is present "
            "separating the principal type from the principal name)"
        )
    if not acl.host:
        raise AclRefused("Host pattern cannot be null or empty")
    if "/" in acl.host:
        try:
            ipaddress.ip_network(acl.host, strict=False)
        except ValueError as e:
            raise AclRefused(f"Invalid CIDR notation '{acl.host}': {e}") from None


def host_matches(acl_host: str, host: str) -> bool:
    """An ACL's host against the client's address: "*", the same address, or a CIDR range
    holding it (Kafka 4.4, KIP-1111)."""
    if acl_host == WILDCARD or acl_host == host:
        return True
    try:
        if "/" in acl_host:
            return ipaddress.ip_address(host) in ipaddress.ip_network(acl_host, strict=False)
        # The same address written differently (IPv6 "::1" as Java's "0:0:0:0:0:0:0:1").
        return ":" in host and ipaddress.ip_address(host) == ipaddress.ip_address(acl_host)
    except ValueError:
        return False


def principal_of(text: str) -> str:
    """A configured principal ("User:alice"), checked as SecurityUtils.parseKafkaPrincipal."""
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise ValueError(f"Invalid principal {text!r}: expected TYPE:NAME, e.g. User:alice")
    return text
