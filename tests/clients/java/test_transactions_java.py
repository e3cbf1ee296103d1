"""Java's transactional producer against a real corral: a consume-transform-produce loop that sends
its consumer's offsets with each transaction (in a classic and in a KIP-848 consumer group) writes
every input record to the output exactly once, and a zombie producer is fenced by a newer one with
the same transactional.id (tests/clients/java/ConsumeTransformProduce.java)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from checkout import JAVA
from kafka_java import JVM_FLAGS
from kafka_ref import compile_java
from kafka_ref import fetch as kafka_jars

PROGRAM = JAVA / "ConsumeTransformProduce.java"


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_consume_transform_produce_exactly_once_and_a_fenced_zombie(corral, protocol):
    classes = compile_java(PROGRAM)
    run = subprocess.run(
        [
            "java",
            *JVM_FLAGS,
            "-cp",
            f"{classes}{os.pathsep}{kafka_jars()}/*",
            "ConsumeTransformProduce",
            corral.bootstrap,
            protocol,
            "300",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert lines, (run.stdout[-2000:], run.stderr[-3000:])
    result = json.loads(lines[-1])
    assert result == {
        "processed": 300,
        "fenced": "ProducerFencedException",
        "output": 300,
        "unique": 300,
    }, run.stderr[-3000:]
