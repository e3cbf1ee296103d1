"""`ssl.principal.mapping.rules`: a client certificate's subject DN -> the principal's name.

In process: Kafka's own SslPrincipalMapperTest cases (which rule texts are taken or refused, how
a list is split, what each DN maps to) on rust/network/principal_mapping.rs, and Java's replacement
rules. On the wire (an mTLS listener, a rule that stops startup):
tests/clients/python/test_mtls_principals.py."""

from __future__ import annotations

import pytest

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
