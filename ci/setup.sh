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

# Java 17: the Kafka reference broker, the Java test programs (javac) and pyspark 4 (tests/unit/analyze/test_job.py).
if ! command -v javac >/dev/null 2>&1; then
    echo "== apt: openjdk-17-jdk-headless"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq openjdk-17-jdk-headless >/dev/null
fi

# Cluster mode's engines (docs/cluster.md): tests/unit/cluster runs a real etcd and PostgreSQL
# (tests/kits/engines.py). Debian's packages; the postgresql package's own cluster is not used.
if ! command -v etcd >/dev/null 2>&1 || ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    echo "== apt: etcd-server postgresql"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq etcd-server postgresql >/dev/null
fi

echo "== pip install -e .[test]"
# Editable, so that a developer running this keeps seeing their edits; maturin builds the core.
# Without build isolation (its build tools installed here, as pyproject.toml pins them) and with
# one cargo target directory for the machine, a fresh clone recompiles only corral's own crates
# (a temporary build environment changed every dependency's fingerprint: ~1 min more).
# pyspark ships as an sdist only: built here without isolation too, it needs `wheel` (the
# machine's setuptools 65 has no bdist_wheel of its own; pyspark 4.3.0 failed to install without).
python -m pip install -q --disable-pip-version-check "maturin>=1.9,<2" "cython>=3.1,<4" \
    "wheel>=0.42,<1"
CARGO_TARGET_DIR=~/.cache/corral/target \
    python -m pip install -q --disable-pip-version-check --no-build-isolation -e ".[test]"

echo "== release wheels (ci/build_wheels.sh; cached by source hash in ~/.cache/corral/wheels)"
bash ci/build_wheels.sh >/dev/null

# tests/wire/test_wheels.py runs the aarch64 wheel under qemu-user with Debian 12's aarch64 Python 3.11:
# its packages are unpacked into a directory (qemu -L), not installed, so the system stays amd64.
if ! command -v qemu-aarch64-static >/dev/null 2>&1; then
    echo "== apt: qemu-user-static"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq qemu-user-static >/dev/null
fi
arm64=~/.cache/corral/arm64-python
if [ ! -x "$arm64/usr/bin/python3.11" ]; then
    echo "== aarch64 Python 3.11 into $arm64"
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        dpkg --add-architecture arm64
    fi
    apt-get update -qq
    debs=$(mktemp -d)
    (cd "$debs" && apt-get download -qq -o APT::Sandbox::User=root \
        python3.11-minimal:arm64 libpython3.11-minimal:arm64 libpython3.11-stdlib:arm64 \
        libc6:arm64 libgcc-s1:arm64 libstdc++6:arm64 libssl3:arm64 libffi8:arm64 \
        libexpat1:arm64 zlib1g:arm64 libbz2-1.0:arm64 liblzma5:arm64)
    rm -rf "$arm64.tmp"
    for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$arm64.tmp"; done
    rm -rf "$debs"
    mv "$arm64.tmp" "$arm64"
fi

echo "== Apache Kafka reference broker jars (cached in ~/.cache/corral, so a second run is quick)"
python benches/kafka_ref.py fetch

echo "== Kafka's assignors behind tests/clients/java/AssignorHarness.java (compiled once into the same cache)"
python tests/kits/kafka_assignors.py compile

echo "== Kafka's record classes behind tests/clients/java/ConsumerRecordsGolden.java, and kafka-tools (same cache)"
python tests/kits/kafka_records.py compile

echo "== the Java programs of the consumer group tests (tests/kits/cgkit.py, same cache)"
python tests/kits/cgkit.py compile

echo "== the Go (franz-go, sarama) and Node (kafkajs) client programs (tests/kits/polyglot.py, same cache)"
python tests/kits/polyglot.py build
