"""DescribeClientQuotas' filter checks, as Kafka's ClientQuotasImage.describe makes them (corral
has no quotas: a good filter matches nothing). kafka-configs --describe --entity-type users runs
against a real corral in tests/clients/python/test_sasl_clients.py."""

from __future__ import annotations

import pytest

from corral.config.client_quotas import InvalidFilter, check_filter
from corral.errors import ErrorCode

EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def c(entity_type: str, match_type: int, match: str | None = None) -> dict:
    return {"entity_type": entity_type, "match_type": match_type, "match": match}


@pytest.mark.parametrize(
    "components",
    [
        [],
        [c("user", EXACT, "alice")],
        [c("user", DEFAULT)],
        [c("user", SPECIFIED), c("client-id", EXACT, "app")],
        [c("ip", EXACT, "10.0.0.1")],
    ],
)
def test_good_filters_pass(components):
    check_filter(components)


@pytest.mark.parametrize(
    "components, code, message",
    [
        ([c("", EXACT, "x")], ErrorCode.INVALID_REQUEST, "Invalid empty entity type."),
        (
            [c("user", DEFAULT), c("user", SPECIFIED)],
            ErrorCode.INVALID_REQUEST,
            "Entity type user cannot appear more than once in the filter.",
        ),
        ([c("team", EXACT, "x")], ErrorCode.UNSUPPORTED_VERSION, "Unsupported entity type team"),
        (
            [c("user", EXACT)],
            ErrorCode.INVALID_REQUEST,
            "Request specified MATCH_TYPE_EXACT, but set match string to null.",
        ),
        (
            [c("user", DEFAULT, "x")],
            ErrorCode.INVALID_REQUEST,
            "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
        ),
        (
            [c("user", SPECIFIED, "x")],
            ErrorCode.INVALID_REQUEST,
            "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
        ),
        ([c("user", 7)], ErrorCode.INVALID_REQUEST, "Unknown match type 7"),
        (
            [c("ip", SPECIFIED), c("user", EXACT, "a")],
            ErrorCode.INVALID_REQUEST,
            "Invalid entity filter component combination. IP filter component should not be used "
            "with user or clientId filter component.",
        ),
    ],
)
def test_bad_filters_get_kafkas_codes_and_messages(components, code, message):
    with pytest.raises(InvalidFilter) as refused:
        check_filter(components)
    assert (refused.value.code, str(refused.value)) == (code, message)
