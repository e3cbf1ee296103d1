"""`ssl.principal.mapping.rules` on a real corral: an mTLS listener whose rules map alice's
certificate to `User:ALICE` (the ACLs name that principal, so a delivered record, with
confluent-kafka, proves the mapping) and no rule for bob's (his connection is closed, as Kafka
closes it); a rule that does not parse stops startup. The rules themselves, in process:
tests/unit/security/test_principal_mapping.py."""

from __future__ import annotations

import subprocess
import sys

import pytest
from cgkit import wait_until
from confluent_kafka import Producer
from rawwire import RawClient
from tlscerts import make_certs, refusal_errors, tls_settings

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


CREATE_ACLS, CREATE_TOPICS = 30, 19


TOPIC, LITERAL, WRITE, ALLOW = 2, 3, 4, 3


RULES = "RULE:^CN=(alice),OU=tests,O=corral,C=US$/$1/U"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


def test_mtls_principals_are_mapped_and_unmapped_certificates_refused(corral_factory, certs):
    broker = corral_factory(
        listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        **tls_settings(certs, "required"),
        **{
            "ssl.principal.mapping.rules": RULES,
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "super.users": "User:ANONYMOUS",
        },
    )
    with RawClient(broker.ports["PLAINTEXT"]) as admin:
        created = admin.call(
            CREATE_TOPICS,
            7,
            {
                "topics": [
                    {
                        "name": "mapped",
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": 10000,
                "validate_only": False,
            },
        )
        assert created["topics"][0]["error_code"] == 0, created
        acl = admin.call(
            CREATE_ACLS,
            3,
            {
                "creations": [
                    {
                        "resource_type": TOPIC,
                        "resource_name": "mapped",
                        "resource_pattern_type": LITERAL,
                        "principal": "User:ALICE",
                        "host": "*",
                        "operation": WRITE,
                        "permission_type": ALLOW,
                    }
                ]
            },
        )
        assert acl["results"][0]["error_code"] == 0, acl

    def conf(client) -> dict:
        return {
            "bootstrap.servers": f"127.0.0.1:{broker.ports['SSL']}",
            "security.protocol": "SSL",
            "ssl.ca.location": str(certs.ca),
            "ssl.certificate.location": str(client.cert),
            "ssl.key.location": str(client.key),
        }

    # alice's certificate maps to User:ALICE, whom the ACL lets write.
    producer = Producer(conf(certs.alice))
    delivered = []
    producer.produce("mapped", b"x", on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(20) == 0 and delivered == [None], delivered
    # No rule maps bob's: the connection closes once its handshake is done.
    assert refusal_errors(conf(certs.bob), "mapped")
    wait_until(
        lambda: (
            "no rule of ssl.principal.mapping.rules applies to "
            "CN=bob,OU=tests,O=corral,C=US" in broker.log()
        ),
        10,
        "the refusal logged",
    )


def test_a_rule_that_does_not_parse_stops_startup(tmp_path, certs):
    command = [
        sys.executable,
        "-m",
        "corral.cli",
        "serve",
        "--data-dir",
        str(tmp_path / "d"),
        "--set",
        "listeners=SSL://127.0.0.1:0",
        "--set",
        f"ssl.keystore.location={certs.server}",
        "--set",
        "ssl.principal.mapping.rules=RULE:^CN=(.*?),OU=.*$/$1/LU",
    ]
    run = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert run.returncode == 2 and "ssl.principal.mapping.rules" in run.stderr, run.stderr
