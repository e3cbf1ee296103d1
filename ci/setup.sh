#!/usr/bin/env bash
# Installs corral and everything its tests need. Idempotent; safe to run on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v kcat >/dev/null 2>&1; then
    echo "== apt: kcat"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq kcat >/dev/null
fi

echo "== pip install -e .[test]"
# Editable, so that a developer running this keeps seeing their edits; maturin builds the core.
python -m pip install -q --disable-pip-version-check -e ".[test]"

echo "== Apache Kafka reference broker jars (cached in ~/.cache/corral, so a second run is quick)"
python benches/kafka_ref.py fetch

echo "== Kafka's assignors behind tests/java/AssignorHarness.java (compiled once into the same cache)"
python tests/kafka_assignors.py compile

echo "== Kafka's record classes behind tests/java/ConsumerRecordsGolden.java, and kafka-tools (same cache)"
python tests/kafka_records.py compile

echo "== the Java programs of the consumer group tests (tests/cgkit.py, same cache)"
python tests/cgkit.py compile
