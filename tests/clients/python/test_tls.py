"""TLS listeners with real clients: SSL with client certificates (mTLS: kafka-python,
confluent-kafka, aiokafka, Java) and without, several listeners at once, refusals (expired,
untrusted or missing certificates), startup errors."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from checkout import JAVA
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError
from kafka_ref import fetch as kafka_jars
from tlscerts import make_certs, refusal_errors, tls_settings


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


def _listeners(*names: str) -> str:
    return ",".join(f"{name}://127.0.0.1:0" for name in names)


def _ssl_corral(corral_factory, certs, client_auth="none", **settings):
    return corral_factory(
        listeners=_listeners("PLAINTEXT", "SSL"), **tls_settings(certs, client_auth), **settings
    )


def test_kafka_python_produces_consumes_and_commits_over_mtls(corral_factory, certs):
    broker = _ssl_corral(corral_factory, certs, client_auth="required")
    bootstrap = f"127.0.0.1:{broker.ports['SSL']}"
    tls = {
        "security_protocol": "SSL",
        "ssl_cafile": str(certs.ca),
        "ssl_certfile": str(certs.alice.cert),
        "ssl_keyfile": str(certs.alice.key),
    }
    producer = KafkaProducer(bootstrap_servers=bootstrap, **tls)
    for i in range(20):
        producer.send("tls-topic", f"v{i}".encode())
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(
        "tls-topic",
        bootstrap_servers=bootstrap,
        group_id="tls-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=15000,
        **tls,
    )
    values = []
    for message in consumer:
        values.append(message.value)
        if len(values) == 20:
            break
    consumer.commit()
    # The metadata the client used named the SSL listener's port, not PLAINTEXT's.
    assert {b.port for b in consumer._client.cluster.brokers()} == {broker.ports["SSL"]}
    consumer.close()
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(20))


def _confluent(bootstrap: str, certs, client=None, **extra) -> dict:
    config = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.ca),
        **extra,
    }
    if client is not None:
        config |= {
            "ssl.certificate.location": str(client.cert),
            "ssl.key.location": str(client.key),
        }
    return config


def test_confluent_kafka_over_mtls_and_the_certificates_refused(corral_factory, certs):
    broker = _ssl_corral(corral_factory, certs, client_auth="required")
    bootstrap = f"127.0.0.1:{broker.ports['SSL']}"
    producer = Producer(_confluent(bootstrap, certs, certs.alice))
    for i in range(10):
        producer.produce("mtls", f"m{i}".encode())
    assert producer.flush(20) == 0
    consumer = Consumer(
        _confluent(
            bootstrap,
            certs,
            certs.alice,
            **{
                "group.id": "mtls-group",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            },
        )
    )
    consumer.subscribe(["mtls"])
    got = []
    for _ in range(60):
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
        if len(got) == 10:
            break
    consumer.commit(asynchronous=False)
    consumer.close()
    assert sorted(got) == sorted(f"m{i}".encode() for i in range(10))

    def refused(client) -> str:
        """The transport errors the client reports (at once: the handshake fails), after
        checking that nothing was delivered."""
        reports = []
        errors = refusal_errors(
            _confluent(bootstrap, certs, client),
            "mtls",
            on_delivery=lambda err, _: reports.append(err),
        )
        assert reports and reports[0] is not None, "a refused client must not deliver"
        return " ".join(str(e) for e in errors)

    assert "certificate expired" in refused(certs.expired)
    # The broker names the CAs it trusts; OpenSSL then withholds a certificate from another CA.
    assert "certificate required" in refused(certs.stranger)
    assert "certificate required" in refused(None)
    # Logged, but counted: a client retrying a bad certificate does not flood the log.
    assert "for failed TLS (last: TLS: invalid peer certificate" in broker.log()
    assert broker.log().count("for failed TLS") <= 3


def test_aiokafka_over_mtls(corral_factory, certs):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    broker = _ssl_corral(corral_factory, certs, client_auth="required")
    bootstrap = f"127.0.0.1:{broker.ports['SSL']}"

    async def run() -> list[bytes]:
        context = create_ssl_context(
            cafile=str(certs.ca), certfile=str(certs.bob.cert), keyfile=str(certs.bob.key)
        )
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=context
        )
        await producer.start()
        for i in range(10):
            await producer.send_and_wait("aio-tls", f"a{i}".encode())
        await producer.stop()
        consumer = AIOKafkaConsumer(
            "aio-tls",
            bootstrap_servers=bootstrap,
            group_id="aio-tls",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            security_protocol="SSL",
            ssl_context=context,
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


def _java(bootstrap: str, properties: dict[str, str], tmp_path: Path, topic: str) -> dict:
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
            bootstrap,
            str(config),
            topic,
            f"{topic}-group",
            "50",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.stdout.strip(), run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_java_client_over_mtls_with_pem_stores(corral_factory, certs, tmp_path):
    broker = _ssl_corral(corral_factory, certs, client_auth="required")
    bootstrap = f"127.0.0.1:{broker.ports['SSL']}"
    base = {
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        "ssl.keystore.type": "PEM",
    }
    good = _java(
        bootstrap, base | {"ssl.keystore.location": str(certs.alice.both)}, tmp_path, "java-mtls"
    )
    assert good == {"ok": True, "consumed": 50, "committed": 50}
    expired = _java(
        bootstrap,
        base | {"ssl.keystore.location": str(certs.expired.both)},
        tmp_path,
        "java-expired",
    )
    assert expired["ok"] is False, expired
    assert (
        "SslAuthenticationException" in expired["error"]
        and "certificate_expired" in expired["error"]
    )


# Exit 2: a value that does not parse; exit 1: settings that parse but cannot start a listener.
@pytest.mark.parametrize(
    "settings, code, message",
    [
        ({}, 1, "listener SSL (SSL) needs a keystore"),
        (
            {"ssl.keystore.location": "/nonexistent.pem"},
            1,
            "cannot read the keystore /nonexistent.pem",
        ),
        ({"ssl.keystore.type": "JKS"}, 2, "corral reads PEM only"),
        (
            {"ssl.client.auth": "required", "ssl.keystore.location": "SERVER"},
            1,
            "ssl.client.auth=required needs a truststore",
        ),
        ({"ssl.keystore.location": "CA"}, 1, "no unencrypted private key"),
        (
            {"listeners": "PLAIN://127.0.0.1:0"},
            1,
            "No security protocol defined for listener PLAIN",
        ),
        (
            {"listeners": "SSL://127.0.0.1:0,SSL://127.0.0.1:0"},
            2,
            "each listener name must appear only once",
        ),
    ],
)
def test_bad_listener_settings_stop_startup_with_one_line(tmp_path, certs, settings, code, message):
    values = {"listeners": _listeners("SSL")} | settings
    for name, value in values.items():
        values[name] = {"SERVER": str(certs.server), "CA": str(certs.ca)}.get(value, value)
    command = [sys.executable, "-m", "corral.cli", "serve", "--data-dir", str(tmp_path / "d")]
    for name, value in values.items():
        command += ["--set", f"{name}={value}"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert run.returncode == code and message in run.stderr, run.stderr


def test_listener_prefixed_settings_apply_to_their_listener_only(corral_factory, certs):
    """listener.name.<name>.ssl.client.auth: one SSL listener wants certificates, the other not."""
    broker = corral_factory(
        listeners=_listeners("SSL", "MTLS"),
        **{
            "listener.security.protocol.map": "SSL:SSL,MTLS:SSL",
            "ssl.keystore.location": str(certs.server),
            "ssl.truststore.location": str(certs.ca),
            "listener.name.mtls.ssl.client.auth": "required",
        },
    )

    def delivered(port: int) -> bool:
        try:
            producer = KafkaProducer(
                bootstrap_servers=f"127.0.0.1:{port}",
                security_protocol="SSL",
                ssl_cafile=str(certs.ca),
                max_block_ms=5000,
                bootstrap_timeout_ms=3000,
            )
            producer.send("prefixed", b"x").get(timeout=10)
        except KafkaError:
            return False
        producer.close()
        return True

    assert delivered(broker.ports["SSL"])
    assert not delivered(broker.ports["MTLS"])


def test_megabytes_through_tls_both_ways(corral_factory, certs):
    """Produce and fetch responses far larger than TLS records and rustls's send buffer: every
    byte arrives, in order, sealed (a socket full mid-response must not lose or leak bytes)."""
    broker = _ssl_corral(corral_factory, certs)
    bootstrap = f"127.0.0.1:{broker.ports['SSL']}"
    values = [bytes([i % 251]) * 60_000 + i.to_bytes(4, "big") for i in range(200)]
    producer = Producer(_confluent(bootstrap, certs, None, **{"linger.ms": 50}))
    for value in values:
        producer.produce("big-tls", value, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer(
        _confluent(
            bootstrap,
            certs,
            None,
            **{
                "group.id": "big-tls",
                "auto.offset.reset": "earliest",
                "fetch.max.bytes": 8 << 20,
                "max.partition.fetch.bytes": 8 << 20,
            },
        )
    )
    consumer.subscribe(["big-tls"])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < len(values) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    assert got == values


def test_requested_client_auth_takes_a_certificate_when_sent_and_none_otherwise(
    corral_factory, certs
):
    """ssl.client.auth=requested: a client without a certificate connects (User:ANONYMOUS); one
    with a certificate signed by the truststore connects as it; an expired one is refused."""
    broker = _ssl_corral(corral_factory, certs, client_auth="requested")
    bootstrap = f"127.0.0.1:{broker.ports['SSL']}"
    for client in (None, certs.alice):
        producer = Producer(_confluent(bootstrap, certs, client))
        producer.produce("requested", b"x")
        assert producer.flush(20) == 0, client
    errors = refusal_errors(_confluent(bootstrap, certs, certs.expired), "requested")
    assert "certificate expired" in " ".join(str(e) for e in errors)
