"""SASL with real clients over SASL_PLAINTEXT: credentials made with the admin clients
(AlterUserScramCredentials over PLAINTEXT), then confluent-kafka, kafka-python and aiokafka with
SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN produce, consume in a group and commit; a wrong password
and an unknown user are refused with SASL_AUTHENTICATION_FAILED; sessions end and are renewed
(connections.max.reauth.ms)."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from conftest import CorralProcess
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import ScramMechanism as KpScramMechanism
from kafka.admin import UserScramCredentialUpsertion as KpUpsertion
from kafka.errors import KafkaError as KpKafkaError
from kafka_java import CONFIG_COMMAND, run_tool
from rawwire import RawClient, closed_within
from scramkit import ScramClient, upsertion

MECHANISMS = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]
SETTINGS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": ",".join(MECHANISMS),
    "group.initial.rebalance.delay.ms": "0",
}
GENERIC = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"
)
PLAIN_REFUSED = "Authentication failed: Invalid username or password"
COUNT = 10


def start(tmp_path_factory, name: str, **settings) -> CorralProcess:
    return CorralProcess(tmp_path_factory.mktemp(name) / "corral", {**SETTINGS, **settings}).start()


def debug_sasl(broker: CorralProcess) -> None:
    """corral.security.sasl at DEBUG (broker-loggers), so that successful authentications are
    logged."""
    body = {
        "validate_only": False,
        "resources": [
            {
                "resource_type": 8,
                "resource_name": "1",
                "configs": [
                    {"name": "corral.security.sasl", "config_operation": 0, "value": "DEBUG"}
                ],
            }
        ],
    }
    with RawClient(broker.ports["PLAINTEXT"]) as raw:
        assert raw.call(44, 1, body)["responses"][0]["error_code"] == 0


def add_users(broker: CorralProcess) -> None:
    """alice: both SCRAM mechanisms, by confluent-kafka's admin; bob: SCRAM-SHA-512, by
    kafka-python's."""
    plaintext = f"127.0.0.1:{broker.ports['PLAINTEXT']}"
    admin = AdminClient({"bootstrap.servers": plaintext})
    # One request per credential: as in Kafka, a user altered twice in a request is refused.
    for mechanism, iterations in (
        (ScramMechanism.SCRAM_SHA_256, 4096),
        (ScramMechanism.SCRAM_SHA_512, 8192),
    ):
        info = ScramCredentialInfo(mechanism, iterations)
        futures = admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("alice", info, b"alice-secret")]
        )
        futures["alice"].result(timeout=20)
    kp_admin = KafkaAdminClient(bootstrap_servers=plaintext)
    assert kp_admin.alter_user_scram_credentials(
        [KpUpsertion("bob", KpScramMechanism.SCRAM_SHA_512, "bob-secret", iterations=4096)]
    ) == {"bob": None}
    kp_admin.close()


def prepared(broker: CorralProcess):
    """The users and the DEBUG logger set up, then the broker for the module; killed at the end
    (a failed set-up included)."""
    try:
        add_users(broker)
        debug_sasl(broker)
        yield broker
    finally:
        if broker.alive():
            broker.proc.kill()
            broker.proc.wait()


@pytest.fixture(scope="module")
def sasl_corral(tmp_path_factory):
    yield from prepared(start(tmp_path_factory, "sasl"))


def sasl_port(broker: CorralProcess) -> str:
    return f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}"


def test_admin_clients_describe_the_credentials(sasl_corral):
    plaintext = f"127.0.0.1:{sasl_corral.ports['PLAINTEXT']}"
    admin = AdminClient({"bootstrap.servers": plaintext})
    described = {
        user: future.result(timeout=20)
        for user, future in admin.describe_user_scram_credentials(["alice", "bob"]).items()
    }
    assert {
        user: sorted((i.mechanism, i.iterations) for i in d.scram_credential_infos)
        for user, d in described.items()
    } == {
        "alice": [(ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 8192)],
        "bob": [(ScramMechanism.SCRAM_SHA_512, 4096)],
    }
    kp_admin = KafkaAdminClient(bootstrap_servers=plaintext)
    everyone = kp_admin.describe_user_scram_credentials()
    kp_admin.close()
    assert sorted(everyone) == ["alice", "bob"] and everyone["bob"]["error"] is None
    with pytest.raises(Exception, match="does not exist"):
        admin.describe_user_scram_credentials(["carol"])["carol"].result(timeout=20)


# Good credentials: produce, consume in a group, commit.


def confluent_round_trip(bootstrap: str, security: dict, topic: str) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, **security})
    for i in range(COUNT):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(20) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **security,
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < COUNT and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.commit(asynchronous=False)
    committed = consumer.committed(consumer.assignment(), timeout=10)
    consumer.close()
    assert sum(max(tp.offset, 0) for tp in committed) == COUNT
    return values


def kafka_python_round_trip(bootstrap: str, security: dict, topic: str) -> list[bytes]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, **security)
    for i in range(COUNT):
        producer.send(topic, f"v{i}".encode())
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"g-{topic}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=20000,
        **security,
    )
    values = []
    for message in consumer:
        values.append(message.value)
        if len(values) == COUNT:
            break
    consumer.commit()
    committed = sum(consumer.committed(tp) or 0 for tp in consumer.assignment())
    consumer.close()
    assert committed == COUNT
    return values


def aiokafka_round_trip(bootstrap: str, security: dict, topic: str) -> list[bytes]:
    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **security)
        await producer.start()
        try:
            for i in range(COUNT):
                await producer.send_and_wait(topic, f"v{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=f"g-{topic}",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **security,
        )
        await consumer.start()
        values = []
        try:
            async with asyncio.timeout(30):
                async for message in consumer:
                    values.append(message.value)
                    if len(values) == COUNT:
                        break
            await consumer.commit()
            committed = [await consumer.committed(tp) for tp in consumer.assignment()]
        finally:
            await consumer.stop()
        assert sum(c or 0 for c in committed) == COUNT
        return values

    return asyncio.run(run())


def confluent_security(mechanism: str, user: str, password: str) -> dict:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def python_security(mechanism: str, user: str, password: str) -> dict:
    """kafka-python's and aiokafka's names."""
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }


CLIENTS = {
    "confluent-kafka": (confluent_round_trip, confluent_security),
    "kafka-python": (kafka_python_round_trip, python_security),
    "aiokafka": (aiokafka_round_trip, python_security),
}


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("client", CLIENTS)
def test_good_credentials_produce_consume_and_commit(sasl_corral, client, mechanism):
    round_trip, security = CLIENTS[client]
    topic = f"{client}-{mechanism}".lower()
    values = round_trip(sasl_port(sasl_corral), security(mechanism, "alice", "alice-secret"), topic)
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(COUNT))
    assert f"authenticated as User:alice with {mechanism}" in sasl_corral.log()


# Refusals, as each client reports them.

REFUSED = [
    ("SCRAM-SHA-256", "alice", "wrong", GENERIC.format("SCRAM-SHA-256")),
    ("SCRAM-SHA-512", "nobody", "alice-secret", GENERIC.format("SCRAM-SHA-512")),
    ("PLAIN", "alice", "wrong", PLAIN_REFUSED),
    ("PLAIN", "nobody", "alice-secret", PLAIN_REFUSED),
]


@pytest.mark.parametrize("mechanism,user,password,message", REFUSED)
def test_confluent_kafka_reports_the_authentication_failure(
    sasl_corral, mechanism, user, password, message
):
    errors: list[KafkaError] = []
    producer = Producer(
        {
            "bootstrap.servers": sasl_port(sasl_corral),
            "error_cb": errors.append,
            "reconnect.backoff.ms": 1000,
            **confluent_security(mechanism, user, password),
        }
    )
    producer.produce("refused", b"x")
    assert producer.flush(1.5) == 1
    producer.purge()
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth and f"SASL authentication error: {message}" in auth[0].str()


@pytest.mark.parametrize("mechanism,user,password,message", REFUSED)
def test_aiokafka_reports_the_authentication_failure(
    sasl_corral, caplog, mechanism, user, password, message
):
    async def run() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=sasl_port(sasl_corral),
            request_timeout_ms=5000,
            **python_security(mechanism, user, password),
        )
        try:
            with pytest.raises(Exception, match="Unable to bootstrap"):
                await producer.start()
        finally:
            await producer.stop()

    with caplog.at_level(logging.ERROR, logger="aiokafka"):
        asyncio.run(run())
    assert f"[Error 58] SaslAuthenticationFailed: {message}" in caplog.text


@pytest.mark.parametrize("mechanism,user,password,message", REFUSED)
def test_kafka_python_reports_the_authentication_failure(
    sasl_corral, caplog, mechanism, user, password, message
):
    """kafka-python reads the SASL error (the close comes connection.failed.authentication.delay.ms
    after the answer, as in Kafka; a close in the same read as the answer, it would drop the
    answer) and gives up bootstrapping."""
    with caplog.at_level(logging.WARNING, logger="kafka"):
        with pytest.raises(KpKafkaError, match="Unable to bootstrap"):
            KafkaProducer(
                bootstrap_servers=sasl_port(sasl_corral),
                bootstrap_timeout_ms=2000,
                **python_security(mechanism, user, password),
            )
    assert (
        f"[Error 58] SaslAuthenticationFailedError: SaslAuthenticationFailedError: {message}"
        in caplog.text
    )


def test_the_wire_answer_then_the_close(sasl_corral):
    with RawClient(sasl_corral.ports["SASL_PLAINTEXT"]) as raw:
        assert raw.call(17, 1, {"mechanism": "GSSAPI"}) == {
            "error_code": 33,
            "mechanisms": MECHANISMS,
        }
        assert closed_within(raw.sock, 5)
    with RawClient(sasl_corral.ports["SASL_PLAINTEXT"]) as raw:
        assert raw.call(17, 1, {"mechanism": "SCRAM-SHA-256"})["error_code"] == 0
        client = ScramClient("SCRAM-SHA-256", "alice", "wrong")
        first = raw.call(36, 2, {"auth_bytes": client.first()})
        final = raw.call(36, 2, {"auth_bytes": client.final(first["auth_bytes"])})
        assert (final["error_code"], final["error_message"]) == (
            58,
            GENERIC.format("SCRAM-SHA-256"),
        )
        assert closed_within(raw.sock, 5)
    # On the PLAINTEXT listener SASL requests are Kafka's KafkaApis answers.
    with RawClient(sasl_corral.ports["PLAINTEXT"]) as raw:
        assert raw.call(17, 1, {"mechanism": "PLAIN"}) == {"error_code": 34, "mechanisms": []}


def _send_bare(sock, token: bytes) -> None:
    sock.sendall(len(token).to_bytes(4, "big") + token)


def _receive_bare(sock) -> bytes:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            assert chunk, "closed"
            data += chunk
        return data

    return exactly(int.from_bytes(exactly(4), "big"))


def _metadata_answers(raw: RawClient) -> bool:
    body = {
        "topics": [],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    return raw.call(3, 12, body)["brokers"] != []


def test_handshake_v0_then_bare_tokens(sasl_corral):
    """Kafka's flow before KIP-152 (sarama's SASLHandshakeV0): after SaslHandshake v0 the tokens
    go bare both ways, size-prefixed without Kafka headers; then Kafka requests as usual. A
    refused one is closed without an answer, as Kafka closes it."""
    port = sasl_corral.ports["SASL_PLAINTEXT"]
    with RawClient(port) as raw:
        assert raw.call(17, 0, {"mechanism": "SCRAM-SHA-512"}) == {
            "error_code": 0,
            "mechanisms": MECHANISMS,
        }
        client = ScramClient("SCRAM-SHA-512", "alice", "alice-secret")
        _send_bare(raw.sock, client.first())
        server_first = _receive_bare(raw.sock)
        _send_bare(raw.sock, client.final(server_first))
        assert client.verify(_receive_bare(raw.sock))
        assert _metadata_answers(raw)
    with RawClient(port) as raw:
        assert raw.call(17, 0, {"mechanism": "PLAIN"})["error_code"] == 0
        _send_bare(raw.sock, b"\0alice\0alice-secret")
        assert _receive_bare(raw.sock) == b""  # PLAIN's empty challenge: four zero bytes
        assert _metadata_answers(raw)
    for mechanism, token in (
        ("PLAIN", b"\0alice\0wrong"),
        ("SCRAM-SHA-256", ScramClient("SCRAM-SHA-256", "nobody", "x").first()),
    ):
        with RawClient(port) as raw:
            assert raw.call(17, 0, {"mechanism": mechanism})["error_code"] == 0
            _send_bare(raw.sock, token)
            raw.sock.settimeout(5)
            assert raw.sock.recv(1) == b"", f"{mechanism}: a refusal is a close, not an answer"
    # A v1 handshake still means Kafka-framed SaslAuthenticate requests.
    with RawClient(port) as raw:
        assert raw.call(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        assert raw.call(36, 2, {"auth_bytes": b"\0alice\0alice-secret"})["error_code"] == 0
        assert _metadata_answers(raw)


def test_requests_before_authentication_are_bounded_by_sasl_server_max_receive_size(sasl_corral):
    """Before authentication a frame may claim at most sasl.server.max.receive.size (512 KiB): a
    bigger size prefix closes the connection at once; after authentication the broker's own
    socket.request.max.bytes applies (the same prefix waits for its bytes)."""
    port = sasl_corral.ports["SASL_PLAINTEXT"]
    with RawClient(port) as raw:
        raw.sock.sendall((1 << 20).to_bytes(4, "big"))
        assert closed_within(raw.sock, 5)
    # Python logs the reason the network thread gives, just after the close.
    deadline = time.monotonic() + 5
    while "(sasl.server.max.receive.size, before authentication)" not in sasl_corral.log():
        assert time.monotonic() < deadline, sasl_corral.log()[-2000:]
        time.sleep(0.05)
    with RawClient(port) as raw:
        assert raw.call(17, 1, {"mechanism": "SCRAM-SHA-256"})["error_code"] == 0
        client = ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
        first = raw.call(36, 2, {"auth_bytes": client.first()})
        assert raw.call(36, 2, {"auth_bytes": client.final(first["auth_bytes"])})["error_code"] == 0
        raw.sock.sendall((1 << 20).to_bytes(4, "big") + b"\0" * 1000)
        assert not closed_within(raw.sock, 1)


# Sessions that end: connections.max.reauth.ms


@pytest.fixture(scope="module")
def reauth_corral(tmp_path_factory):
    yield from prepared(start(tmp_path_factory, "reauth", **{"connections.max.reauth.ms": "2000"}))


def raw_scram(raw: RawClient, user: str, password: str) -> dict:
    assert raw.call(17, 1, {"mechanism": "SCRAM-SHA-512"})["error_code"] == 0
    client = ScramClient("SCRAM-SHA-512", user, password)
    first = raw.call(36, 2, {"auth_bytes": client.first()})
    final = raw.call(36, 2, {"auth_bytes": client.final(first["auth_bytes"])})
    assert client.verify(final["auth_bytes"])
    return final


def test_a_session_ends_unless_renewed(reauth_corral):
    metadata = {"topics": None, "allow_auto_topic_creation": False}
    with RawClient(reauth_corral.ports["SASL_PLAINTEXT"]) as raw:
        assert raw_scram(raw, "alice", "alice-secret")["session_lifetime_ms"] == 2000
        time.sleep(1.2)
        assert raw_scram(raw, "alice", "alice-secret")["session_lifetime_ms"] == 2000
        time.sleep(1.2)  # past the first session's end, within the renewed one
        assert raw.call(3, 9, metadata)["brokers"]
        time.sleep(2.2)
        raw.send(3, 9, metadata)
        assert closed_within(raw.sock, 5)
    # Another user cannot take over the session.
    with RawClient(reauth_corral.ports["SASL_PLAINTEXT"]) as raw:
        raw_scram(raw, "alice", "alice-secret")
        assert raw.call(17, 1, {"mechanism": "SCRAM-SHA-512"})["error_code"] == 0
        client = ScramClient("SCRAM-SHA-512", "bob", "bob-secret")
        first = raw.call(36, 2, {"auth_bytes": client.first()})
        final = raw.call(36, 2, {"auth_bytes": client.final(first["auth_bytes"])})
        assert (final["error_code"], final["error_message"]) == (
            58,
            "Cannot change principals during re-authentication from User.alice: User.bob",
        )
        assert closed_within(raw.sock, 5)


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_clients_renew_their_sessions(reauth_corral, client):
    """confluent-kafka (librdkafka 2.2+) and kafka-python re-authenticate (KIP-368) before the
    2 s sessions end, and keep producing on the same connection."""
    bootstrap = sasl_port(reauth_corral)
    before = reauth_corral.log().count("re-authenticated as User:bob")
    if client == "confluent-kafka":
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                **confluent_security("SCRAM-SHA-512", "bob", "bob-secret"),
            }
        )
        for _i in range(12):
            producer.produce(f"reauth-{client}", b"x")
            assert producer.flush(10) == 0
            time.sleep(0.5)
    else:
        kp = KafkaProducer(
            bootstrap_servers=bootstrap, **python_security("SCRAM-SHA-512", "bob", "bob-secret")
        )
        for _i in range(12):
            kp.send(f"reauth-{client}", b"x").get(timeout=10)
            time.sleep(0.5)
        kp.close()
    assert reauth_corral.log().count("re-authenticated as User:bob") > before


def test_kafka_configs_manages_users(sasl_corral):
    """Kafka's own tool adds, describes and deletes a user's credential (kafka-configs
    --entity-type users; --describe also asks DescribeClientQuotas: corral has no quotas), and
    the user logs in with it, then no more."""
    b = f"--bootstrap-server 127.0.0.1:{sasl_corral.ports['PLAINTEXT']} --entity-type users --entity-name carol"
    add = f"{b} --alter --add-config SCRAM-SHA-256=[iterations=8192,password=carol-secret]"
    describe = f"{b} --describe"
    done = run_tool(CONFIG_COMMAND, [add, describe])
    assert done[add] == (0, "Completed updating config for user carol.")
    assert done[describe] == (
        0,
        "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-256=iterations=8192",
    ), done[describe]
    carol = confluent_security("SCRAM-SHA-256", "carol", "carol-secret")
    producer = Producer({"bootstrap.servers": sasl_port(sasl_corral), **carol})
    producer.produce("carol", b"x")
    assert producer.flush(20) == 0
    delete = f"{b} --alter --delete-config SCRAM-SHA-256"
    assert run_tool(CONFIG_COMMAND, [delete])[delete] == (
        0,
        "Completed updating config for user carol.",
    )
    errors: list[KafkaError] = []
    producer = Producer(
        {"bootstrap.servers": sasl_port(sasl_corral), "error_cb": errors.append, **carol}
    )
    producer.produce("carol", b"x")
    assert producer.flush(1.5) == 1
    producer.purge()
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors)


def test_credentials_survive_a_restart(corral_factory):
    broker = corral_factory(**SETTINGS)
    with RawClient(broker.ports["PLAINTEXT"]) as raw:
        answer = raw.call(
            51,
            0,
            {
                "deletions": [],
                "upsertions": [upsertion("dora", "SCRAM-SHA-512", "dora-secret", 4096)],
            },
        )
        assert answer["results"] == [{"user": "dora", "error_code": 0, "error_message": None}]
    broker.kill()  # acknowledged means durable
    broker.start()
    with RawClient(broker.ports["SASL_PLAINTEXT"]) as raw:
        assert raw_scram(raw, "dora", "dora-secret")["error_code"] == 0
