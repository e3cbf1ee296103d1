"""Security end to end with real clients: SCRAM over SASL_SSL (confluent-kafka, kafka-python,
aiokafka, Java), mTLS principals, ACLs enforced on groups and topics, refusals with Kafka's errors,
and credentials and ACLs across a restart.

One broker per module: PLAINTEXT (the admin's, User:ANONYMOUS is a super user), SASL_PLAINTEXT,
SASL_SSL, and SSL with client certificates required. alice may use topics and groups prefixed
`secure-`; bob may only describe topics (no group at all); the certificate of carol (tlscerts'
"alice" client cert) may create, write and read topic `mtls-only` and read group `mtls-`.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

import pytest
from checkout import JAVA
from confluent_kafka import Consumer, KafkaError, Producer
from kafka_ref import fetch as kafka_jars
from rawwire import RawClient
from scramkit import upsertion
from tlscerts import make_certs, refusal_errors, tls_settings

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# Wire codes (Kafka's AclOperation, ResourceType, PatternType, AclPermissionType).
ALL, READ, WRITE, CREATE, DESCRIBE = 2, 3, 4, 5, 8
TOPIC, GROUP = 2, 3
LITERAL, PREFIXED = 3, 4
ALLOW = 3
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
CREATE_ACLS, ALTER_SCRAM = 30, 51
GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED, SASL_AUTHENTICATION_FAILED = 30, 29, 58
PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret"}


def _settings(certs) -> dict[str, str]:
    return {
        "listeners": ",".join(
            f"{name}://127.0.0.1:0" for name in ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL")
        ),
        "listener.name.ssl.ssl.client.auth": "required",
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:ANONYMOUS",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
        **tls_settings(certs),
    }


def _acl(principal: str, resource_type: int, name: str, pattern: int, operation: int) -> dict:
    return {
        "resource_type": resource_type,
        "resource_name": name,
        "resource_pattern_type": pattern,
        "principal": principal,
        "host": "*",
        "operation": operation,
        "permission_type": ALLOW,
    }


def _admin_setup(port: int, carol: str) -> None:
    with RawClient(port) as admin:
        # Kafka alters a user once per request: alice's second mechanism in a request of its own.
        for upsertions in (
            [
                upsertion("alice", "SCRAM-SHA-256", PASSWORDS["alice"]),
                upsertion("bob", "SCRAM-SHA-256", PASSWORDS["bob"]),
            ],
            [upsertion("alice", "SCRAM-SHA-512", PASSWORDS["alice"])],
        ):
            scram = admin.call(ALTER_SCRAM, 0, {"deletions": [], "upsertions": upsertions})
            assert {r["error_code"] for r in scram["results"]} == {0}, scram
        created = admin.call(
            CREATE_ACLS,
            3,
            {
                "creations": [
                    _acl("User:alice", TOPIC, "secure-", PREFIXED, ALL),
                    _acl("User:alice", GROUP, "secure-", PREFIXED, READ),
                    _acl("User:bob", TOPIC, "secure-", PREFIXED, DESCRIBE),
                    _acl(carol, TOPIC, "mtls-only", LITERAL, WRITE),
                    _acl(carol, TOPIC, "mtls-only", LITERAL, CREATE),
                    _acl(carol, TOPIC, "mtls-only", LITERAL, READ),
                    _acl(carol, GROUP, "mtls-", PREFIXED, READ),
                ]
            },
        )
        assert {r["error_code"] for r in created["results"]} == {0}, created


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    from conftest import CorralProcess

    root = tmp_path_factory.mktemp("secure")
    certs = make_certs(root / "certs")
    broker = CorralProcess(root / "corral", _settings(certs))
    try:
        broker.start()
        _admin_setup(broker.ports["PLAINTEXT"], certs.alice.principal)
        yield broker, certs
    finally:
        if broker.alive():
            broker.proc.kill()
            broker.proc.wait()


def _address(broker, listener: str) -> str:
    return f"127.0.0.1:{broker.ports[listener]}"


def _confluent(
    broker, certs, user: str, password: str, mechanism: str = "SCRAM-SHA-256", **extra
) -> dict:
    return {
        "bootstrap.servers": _address(broker, "SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(certs.ca),
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        **extra,
    }


def _consume(consumer: Consumer, count: int, seconds: float = 30) -> list[bytes]:
    got, deadline = [], time.monotonic() + seconds
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error() is not None:
            raise AssertionError(message.error())
        got.append(message.value())
    return got


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_confluent_kafka_over_sasl_ssl_with_scram(secure, mechanism):
    broker, certs = secure
    topic, group = f"secure-confluent-{mechanism[-3:]}", f"secure-confluent-{mechanism[-3:]}"
    producer = Producer(_confluent(broker, certs, "alice", PASSWORDS["alice"], mechanism))
    for i in range(20):
        producer.produce(topic, f"c{i}".encode())
    assert producer.flush(20) == 0
    consumer = Consumer(
        _confluent(
            broker,
            certs,
            "alice",
            PASSWORDS["alice"],
            mechanism,
            **{"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False},
        )
    )
    consumer.subscribe([topic])
    got = _consume(consumer, 20)
    committed = consumer.commit(asynchronous=False)
    consumer.close()
    assert sorted(got) == sorted(f"c{i}".encode() for i in range(20))
    # A partition the producer left empty may not have a position yet when the 20th message
    # arrives (its offset reset still in flight): librdkafka lists it as -1001 and commits nothing.
    assert sum(tp.offset for tp in committed if tp.offset >= 0) == 20


def test_kafka_python_over_sasl_ssl_with_scram(secure):
    from kafka import KafkaConsumer, KafkaProducer

    broker, certs = secure
    sasl = {
        "bootstrap_servers": _address(broker, "SASL_SSL"),
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(certs.ca),
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": PASSWORDS["alice"],
    }
    producer = KafkaProducer(**sasl)
    for i in range(10):
        producer.send("secure-kafka-python", f"k{i}".encode())
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(
        "secure-kafka-python",
        group_id="secure-kafka-python",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=20000,
        **sasl,
    )
    got = []
    for message in consumer:
        got.append(message.value)
        if len(got) == 10:
            break
    consumer.commit()
    consumer.close()
    assert sorted(got) == sorted(f"k{i}".encode() for i in range(10))


def test_aiokafka_over_sasl_ssl_with_scram(secure):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    broker, certs = secure

    async def run() -> list[bytes]:
        sasl = {
            "bootstrap_servers": _address(broker, "SASL_SSL"),
            "security_protocol": "SASL_SSL",
            "ssl_context": create_ssl_context(cafile=str(certs.ca)),
            "sasl_mechanism": "SCRAM-SHA-256",
            "sasl_plain_username": "alice",
            "sasl_plain_password": PASSWORDS["alice"],
        }
        producer = AIOKafkaProducer(**sasl)
        await producer.start()
        for i in range(10):
            await producer.send_and_wait("secure-aiokafka", f"a{i}".encode())
        await producer.stop()
        consumer = AIOKafkaConsumer(
            "secure-aiokafka",
            group_id="secure-aiokafka",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **sasl,
        )
        await consumer.start()
        got = []
        try:
            async with asyncio.timeout(30):
                async for message in consumer:
                    got.append(message.value)
                    if len(got) == 10:
                        break
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    assert sorted(asyncio.run(run())) == sorted(f"a{i}".encode() for i in range(10))


def _java(
    broker,
    properties: dict[str, str],
    tmp_path: Path,
    topic: str,
    group: str,
    listener: str = "SASL_SSL",
) -> dict:
    config = tmp_path / f"{topic}.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
    program = JAVA / "SecureClients.java"
    run = subprocess.run(
        [
            "java",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            f"{kafka_jars()}/*",
            str(program),
            _address(broker, listener),
            str(config),
            topic,
            group,
            "30",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.stdout.strip(), run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def _java_scram(certs, user: str, password: str) -> dict[str, str]:
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
        f'required username="{user}" password="{password}";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
    }


def test_java_client_over_sasl_ssl_with_scram_and_its_refusals(secure, tmp_path):
    broker, certs = secure
    good = _java(
        broker,
        _java_scram(certs, "alice", PASSWORDS["alice"]),
        tmp_path,
        "secure-java",
        "secure-java",
    )
    assert good == {"ok": True, "consumed": 30, "committed": 30}
    wrong = _java(
        broker, _java_scram(certs, "alice", "wrong"), tmp_path, "secure-java2", "secure-java2"
    )
    assert wrong["ok"] is False and "SaslAuthenticationException" in wrong["error"], wrong
    unknown = _java(
        broker, _java_scram(certs, "nobody", "x"), tmp_path, "secure-java3", "secure-java3"
    )
    assert unknown["ok"] is False and "SaslAuthenticationException" in unknown["error"], unknown


def test_java_client_over_mtls_is_its_certificates_principal(secure, tmp_path):
    """The ACLs name the certificate's subject: that principal produces, consumes and commits on
    its topic and group; another certificate of the same CA is refused on the same topic."""
    broker, certs = secure
    base = {
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        "ssl.keystore.type": "PEM",
    }
    good = _java(
        broker,
        base | {"ssl.keystore.location": str(certs.alice.both)},
        tmp_path,
        "mtls-only",
        "mtls-java",
        listener="SSL",
    )
    assert good == {"ok": True, "consumed": 30, "committed": 30}
    other = _java(
        broker,
        base | {"ssl.keystore.location": str(certs.bob.both)},
        tmp_path,
        "mtls-only",
        "mtls-java",
        listener="SSL",
    )
    assert other["ok"] is False and "TopicAuthorizationException" in other["error"], other


@pytest.mark.parametrize("user, password", [("alice", "wrong"), ("mallory", "anything")])
def test_wrong_password_and_unknown_user_fail_authentication(secure, user, password):
    broker, certs = secure
    errors = refusal_errors(_confluent(broker, certs, user, password), "secure-never")
    codes = {e.code() for e in errors}
    assert KafkaError._AUTHENTICATION in codes, errors
    assert any(
        "Authentication failed during authentication due to invalid credentials" in e.str()
        for e in errors
    ), errors


class SaslRaw(RawClient):
    """A raw client authenticated with PLAIN on the SASL_PLAINTEXT listener."""

    def __init__(self, port: int, user: str, password: str):
        super().__init__(port)
        handshake = self.call(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert handshake["error_code"] == 0, handshake
        token = f"\0{user}\0{password}".encode()
        answer = self.call(SASL_AUTHENTICATE, 2, {"auth_bytes": token})
        assert answer["error_code"] == 0, answer


def test_without_group_read_a_principal_cannot_join_see_or_leave_a_group(secure):
    """alice's consumer is in group secure-members; bob, authenticated but without any GROUP ACL,
    gets GROUP_AUTHORIZATION_FAILED from his own consumer, from DescribeGroups (no member ids
    leak) and from LeaveGroup naming alice's member; alice's member stays."""
    broker, certs = secure
    producer = Producer(_confluent(broker, certs, "alice", PASSWORDS["alice"]))
    producer.produce("secure-members-topic", b"x")
    assert producer.flush(20) == 0
    alice = Consumer(
        _confluent(
            broker,
            certs,
            "alice",
            PASSWORDS["alice"],
            **{"group.id": "secure-members", "auto.offset.reset": "earliest"},
        )
    )
    alice.subscribe(["secure-members-topic"])
    deadline = time.monotonic() + 30
    while not alice.assignment() and time.monotonic() < deadline:
        alice.poll(0.2)
    assert alice.assignment()
    port = broker.ports["SASL_PLAINTEXT"]
    with SaslRaw(port, "alice", PASSWORDS["alice"]) as as_alice:
        described = as_alice.call(
            15, 5, {"groups": ["secure-members"], "include_authorized_operations": True}
        )
    [group] = described["groups"]
    assert group["error_code"] == 0 and len(group["members"]) == 1
    member_id = group["members"][0]["member_id"]

    bob = Consumer(
        _confluent(
            broker,
            certs,
            "bob",
            PASSWORDS["bob"],
            **{"group.id": "secure-members", "auto.offset.reset": "earliest"},
        )
    )
    bob.subscribe(["secure-members-topic"])
    errors = []
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        message = bob.poll(0.5)
        if message is not None and message.error() is not None:
            errors.append(message.error())
    bob.close()
    assert errors and errors[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED, errors

    with SaslRaw(port, "bob", PASSWORDS["bob"]) as as_bob:
        described = as_bob.call(
            15, 5, {"groups": ["secure-members"], "include_authorized_operations": True}
        )
        [seen] = described["groups"]
        assert seen["error_code"] == GROUP_AUTHORIZATION_FAILED and seen["members"] == []
        left = as_bob.call(
            13,
            5,
            {
                "group_id": "secure-members",
                "members": [{"member_id": member_id, "group_instance_id": None, "reason": None}],
            },
        )
        assert left["error_code"] == GROUP_AUTHORIZATION_FAILED
    with SaslRaw(port, "alice", PASSWORDS["alice"]) as as_alice:
        [group] = as_alice.call(
            15, 5, {"groups": ["secure-members"], "include_authorized_operations": False}
        )["groups"]
    assert [m["member_id"] for m in group["members"]] == [member_id]
    alice.close()


def test_credentials_and_acls_survive_a_restart(tmp_path):
    from conftest import CorralProcess

    certs = make_certs(tmp_path / "certs")
    broker = CorralProcess(tmp_path / "corral", _settings(certs)).start()
    try:
        _admin_setup(broker.ports["PLAINTEXT"], certs.alice.principal)
        broker.restart()
        producer = Producer(_confluent(broker, certs, "alice", PASSWORDS["alice"]))
        producer.produce("secure-restart", b"after")
        assert producer.flush(20) == 0
        reports = []
        denied = Producer(
            _confluent(
                broker,
                certs,
                "bob",
                PASSWORDS["bob"],
                **{"error_cb": lambda _: None, "log_level": 0, "message.timeout.ms": 5000},
            )
        )
        denied.produce("secure-restart", b"never", on_delivery=lambda err, _: reports.append(err))
        denied.flush(10)
        assert [e.code() for e in reports] == [KafkaError.TOPIC_AUTHORIZATION_FAILED], reports
    finally:
        broker.kill()
