"""One table of Kafka's error codes for Rust and Python: corral.errors is generated from the
compiled core's table (the kafka-protocol crate's), and both agree with Kafka's Errors.java."""

from __future__ import annotations

import gen_error_codes
from checkout import ROOT

from corral import _core
from corral.errors import ErrorCode

# A few codes as org.apache.kafka.common.protocol.Errors numbers them (Kafka 4.x), written out here
# as the reference the generated table must match.
KAFKA = {
    "UNKNOWN_SERVER_ERROR": -1,
    "OFFSET_OUT_OF_RANGE": 1,
    "UNKNOWN_TOPIC_OR_PARTITION": 3,
    "NOT_COORDINATOR": 16,
    "ILLEGAL_GENERATION": 22,
    "REBALANCE_IN_PROGRESS": 27,
    "UNSUPPORTED_VERSION": 35,
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": 53,
    "KAFKA_STORAGE_ERROR": 56,
    "MEMBER_ID_REQUIRED": 79,
    "FENCED_INSTANCE_ID": 82,
    "UNKNOWN_TOPIC_ID": 100,
    "FENCED_MEMBER_EPOCH": 110,
    "STALE_MEMBER_EPOCH": 113,
    "UNSUPPORTED_ENDPOINT_TYPE": 115,
    "INVALID_REGISTRATION": 119,
}


def test_errors_py_is_generated_from_the_core():
    generated = gen_error_codes.render()
    current = (ROOT / "src" / "corral" / "errors.py").read_text()
    assert current == generated, "run: python ci/gen_error_codes.py > src/corral/errors.py"
    assert {e.name: e.value for e in ErrorCode} == {"NONE": 0, **dict(_core.error_codes())}


def test_codes_are_kafkas():
    assert {name: ErrorCode[name].value for name in KAFKA} == KAFKA
