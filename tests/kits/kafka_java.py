"""The Java side of the client tests: the Apache Kafka reference broker (benches/kafka_ref.py) for
a test's duration, the Java member (tests/clients/java/ConsumerGroupMember.java) compiled
against its kafka-clients, and Kafka's own command-line tools run in one JVM
(tests/clients/java/ToolRunner.java): kafka-consumer-groups, kafka-configs, kafka-acls...

`compile_programs` fetches the jars (the reference broker's and kafka-tools) and compiles the
Java programs into the jar cache: `python tests/kits/cgkit.py compile` runs it, as CI setup does.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches"))
from checkout import JAVA
from kafka_ref import DEFAULT_VERSION, compile_java
from kafka_ref import fetch as kafka_jars

JAVA_MEMBER = JAVA / "ConsumerGroupMember.java"
FAULT_CLIENTS = JAVA / "FaultClients.java"
TOOL_RUNNER = JAVA / "ToolRunner.java"
# kafka-tools (kafka-consumer-groups is its ConsumerGroupCommand): 4.4.0 is not on Maven Central,
# 4.3.1 is the newest that is.
TOOLS_VERSION = "4.3.1"
# Kafka Connect's worker and FileStream connectors (connect-file is not on Maven Central at 4.4.0).
CONNECT_VERSION = "4.3.1"

# The JVM of a Java member: small, quick to start (these are short-lived test clients).
JVM_FLAGS = [
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-Xss512k",
    "-Xmx192m",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
]


@contextlib.contextmanager
def kafka_reference(settings: dict) -> Iterator[str]:
    """An Apache Kafka 4.4 broker (benches/kafka_ref.py) with `settings`: its bootstrap."""
    from kafka_ref import KafkaBroker

    broker = KafkaBroker(settings=settings)
    broker.start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


def java_member_classes(version: str = DEFAULT_VERSION) -> Path:
    """ConsumerGroupMember compiled against the reference broker's kafka-clients."""
    return compile_java(JAVA_MEMBER, version)


# kafka-configs: kafka.admin.ConfigCommand in the core jar up to 4.3 (4.4 moved it into
# kafka-tools, which Maven Central does not have for 4.4).
CONFIG_COMMAND = "kafka.admin.ConfigCommand"


def run_tool(
    main_class: str, commands: list[str], timeout: float = 120
) -> dict[str, tuple[int, str]]:
    """Runs a Kafka tool from kafka-tools (or, for kafka-configs, the 4.3 core jar) once per
    command line in one JVM (tests/clients/java/ToolRunner.java): {command: (exit code, output)}."""
    lib = kafka_jars(TOOLS_VERSION, "kafka_2.13" if main_class == CONFIG_COMMAND else "kafka-tools")
    classes = compile_java(
        TOOL_RUNNER
    )  # against kafka-clients 4.4.0: the Exit it uses is 4.3.1's too
    run = subprocess.run(
        ["java", *JVM_FLAGS, "-cp", f"{classes}{os.pathsep}{lib}/*", "ToolRunner", main_class],
        input="".join(c + "\n" for c in commands),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    out: dict[str, tuple[int, str]] = {}
    command, lines = None, []
    for line in run.stdout.splitlines():
        if line.startswith("### exit "):
            out[command] = (int(line[len("### exit ") :]), "\n".join(lines))
            command, lines = None, []
        elif line.startswith("### "):
            command = line[4:]
        elif command is not None:
            lines.append(line)
    missing = [c for c in commands if c not in out]
    assert not missing, (
        f"{main_class} did not run {missing}: {run.stdout[-2000:]}{run.stderr[-2000:]}"
    )
    return out


def fault_clients(mode: str, config: dict, timeout: float = 90, between=None) -> dict:
    """One run of tests/clients/java/FaultClients.java (`mode`: commit, produce, fetch-latency):
    its last JSON line ({"error": text, "stderr": ...} when the client failed). With `between`,
    the program's first line (decoded) is handed to it and then the program told to go on (a
    line on its stdin): the produce mode's warm-up."""
    classes = compile_java(FAULT_CLIENTS)
    cmd = ["java", *JVM_FLAGS, "-cp", f"{classes}{os.pathsep}{kafka_jars()}/*", "FaultClients"]
    proc = subprocess.Popen(
        [*cmd, mode, json.dumps(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        if between is not None:
            first = proc.stdout.readline()
            assert first, f"FaultClients {mode} ended early: {proc.communicate()[1][-3000:]}"
            between(json.loads(first))
            proc.stdin.write("go\n")
            proc.stdin.flush()
        stdout, stderr = proc.communicate(timeout=timeout)
    except BaseException:
        proc.kill()
        stdout, stderr = proc.communicate()
        print(f"FaultClients {mode} killed; its stderr:\n{stderr[-5000:]}")
        raise
    lines = stdout.strip().splitlines()
    assert lines, f"FaultClients {mode} printed nothing (exit {proc.returncode}): {stderr[-3000:]}"
    answer = json.loads(lines[-1])
    if "error" in answer:
        answer["stderr"] = stderr[-3000:]
    return answer


def compile_programs() -> list[Path]:
    """Fetches the jars and compiles the Java programs (each once into the jar cache): the Java
    member's classes, kafka-tools' jars, the 4.3 core jar (kafka-configs), ToolRunner's classes,
    the fault tests' clients (tests/clients/java/FaultClients.java), the share group consumers
    (tests/clients/java/ShareConsumers.java), the transactional loop, the Kafka Streams
    application and the Kafka Connect worker's jars (connect-file has no 4.4.0 on Maven Central:
    Connect is run at 4.3.1)."""
    return [
        java_member_classes(),
        kafka_jars(TOOLS_VERSION, "kafka-tools"),
        kafka_jars(TOOLS_VERSION),
        compile_java(TOOL_RUNNER),
        compile_java(FAULT_CLIENTS),
        compile_java(JAVA / "ShareConsumers.java"),
        compile_java(JAVA / "ConsumeTransformProduce.java"),
        compile_java(JAVA / "WordCountStreams.java", artifact="kafka-streams"),
        kafka_jars(CONNECT_VERSION, "connect-runtime"),
        kafka_jars(CONNECT_VERSION, "connect-file"),
    ]
