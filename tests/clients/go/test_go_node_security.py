"""franz-go, sarama and kafkajs over SASL_SSL with SCRAM against a corral with ACLs: produce,
group consume and commit with good credentials; a wrong password and a group the user may not
read are refused with the errors each client reports for Kafka's codes.

One broker per module: PLAINTEXT (the admin's, User:ANONYMOUS is a super user) and SASL_SSL.
gopher may use topics and groups prefixed `sec-`; mole may describe those topics only.
"""

from __future__ import annotations

import pytest
from cgkit import FAST_GROUPS, MemberProcess, members_of, stop_processes, wait_until
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from ownership import all_partitions, check_ownership
from polyglot import CLIENTS, produce
from rawwire import RawClient
from scramkit import upsertion
from tlscerts import make_certs, tls_settings

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ALL, READ, DESCRIBE = 2, 3, 8
TOPIC, GROUP = 2, 3
PREFIXED, ALLOW = 4, 3
CREATE_ACLS, ALTER_SCRAM = 30, 51
PASSWORDS = {"gopher": "gopher-secret", "mole": "mole-secret"}
# How each client words GROUP_AUTHORIZATION_FAILED (30): franz-go names the code, sarama and
# kafkajs (in its log) print Kafka's message for it.
GROUP_REFUSED = (
    "group_authorization_failed",
    "not authorized to access this group",
    "not authorized to access group",
)


def _acl(principal: str, resource_type: int, operation: int) -> dict:
    return {
        "resource_type": resource_type,
        "resource_name": "sec-",
        "resource_pattern_type": PREFIXED,
        "principal": principal,
        "host": "*",
        "operation": operation,
        "permission_type": ALLOW,
    }


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    from conftest import CorralProcess

    root = tmp_path_factory.mktemp("polyglot-secure")
    certs = make_certs(root / "certs")
    broker = CorralProcess(
        root / "corral",
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "super.users": "User:ANONYMOUS",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
            **FAST_GROUPS,
            **tls_settings(certs),
        },
    )
    broker.start()
    with RawClient(broker.ports["PLAINTEXT"]) as admin:
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):  # one alteration per user and request
            scram = admin.call(
                ALTER_SCRAM,
                0,
                {
                    "deletions": [],
                    "upsertions": [
                        upsertion(user, mechanism, password) for user, password in PASSWORDS.items()
                    ],
                },
            )
            assert {r["error_code"] for r in scram["results"]} == {0}, scram
        created = admin.call(
            CREATE_ACLS,
            3,
            {
                "creations": [
                    _acl("User:gopher", TOPIC, ALL),
                    _acl("User:gopher", GROUP, READ),
                    _acl("User:mole", TOPIC, DESCRIBE),
                    _acl("User:mole", TOPIC, READ),
                ]
            },
        )
        assert {r["error_code"] for r in created["results"]} == {0}, created
    yield broker, certs
    broker.stop()


def _security(
    broker, certs, user: str, password: str, mechanism: str, handshake_v0: bool = False
) -> dict:
    return {
        "bootstrap": f"127.0.0.1:{broker.ports['SASL_SSL']}",
        "tls": {"ca": str(certs.ca)},
        "sasl": {
            "mechanism": mechanism,
            "user": user,
            "password": password,
            "handshake_v0": handshake_v0,
        },
    }


def _plain_admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.ports['PLAINTEXT']}"})


# sarama's SASLHandshakeV0: Kafka's flow before KIP-152, bare SASL tokens after the handshake.
V0 = [
    pytest.param("sarama", "SCRAM-SHA-512", True, id="sarama-v0-SCRAM-SHA-512"),
    pytest.param("sarama", "PLAIN", True, id="sarama-v0-PLAIN"),
]


@pytest.mark.parametrize(
    "client, mechanism, handshake_v0",
    [*((c, m, False) for c in CLIENTS for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")), *V0],
)
def test_scram_over_sasl_ssl_end_to_end(secure, client, mechanism, handshake_v0):
    broker, certs = secure
    topic = group = f"sec-{client}-{mechanism.lower()}{'-v0' if handshake_v0 else ''}"
    admin = _plain_admin(broker)
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(timeout=10)
    conf = _security(broker, certs, "gopher", PASSWORDS["gopher"], mechanism, handshake_v0)
    assert produce(client, {**conf, "topic": topic, "count": 40}) == {"produced": 40}
    process = MemberProcess(
        client,
        conf["bootstrap"],
        group,
        ["m1", "m2"],
        topics=[topic],
        protocol="classic",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        tls=conf["tls"],
        sasl=conf["sasl"],
    )
    try:
        members = members_of([process])
        wait_until(
            lambda: (
                len({r for m in members for r in m.records}) == 40
                and sorted(tp for m in members for tp in m.owned)
                == sorted(all_partitions({topic: 4}))
            ),
            40,
            "40 records consumed over SASL_SSL by a group owning all 4 partitions",
        )
        assert check_ownership(members) > 0
        assert not [e for m in members for e in m.errors], [m.errors for m in members]
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(4)])
        offsets = admin.list_consumer_group_offsets([request])[group].result(timeout=10)
        assert sum(tp.offset for tp in offsets.topic_partitions) == 40
    finally:
        process.close_all()
        stop_processes([process])


@pytest.mark.parametrize("client", CLIENTS)
def test_wrong_password_is_refused(secure, client):
    broker, certs = secure
    conf = _security(broker, certs, "gopher", "not-the-password", "SCRAM-SHA-512")
    answer = produce(client, {**conf, "topic": "sec-refused", "count": 1}, timeout=120)
    assert "error" in answer, answer
    text = answer["error"].lower()
    assert "sasl" in text and "auth" in text, answer


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_wrong_password_is_refused_after_a_v0_handshake(secure, mechanism):
    """A refused bare token is a closed connection (Kafka's answer before KIP-152): sarama
    reports the client out of brokers, and corral logs the failure."""
    broker, certs = secure
    logged = (
        "Invalid username or password"
        if mechanism == "PLAIN"
        else f"invalid credentials with SASL mechanism {mechanism}"
    )
    before = broker.log().count(logged)
    conf = _security(broker, certs, "gopher", "not-the-password", mechanism, handshake_v0=True)
    answer = produce("sarama", {**conf, "topic": "sec-refused", "count": 1}, timeout=120)
    assert "error" in answer, answer
    assert "run out of available brokers" in answer["error"], answer
    wait_until(lambda: broker.log().count(logged) > before, 10, "the refusal logged")


@pytest.mark.parametrize("client", CLIENTS)
def test_group_without_read_acl_is_refused(secure, client):
    broker, certs = secure
    topic = f"sec-noread-{client}"
    admin = _plain_admin(broker)
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(timeout=10)
    conf = _security(broker, certs, "mole", PASSWORDS["mole"], "SCRAM-SHA-256")
    process = MemberProcess(
        client,
        conf["bootstrap"],
        f"sec-noread-{client}",
        ["m"],
        topics=[topic],
        protocol="classic",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        tls=conf["tls"],
        sasl=conf["sasl"],
    )
    try:
        member = process["m"]

        def refused() -> bool:
            # kafkajs throws "Failed to find group coordinator" and only logs Kafka's reason.
            seen = [*member.errors, process.log_tail(200)] if client == "kafkajs" else member.errors
            return any(refused in e.lower() for e in seen for refused in GROUP_REFUSED)

        try:
            wait_until(refused, 30, f"{client} reporting the group refused")
        except AssertionError as e:
            raise AssertionError(f"{e} errors: {member.errors}\n{process.log_tail()}") from None
        assert not member.owned
    finally:
        stop_processes([process])
