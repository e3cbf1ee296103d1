"""`ssl.principal.mapping.rules`: a client certificate's subject DN -> the principal's name.

In process: Kafka's own SslPrincipalMapperTest cases (which rule texts are taken or refused, how
a list is split, what each DN maps to) on rust/network/principal_mapping.rs, and Java's replacement
rules. On the wire: an mTLS listener whose rules map alice's certificate to `User:ALICE` (the
ACLs name that principal, so a delivered record proves the mapping) and no rule for bob's
(his connection is closed, as Kafka closes it); a rule that does not parse stops startup."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import Producer
from groupkit import wait_until
from rawwire import RawClient
from tlscerts import make_certs, refusal_errors, tls_settings

from corral._core import SslPrincipalMapper

# -- Kafka's SslPrincipalMapperTest ---------------------------------------------------------


@pytest.mark.parametrize(
    "rules",
    [
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
        "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
        "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    ],
)
def test_valid_rules(rules):
    SslPrincipalMapper(rules)


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    ],
)
def test_invalid_rules(rules):
    with pytest.raises(ValueError):
        SslPrincipalMapper(rules)


def test_kafkas_mapping_examples():
    mapper = SslPrincipalMapper(
        ", ".join(
            [
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
                "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
                "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
                "DEFAULT",
            ]
        )
    )
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert (
        mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"
    )


@pytest.mark.parametrize(
    "expected, rules",
    [
        ("[]", ""),
        ("[DEFAULT]", "DEFAULT"),
        ("[RULE:/]", "RULE://"),
        ("[RULE:/.*]", "RULE:/.*/"),
        ("[RULE:/.*/L]", "RULE:/.*/L"),
        ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
        ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
        ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
        ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
        (
            "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
            "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ",
        ),
        # empty rules are ignored
        ("[]", ",   , , ,      , , ,   "),
        ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
        ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
        ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
        # escape sequences
        ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
        # rules rule
        (
            "[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, "
            "/DEFAULT, DEFAULT]",
            "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, "
            "/DEFAULT/,DEFAULT",
        ),
    ],
)
def test_rules_splitting(expected, rules):
    assert repr(SslPrincipalMapper(rules)) == f"SslPrincipalMapper(rules = {expected})"


def test_comma_with_whitespace():
    mapper = SslPrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


# -- beyond Kafka's tests: Java's replacement text and refusals ---------------------------------

DN = "CN=alice,OU=eng,O=corp,C=US"
# Each name below is what Kafka 4.4's own SslPrincipalMapper gives (checked with kafka-clients).


@pytest.mark.parametrize(
    "rule, name",
    [
        ("RULE:^CN=(.*?),OU=(.*?),.*$/$2-$1/", "eng-alice"),
        ("RULE:^CN=(.*?),OU=(.*?),.*$/$0/", DN),  # group 0: the whole match
        ("RULE:^CN=(.*?),OU=(.*?),.*$/$3/", "$3"),  # past the groups: literal (Kafka's escaping)
        ("RULE:^CN=(.*?),OU=(.*?),.*$/$12/", "alice2"),  # $12 with 2 groups is $1 then "2"
        ("RULE:^CN=(.*?),OU=(.*?),.*$/\\$1/", "$1"),  # an escaped $ is literal
        ("RULE:^CN=(?<user>[a-z]+),.*$/${user}/U", "ALICE"),  # Java's named group syntax
        ("RULE:^CN=bob,.*$/bob/, RULE:^CN=([a-z]+),.*$/user-$1/", "user-alice"),  # first match wins
        ("RULE:CN=alice/x/, DEFAULT", DN),  # a rule matches only the whole DN
        # Java's replaceAll: after the whole DN, the empty text at its end matches again.
        ("RULE:.*/x/", "xx"),
        ("RULE:^.*$/x/", "x"),
        ("RULE:(.*?),(.*)/[$1]/", "[CN=alice]"),
    ],
)
def test_replacements(rule, name):
    assert SslPrincipalMapper(rule).name(DN) == name


@pytest.mark.parametrize("rules", ["", "RULE:^CN=bob,.*$/bob/", "RULE:^CN=alice.*$/$1/"])
def test_no_rule_maps_or_no_group(rules):
    with pytest.raises(ValueError):
        SslPrincipalMapper(rules).name(DN)


def test_patterns_the_engine_cannot_take_are_refused():
    with pytest.raises(ValueError, match="rule"):
        SslPrincipalMapper("RULE:^CN=(\\w+),OU=\\1$/$1/")  # a backreference


# -- on the wire ---------------------------------------------------------------------------------

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
