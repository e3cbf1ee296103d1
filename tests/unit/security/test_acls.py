"""The ACL authorizer's semantics, in process: Kafka's StandardAuthorizer rules (deny wins, ALL,
implied DESCRIBE and DESCRIBE_CONFIGS, literal, wildcard and prefixed patterns, principal and
host wildcards, CIDR hosts, super users, allow.everyone.if.no.acl.found), authorizeByResourceType,
the filters of DescribeAcls and DeleteAcls, CreateAcls' checks, and durability of acls.json."""

from __future__ import annotations

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.config.settings import ConfigError, Settings
from corral.security.acls import (
    AclBinding,
    AclFilter,
    AclPermission,
    AclRefused,
    PatternType,
    ResourceType,
    Unbuildable,
    check_buildable,
    check_new,
    has_unknown,
)
from corral.security.acls import AclOperation as Op
from corral.security.authorizer import FILE, Authorizer, authorizer_for

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermission.ALLOW, AclPermission.DENY
ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.7"


def acl(
    name="orders", op=Op.READ, perm=ALLOW, principal=ALICE, host="*", rtype=TOPIC, pattern=LITERAL
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def authorizer(tmp_path, acls=(), super_users=(), allow_if_no_acl=False) -> Authorizer:
    auth = Authorizer(tmp_path / FILE, set(super_users), allow_if_no_acl)
    auth._index(acls)
    return auth


# (ACLs, principal, host, operation, resource type, name, allowed)
CASES = [
    ([], ALICE, HOST, Op.READ, TOPIC, "orders", False),
    ([acl()], ALICE, HOST, Op.READ, TOPIC, "orders", True),
    ([acl()], BOB, HOST, Op.READ, TOPIC, "orders", False),
    ([acl()], ALICE, HOST, Op.WRITE, TOPIC, "orders", False),
    ([acl()], ALICE, HOST, Op.READ, TOPIC, "orders2", False),
    ([acl()], ALICE, HOST, Op.READ, GROUP, "orders", False),
    # DENY wins, whatever pattern either comes from.
    ([acl(), acl(perm=DENY)], ALICE, HOST, Op.READ, TOPIC, "orders", False),
    (
        [acl(), acl("ord", pattern=PREFIXED, perm=DENY)],
        ALICE,
        HOST,
        Op.READ,
        TOPIC,
        "orders",
        False,
    ),
    (
        [acl(), acl("*", perm=DENY, principal="User:*")],
        ALICE,
        HOST,
        Op.READ,
        TOPIC,
        "orders",
        False,
    ),
    (
        [acl("*", op=Op.ALL), acl(op=Op.ALL, perm=DENY)],
        ALICE,
        HOST,
        Op.WRITE,
        TOPIC,
        "orders",
        False,
    ),
    # ALL allows and denies every operation.
    ([acl(op=Op.ALL)], ALICE, HOST, Op.DELETE, TOPIC, "orders", True),
    ([acl(op=Op.ALL), acl(op=Op.ALL, perm=DENY)], ALICE, HOST, Op.DESCRIBE, TOPIC, "orders", False),
    # DESCRIBE is implied by an ALLOW of READ, WRITE, DELETE or ALTER; not by a DENY of them.
    ([acl(op=Op.WRITE)], ALICE, HOST, Op.DESCRIBE, TOPIC, "orders", True),
    ([acl(op=Op.ALTER)], ALICE, HOST, Op.DESCRIBE, TOPIC, "orders", True),
    ([acl(op=Op.CREATE)], ALICE, HOST, Op.DESCRIBE, TOPIC, "orders", False),
    (
        [acl(op=Op.DESCRIBE), acl(op=Op.READ, perm=DENY)],
        ALICE,
        HOST,
        Op.DESCRIBE,
        TOPIC,
        "orders",
        True,
    ),
    ([acl(op=Op.DESCRIBE)], ALICE, HOST, Op.READ, TOPIC, "orders", False),
    # DESCRIBE_CONFIGS is implied by ALTER_CONFIGS.
    ([acl(op=Op.ALTER_CONFIGS)], ALICE, HOST, Op.DESCRIBE_CONFIGS, TOPIC, "orders", True),
    ([acl(op=Op.DESCRIBE_CONFIGS)], ALICE, HOST, Op.ALTER_CONFIGS, TOPIC, "orders", False),
    # The literal name "*" matches every resource of its type.
    ([acl("*")], ALICE, HOST, Op.READ, TOPIC, "anything", True),
    # Prefixed patterns match names they start; literal ones only their own name.
    ([acl("ord", pattern=PREFIXED)], ALICE, HOST, Op.READ, TOPIC, "orders", True),
    ([acl("ord", pattern=PREFIXED)], ALICE, HOST, Op.READ, TOPIC, "or", False),
    ([acl("ord")], ALICE, HOST, Op.READ, TOPIC, "orders", False),
    ([acl("orders-", pattern=PREFIXED)], ALICE, HOST, Op.READ, TOPIC, "orders", False),
    # The principal and host wildcards, exact hosts and CIDR ranges.
    ([acl(principal="User:*")], BOB, HOST, Op.READ, TOPIC, "orders", True),
    ([acl(host=HOST)], ALICE, HOST, Op.READ, TOPIC, "orders", True),
    ([acl(host="10.0.0.8")], ALICE, HOST, Op.READ, TOPIC, "orders", False),
    ([acl(host="10.0.0.0/24")], ALICE, HOST, Op.READ, TOPIC, "orders", True),
    ([acl(host="10.0.1.0/24")], ALICE, HOST, Op.READ, TOPIC, "orders", False),
    ([acl(host="0:0:0:0:0:0:0:1")], ALICE, "::1", Op.READ, TOPIC, "orders", True),
    # A resource with ACLs, none of which applies, is denied even with allow.everyone.
    ([acl(principal=BOB)], ALICE, HOST, Op.READ, TOPIC, "orders", False),
]


@pytest.mark.parametrize("acls, principal, host, op, rtype, name, expected", CASES)
def test_kafka_rules(tmp_path, acls, principal, host, op, rtype, name, expected):
    assert authorizer(tmp_path, acls).authorize(principal, host, op, rtype, name) is expected


def test_allow_everyone_if_no_acl_found_and_super_users(tmp_path):
    open_auth = authorizer(tmp_path, [acl(principal=BOB)], allow_if_no_acl=True)
    assert open_auth.authorize(ALICE, HOST, Op.READ, TOPIC, "other")
    assert not open_auth.authorize(ALICE, HOST, Op.READ, TOPIC, "orders")
    supers = authorizer(
        tmp_path, [acl(op=Op.ALL, perm=DENY, principal="User:*")], super_users={"User:admin"}
    )
    assert supers.authorize("User:admin", HOST, Op.DELETE, TOPIC, "orders")
    assert not supers.authorize(ALICE, HOST, Op.DESCRIBE, TOPIC, "orders")


def test_authorized_operations_are_the_supported_ones_allowed(tmp_path):
    auth = authorizer(tmp_path, [acl("g", op=Op.READ, rtype=GROUP)], super_users={"User:admin"})
    bits = auth.authorized_operations(ALICE, HOST, GROUP, "g")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)
    everything = auth.authorized_operations("User:admin", HOST, GROUP, "g")
    assert everything == sum(
        1 << op for op in (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)
    )


@pytest.mark.parametrize(
    "acls, expected",
    [
        ([], False),
        ([acl("t1", op=Op.WRITE)], True),
        ([acl("t1", op=Op.WRITE), acl("t", op=Op.WRITE, perm=DENY, pattern=PREFIXED)], False),
        ([acl("t1", op=Op.WRITE), acl("t1", op=Op.WRITE, perm=DENY)], False),
        ([acl("t", op=Op.WRITE, pattern=PREFIXED), acl("t1", op=Op.WRITE, perm=DENY)], True),
        ([acl("*", op=Op.ALL)], True),
        ([acl("t1", op=Op.WRITE), acl("*", op=Op.WRITE, perm=DENY)], False),
        ([acl("t1", op=Op.READ)], False),
        ([acl("t1", op=Op.WRITE, principal=BOB)], False),
    ],
)
def test_authorize_by_resource_type(tmp_path, acls, expected):
    """InitProducerId's "WRITE on some topic" (Authorizer.authorizeByResourceType)."""
    assert (
        authorizer(tmp_path, acls).authorize_by_resource_type(ALICE, HOST, Op.WRITE, TOPIC)
        is expected
    )


def f(
    rtype=ResourceType.ANY,
    name=None,
    pattern=PatternType.ANY,
    principal=None,
    host=None,
    op=Op.ANY,
    perm=AclPermission.ANY,
) -> AclFilter:
    return AclFilter(rtype, name, pattern, principal, host, op, perm)


@pytest.mark.parametrize(
    "acl_filter, expected",
    [
        (f(), {"lit", "star", "pre"}),
        (f(TOPIC, "orders", LITERAL), {"lit"}),
        (f(TOPIC, "orders", PatternType.ANY), {"lit", "pre"}),
        (f(TOPIC, "orders", PatternType.MATCH), {"lit", "star", "pre"}),
        (f(TOPIC, "ord", PatternType.MATCH), {"star"}),
        (f(TOPIC, "ord", PREFIXED), set()),
        (f(TOPIC, "orders", PREFIXED), {"pre"}),
        (f(GROUP), set()),
        (f(principal=BOB), {"star"}),
        (f(op=Op.WRITE), {"pre"}),
        (f(perm=DENY), {"star"}),
        (f(host="1.2.3.4"), {"pre"}),
    ],
)
def test_filters_match_as_kafka_filters(acl_filter, expected):
    acls = {
        "lit": acl(),
        "star": acl("*", principal=BOB, perm=DENY),
        "pre": acl("orders", pattern=PREFIXED, op=Op.WRITE, host="1.2.3.4"),
    }
    assert {name for name, a in acls.items() if acl_filter.matches(a)} == expected


@settings(max_examples=300, deadline=None)
@given(
    acls=st.lists(
        st.builds(
            acl,
            name=st.sampled_from(["a", "ab", "abc", "b", "*"]),
            op=st.sampled_from([Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS]),
            perm=st.sampled_from([ALLOW, DENY]),
            principal=st.sampled_from([ALICE, BOB, "User:*"]),
            host=st.sampled_from(["*", HOST, "10.0.0.0/8", "1.1.1.1"]),
            pattern=st.sampled_from([LITERAL, PREFIXED]),
        ),
        max_size=8,
    ),
    name=st.sampled_from(["a", "ab", "abc", "abcd", "b", "c"]),
    op=st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.DELETE]),
    allow_if_no_acl=st.booleans(),
)
def test_the_index_answers_as_a_scan_of_every_acl(
    tmp_path_factory, acls, name, op, allow_if_no_acl
):
    """The indexed check equals Kafka's rule applied to every ACL whose pattern matches the
    name (the MATCH filter): deny wins, then allow, then denied when the resource has ACLs,
    else the default."""
    auth = authorizer(tmp_path_factory.getbasetemp(), acls, allow_if_no_acl=allow_if_no_acl)
    matching = [a for a in set(acls) if f(TOPIC, name, PatternType.MATCH).matches(a)]
    applies = [
        a
        for a in matching
        if a.principal in (ALICE, "User:*")
        and (a.host in ("*", HOST) or a.host == "10.0.0.0/8")
        and (
            a.operation in (op, Op.ALL)
            or (
                a.permission == ALLOW
                and (
                    (op == Op.DESCRIBE and a.operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER))
                    or (op == Op.DESCRIBE_CONFIGS and a.operation == Op.ALTER_CONFIGS)
                )
            )
        )
    ]
    if any(a.permission == DENY for a in applies):
        expected = False
    elif applies:
        expected = True
    else:
        expected = allow_if_no_acl and not matching
    assert auth.authorize(ALICE, HOST, op, TOPIC, name) is expected


@pytest.mark.parametrize(
    "binding, message",
    [
        (
            acl("other", rtype=CLUSTER),
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ),
        (acl(""), "Invalid empty resource name"),
        (
            acl(principal="alice"),
            "Could not parse principal from `alice` (no colon is present "
            "separating the principal type from the principal name)",
        ),
        (acl(host=""), "Host pattern cannot be null or empty"),
        (acl(host="10.0.0.0/33"), "Invalid CIDR notation '10.0.0.0/33'"),
    ],
)
def test_create_checks(binding, message):
    with pytest.raises(AclRefused) as refused:
        check_new(binding)
    assert str(refused.value).startswith(message)


def test_unbuildable_and_unknown_codes():
    for binding in (
        acl(rtype=ResourceType.ANY),
        acl(pattern=PatternType.MATCH),
        acl(op=Op.ANY),
        acl(perm=AclPermission.ANY),
    ):
        with pytest.raises(Unbuildable):
            check_buildable(binding)
    check_buildable(acl())
    assert has_unknown(0, LITERAL, Op.READ, ALLOW) and has_unknown(TOPIC, 9, Op.READ, ALLOW)
    assert has_unknown(TOPIC, LITERAL, 16, ALLOW) and not has_unknown(
        TOPIC, LITERAL, Op.READ, ALLOW
    )


def test_acls_are_durable_and_deletions_report_per_filter(tmp_path):
    settings = Settings(
        {
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin;User:ops",
        }
    )
    auth = authorizer_for(settings, tmp_path)
    assert auth.super_users == {"User:admin", "User:ops"} and not auth.allow_if_no_acl

    async def change():
        await auth.create([acl(), acl(), acl("g", rtype=GROUP)])
        assert len(auth.acls) == 2
        matched = await auth.delete([f(TOPIC), f(principal=ALICE)])
        assert matched == [[acl()], sorted([acl(), acl("g", rtype=GROUP)])]

    trio.run(change)
    reloaded = authorizer_for(settings, tmp_path)
    assert reloaded.acls == set() and not reloaded.authorize(ALICE, HOST, Op.READ, TOPIC, "orders")
    trio.run(reloaded.create, [acl("ord", pattern=PREFIXED)])
    assert authorizer_for(settings, tmp_path).authorize(ALICE, HOST, Op.READ, TOPIC, "orders")


def test_settings():
    assert authorizer_for(Settings(), None) is None
    for name, value in [
        ("authorizer.class.name", "com.example.MyAuthorizer"),
        ("super.users", "alice"),
        ("allow.everyone.if.no.acl.found", "maybe"),
    ]:
        with pytest.raises(ConfigError):
            Settings({name: value})
    assert (
        Settings({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})[
            "authorizer.class.name"
        ]
        == "kafka.security.authorizer.AclAuthorizer"
    )
