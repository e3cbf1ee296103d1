"""The ACL authorizer, with Kafka's StandardAuthorizer semantics, and the ACLs kept durably.

Enabled by `authorizer.class.name` (Kafka's class names). A check looks at the ACLs of one
resource name (a dict lookup), its wildcard "*" and the prefixed ACLs whose prefix starts the name
(one lookup per distinct prefix length): a DENY that matches wins, then an ALLOW; a resource with
ACLs none of which matches is denied; one with no ACLs at all follows
`allow.everyone.if.no.acl.found`. `super.users` are allowed everything. Nothing is cached across
ACL changes: the index is the ACL set.

The ACLs live in `acls.json` in the data dir, replaced atomically and fsynced before a change is
answered (as dynamic-configs.json), and are read at startup.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

import trio

from corral.config.settings import Settings
from corral.partitions.files import replace_durably
from corral.security.acls import (
    ALL_SUPPORTED_BITS,
    IMPLIES_DESCRIBE,
    IMPLIES_DESCRIBE_CONFIGS,
    SUPPORTED_OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
    host_matches,
)

log = logging.getLogger("corral.security.authorizer")

FILE = "acls.json"
# authorizer.class.name values that mean Kafka's ACL authorizer (KRaft's, and ZooKeeper-era's).
AUTHORIZER_CLASSES = (
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
)

DESCRIBE, DESCRIBE_CONFIGS, ALL = (
    AclOperation.DESCRIBE,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALL,
)
ALLOW, DENY = AclPermission.ALLOW, AclPermission.DENY

K = TypeVar("K")


def authorizer_for(settings: Settings, data_dir: Path) -> Authorizer | None:
    """The configured authorizer, or None when `authorizer.class.name` is empty (everything is
    allowed; the setting's check refused other classes). Raises OSError or ValueError for an
    unreadable acls.json."""
    if not settings["authorizer.class.name"]:
        return None
    super_users = {p for p in settings["super.users"].split(";") if p}
    return Authorizer(data_dir / FILE, super_users, settings["allow.everyone.if.no.acl.found"])


class Authorizer:
    def __init__(self, path: Path, super_users: set[str], allow_if_no_acl: bool):
        self.path = path
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self.acls: set[AclBinding] = set()
        # (resource type, name) -> literal ACLs, "*" included; resource type -> {prefix: ACLs}.
        self._literal: dict[tuple[int, str], list[AclBinding]] = {}
        self._prefixed: dict[int, dict[str, list[AclBinding]]] = {}
        # resource type -> the distinct lengths of its prefixes, for one lookup per length.
        self._prefix_lengths: dict[int, list[int]] = {}
        self._lock = trio.Lock()
        if path.exists():
            stored = json.loads(path.read_text())
            self._index(AclBinding(*fields) for fields in stored["acls"])
        log.info(
            "ACL authorizer on: %d ACL(s), super.users=%s, allow.everyone.if.no.acl.found=%s",
            len(self.acls),
            ",".join(sorted(self.super_users)) or "(none)",
            allow_if_no_acl,
        )

    # -------------------------------------------------------------------------------- checks

    def authorize(
        self, principal: str, host: str, operation: int, resource_type: int, name: str
    ) -> bool:
        """Whether `principal` from `host` may do `operation` on the literal resource."""
        if principal in self.super_users:
            return True
        found_acls = False
        allowed = False
        for acls in self._applicable(resource_type, name):
            found_acls = True
            for acl in acls:
                result = _result(acl, principal, host, operation)
                if result is DENY:
                    return False
                if result is ALLOW:
                    allowed = True
        if allowed:
            return True
        return self.allow_if_no_acl and not found_acls

    def _applicable(self, resource_type: int, name: str) -> Iterable[list[AclBinding]]:
        """The non-empty ACL lists whose pattern matches the resource name."""
        literal = self._literal
        acls = literal.get((resource_type, name))
        if acls:
            yield acls
        if name != WILDCARD:
            acls = literal.get((resource_type, WILDCARD))
            if acls:
                yield acls
        prefixed = self._prefixed.get(resource_type)
        if prefixed:
            for length in self._prefix_lengths[resource_type]:
                if length > len(name):
                    break
                acls = prefixed.get(name[:length])
                if acls:
                    yield acls

    def authorized_operations(
        self, principal: str, host: str, resource_type: int, name: str
    ) -> int:
        """The bit field of the resource type's supported operations the principal may do."""
        if principal in self.super_users:
            return ALL_SUPPORTED_BITS[resource_type]
        bits = 0
        for op in SUPPORTED_OPERATIONS[resource_type]:
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: int, resource_type: int
    ) -> bool:
        """Authorizer.authorizeByResourceType: whether some resource of the type may be the
        object of `operation` (an ALLOW not dominated by a DENY), e.g. WRITE on any topic."""
        # A made-up name first, so that super users and allow.everyone.if.no.acl.found count.
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        # pattern type (literal or prefixed: the only ones a stored ACL has) -> names.
        deny: dict[int, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        allow: dict[int, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        for acl in self.acls:
            if (
                acl.resource_type != resource_type
                or not host_matches(acl.host, host)
                or acl.principal not in (principal, WILDCARD_PRINCIPAL)
                or acl.operation not in (operation, ALL)
            ):
                continue
            if acl.permission == DENY:
                if acl.pattern_type == PatternType.LITERAL and acl.name == WILDCARD:
                    return False
                deny[acl.pattern_type].add(acl.name)
            elif acl.pattern_type == PatternType.LITERAL and acl.name == WILDCARD:
                return True
            else:
                allow[acl.pattern_type].add(acl.name)
        for pattern_type, names in allow.items():
            for name in names:
                if pattern_type == PatternType.LITERAL and name in deny[PatternType.LITERAL]:
                    continue
                if not any(name[:i] in deny[PatternType.PREFIXED] for i in range(1, len(name) + 1)):
                    return True
        return False

    # ---------------------------------------------------------------------------- changes

    def matching(self, acl_filter: AclFilter) -> list[AclBinding]:
        return sorted(acl for acl in self.acls if acl_filter.matches(acl))

    async def create(self, acls: list[AclBinding]) -> None:
        """Adds the ACLs (those present already are kept once), durably. Raises OSError."""
        async with self._lock:
            new = set(acls) - self.acls
            if not new:
                return
            await self._write(self.acls | new)
            self._index(new)
        log.info("ACLs added: %s", "; ".join(map(describe, sorted(new))))

    async def delete(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """Removes every ACL a filter matches, durably; per filter, the ACLs it matched (an ACL
        matched by two filters is listed under both, as Kafka does). Raises OSError."""
        async with self._lock:
            matched = [self.matching(f) for f in filters]
            gone = {acl for acls in matched for acl in acls}
            if gone:
                await self._write(self.acls - gone)
                self._unindex(gone)
        if gone:
            log.info("ACLs removed: %s", "; ".join(map(describe, sorted(gone))))
        return matched

    def _index(self, acls: Iterable[AclBinding]) -> None:
        for acl in acls:
            self.acls.add(acl)
            if acl.pattern_type == PatternType.LITERAL:
                self._literal.setdefault((acl.resource_type, acl.name), []).append(acl)
            else:
                self._prefixed.setdefault(acl.resource_type, {}).setdefault(acl.name, []).append(
                    acl
                )
        self._lengths()

    def _unindex(self, acls: set[AclBinding]) -> None:
        for acl in acls:
            self.acls.discard(acl)
            if acl.pattern_type == PatternType.LITERAL:
                _remove(self._literal, (acl.resource_type, acl.name), acl)
            else:
                _remove(self._prefixed[acl.resource_type], acl.name, acl)
        self._lengths()

    def _lengths(self) -> None:
        self._prefix_lengths = {
            rtype: sorted({len(p) for p in prefixes}) for rtype, prefixes in self._prefixed.items()
        }

    async def _write(self, acls: set[AclBinding]) -> None:
        text = json.dumps({"acls": [acl.as_json() for acl in sorted(acls)]}, indent=1)
        await trio.to_thread.run_sync(replace_durably, self.path, text)


def _remove(table: dict[K, list[AclBinding]], key: K, acl: AclBinding) -> None:
    """Takes `acl` out of an index, and its key once no ACL is left under it."""
    table[key].remove(acl)
    if not table[key]:
        del table[key]


def _result(acl: AclBinding, principal: str, host: str, operation: int) -> AclPermission | None:
    """StandardAuthorizerData.findResult: ALLOW or DENY when the ACL applies to the request,
    None when it does not (the resource already matched)."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return None
    if acl.host != WILDCARD and acl.host != host and not host_matches(acl.host, host):
        return None
    acl_op = acl.operation
    if acl_op != ALL and acl_op != operation:
        # Only an ALLOW implies DESCRIBE (DESCRIBE_CONFIGS): a DENY of READ does not deny DESCRIBE.
        if acl.permission != ALLOW:
            return None
        if operation == DESCRIBE:
            if acl_op not in IMPLIES_DESCRIBE:
                return None
        elif operation == DESCRIBE_CONFIGS:
            if acl_op not in IMPLIES_DESCRIBE_CONFIGS:
                return None
        else:
            return None
    return ALLOW if acl.permission == ALLOW else DENY


def describe(acl: AclBinding) -> str:
    """One ACL as kafka-acls prints it."""
    return (
        f"{ResourceType(acl.resource_type).name}:{PatternType(acl.pattern_type).name}:"
        f"{acl.name} {acl.principal} has {AclPermission(acl.permission).name} permission for "
        f"{AclOperation(acl.operation).name} from host {acl.host}"
    )
