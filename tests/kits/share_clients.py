"""Share-group consumers (KIP-932) of three client libraries, run as processes that speak one
protocol, and the checks the share group client tests (tests/clients/test_share_groups_clients.py)
make on what they print.

The programs:
- Java kafka-clients 4.4's KafkaShareConsumer: tests/clients/java/ShareConsumers.java (compiled
  into the jar cache by tests/kits/kafka_java.py's `compile_programs`);
- franz-go's kgo.ShareGroup: `members share CONFIG_JSON` (tests/clients/go/share.go, built by
  tests/kits/polyglot.py);
- confluent-kafka's ShareConsumer (librdkafka): this file run as a script,
  `python tests/kits/share_clients.py CONFIG_JSON`.

CONFIG_JSON: {"bootstrap", "group", "topic", "members": [names], "behaviour": "accept" |
"poison:<list>" | "hold", "idle_ms"? (20000), "total"?, "max_poll_records"?}. Each member is one
share consumer (its own thread) in explicit acknowledgement mode:
- accept: ACCEPT every record;
- poison:<list>: RELEASE every record whose value starts with "poison", each time it is
  delivered; REJECT the records listed ("OFFSET" in any partition or "PARTITION:OFFSET", comma
  separated); ACCEPT the rest;
- hold: poll until a poll returns records, acknowledge none, print them (ack "hold") and
  {"member", "held": n}, then block until killed; "stop" then ends the process without closing
  the consumer (a close would release what it holds; the broker releases it when the
  connection drops). One member per process in this mode.
After each poll's acknowledgements are committed the member prints one line per record:
{"member", "client", "partition", "offset", "delivery_count", "ack", "ts" (wall-clock ms when the
poll returned), "acked_ts" (ms when the commit returned), "ack_error"? (the partition's commit
error)}. A member stops after idle_ms without records, after `total` deliveries of its own, or on
a "stop" line on stdin (every member of the process), and prints {"member", "client", "summary":
true, "delivered", "accept", "release", "reject", "hold", "ack_errors", "error"?}.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

CLIENTS = ("java", "confluent", "franz-go")

# ---------------------------------------------------------------- the confluent-kafka consumer


def _behaviour(text: str) -> tuple[str, set[int], set[tuple[int, int]]]:
    if text in ("", "accept"):
        return "accept", set(), set()
    if text == "hold":
        return "hold", set(), set()
    if not text.startswith("poison:"):
        raise ValueError(f"behaviour {text!r}")
    anywhere, at = set(), set()
    for entry in text[len("poison:") :].split(","):
        entry = entry.strip()
        if not entry:
            continue
        if ":" in entry:
            p, o = entry.split(":")
            at.add((int(p), int(o)))
        else:
            anywhere.add(int(entry))
    return "poison", anywhere, at


_out_lock = threading.Lock()


def _print(line: dict) -> None:
    text = json.dumps(line)
    with _out_lock:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def _confluent_member(cfg: dict, name: str, stop: threading.Event) -> None:
    import confluent_kafka as ck

    mode, reject_any, reject_at = _behaviour(cfg.get("behaviour", "accept"))
    counts = dict.fromkeys(("delivered", "accept", "release", "reject", "hold", "ack_errors"), 0)
    error = None
    conf = {
        "bootstrap.servers": cfg["bootstrap"],
        "group.id": cfg["group"],
        "client.id": name,
        "share.acknowledgement.mode": "explicit",
    }
    if cfg.get("max_poll_records"):
        conf["max.poll.records"] = cfg["max_poll_records"]
    idle_s = cfg.get("idle_ms", 20000) / 1000
    total = cfg.get("total", 0)
    consumer = None
    try:
        consumer = ck.ShareConsumer(conf)
        consumer.subscribe([cfg["topic"]])
        last = time.monotonic()
        while not stop.is_set():
            messages = consumer.poll(0.25)
            ts = int(time.time() * 1000)
            records = []
            for m in messages:
                if m.error() is not None:
                    _print({"member": name, "client": "confluent", "fetch_error": str(m.error())})
                    continue
                records.append(m)
            if not records:
                if time.monotonic() - last > idle_s:
                    break
                continue
            last = time.monotonic()

            def line(m, ack: str) -> dict:
                return {
                    "member": name,
                    "client": "confluent",
                    "partition": m.partition(),
                    "offset": m.offset(),
                    "delivery_count": m.delivery_count(),
                    "ack": ack,
                    "ts": ts,
                }

            if mode == "hold":
                for m in records:
                    counts["delivered"] += 1
                    counts["hold"] += 1
                    _print(line(m, "hold"))
                _print({"member": name, "held": counts["hold"]})
                stop.wait()
                # No close (it would release what is held): the process ends here.
                _print({"member": name, "client": "confluent", "summary": True, **counts})
                os._exit(0)
            lines = []
            for m in records:
                value = m.value() or b""
                if mode == "poison" and value.startswith(b"poison"):
                    ack, kind = "release", ck.AcknowledgeType.RELEASE
                elif mode == "poison" and (
                    m.offset() in reject_any or (m.partition(), m.offset()) in reject_at
                ):
                    ack, kind = "reject", ck.AcknowledgeType.REJECT
                else:
                    ack, kind = "accept", ck.AcknowledgeType.ACCEPT
                consumer.acknowledge(m, kind)
                counts["delivered"] += 1
                counts[ack] += 1
                lines.append(line(m, ack))
            results = consumer.commit_sync(30)
            acked_ts = int(time.time() * 1000)
            failed = {tp.partition: str(e) for tp, e in (results or {}).items() if e is not None}
            for entry in lines:
                entry["acked_ts"] = acked_ts
                if entry["partition"] in failed:
                    entry["ack_error"] = failed[entry["partition"]]
                    counts["ack_errors"] += 1
                _print(entry)
            if total and counts["delivered"] >= total:
                break
    except Exception as e:  # reported in the summary line
        error = repr(e)
    finally:
        if consumer is not None:
            try:
                consumer.close()
            except Exception as e:
                error = error or f"close: {e!r}"
    summary = {"member": name, "client": "confluent", "summary": True, **counts}
    if error:
        summary["error"] = error
    _print(summary)


def confluent_main(cfg: dict) -> None:
    stop = threading.Event()

    def read_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                stop.set()

    threading.Thread(target=read_stdin, daemon=True).start()
    threads = [
        threading.Thread(target=_confluent_member, args=(cfg, name, stop))
        for name in cfg["members"]
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


# ---------------------------------------------------------------- running any of the three


def command(client: str, cfg: dict) -> list[str]:
    """The command line of a share consumer process of `client` (java, confluent, franz-go)."""
    text = json.dumps(cfg)
    if client == "java":
        from kafka_java import JVM_FLAGS
        from kafka_ref import fetch as kafka_jars

        classes = share_consumers_classes()
        return [
            "java",
            *JVM_FLAGS,
            "-cp",
            f"{classes}{os.pathsep}{kafka_jars()}/*",
            "ShareConsumers",
            text,
        ]
    if client == "franz-go":
        from polyglot import go_members

        return [str(go_members()), "share", text]
    if client == "confluent":
        return [sys.executable, str(Path(__file__).resolve()), text]
    raise ValueError(client)


def share_consumers_classes() -> Path:
    """tests/clients/java/ShareConsumers.java compiled against the reference broker's kafka-clients."""
    from checkout import JAVA
    from kafka_ref import compile_java

    return compile_java(JAVA / "ShareConsumers.java")


class ShareProcess:
    """One share consumer process (members of one client) whose JSON lines are collected as they
    come; `stop()` asks its members to finish (a "stop" line), `kill()` is a SIGKILL."""

    def __init__(self, client: str, cfg: dict):
        self.client = client
        self.cfg = cfg
        self.lines: list[dict] = []
        self.other: list[str] = []
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(
            command(client, cfg),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._stderr: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for t in self._readers:
            t.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            raw = raw.strip()
            if not raw:
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                self.other.append(raw)
                continue
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self._stderr.append(raw)
            del self._stderr[:-400]

    def stderr(self) -> str:
        return "".join(self._stderr)[-4000:]

    def records(self) -> list[dict]:
        with self._cond:
            return [line for line in self.lines if "offset" in line]

    def summaries(self) -> list[dict]:
        with self._cond:
            return [line for line in self.lines if line.get("summary")]

    def wait_for(self, predicate, timeout: float) -> bool:
        """Waits until predicate(lines) holds (True) or timeout (False) or the process ended."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self.lines):
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._readers[0].is_alive()):
                    return predicate(self.lines)
                self._cond.wait(min(left, 0.5))
            return True

    def stop(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            try:
                self.proc.stdin.write("stop\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                pass

    def wait(self, timeout: float = 60) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"{self.client} share consumers did not end within {timeout}s: {self.stderr()}"
            ) from None
        self._readers[0].join(10)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def freeze(self) -> None:
        """SIGSTOP: the process holds its connections open but answers nothing."""
        import signal

        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        import signal

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)


# ---------------------------------------------------------------- setup and checks


def set_group_config(bootstrap: str, group: str, configs: dict[str, object]) -> None:
    """IncrementalAlterConfigs (SET) on the GROUP resource `group` (share.auto.offset.reset,
    share.record.lock.duration.ms, share.delivery.count.limit, ...)."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(name, str(value), incremental_operation=AlterConfigOpType.SET)
            for name, value in configs.items()
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def describe_group(bootstrap: str, group: str) -> dict:
    """The share group as ShareGroupDescribe tells it (franz-go's kadm, `members share-describe`):
    {"state", "epoch", "assignment_epoch", "assignor", "members": [{"member_id", "client_id",
    "epoch", "assignment": [[topic, partition], ...]}]}, or {"error": text}."""
    from polyglot import go_members

    run = subprocess.run(
        [str(go_members()), "share-describe", json.dumps({"bootstrap": bootstrap, "group": group})],
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = run.stdout.strip().splitlines()
    assert lines, f"share-describe printed nothing (exit {run.returncode}): {run.stderr[-2000:]}"
    return json.loads(lines[-1])


def wait_assigned(bootstrap: str, group: str, members: Iterable[str], timeout: float = 60) -> dict:
    """Waits until each of `members` (client ids: the members' names) is in the share group with
    an assignment at the group's assignment epoch; returns the description."""
    wanted = set(members)
    deadline = time.monotonic() + timeout
    described: dict = {}
    while time.monotonic() < deadline:
        described = describe_group(bootstrap, group)
        found = {m["client_id"]: m for m in described.get("members", [])}
        if all(
            name in found
            and found[name]["assignment"]
            and found[name]["epoch"] == described["assignment_epoch"]
            for name in wanted
        ):
            return described
        time.sleep(0.5)
    raise AssertionError(f"share group {group}: {sorted(wanted)} not all assigned: {described}")


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(timeout=30)


def produce(
    bootstrap: str, topic: str, values: Iterable[tuple[int, bytes]]
) -> dict[tuple[int, int], bytes]:
    """Produces (partition, value) pairs; returns {(partition, offset): value}."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    placed: dict[tuple[int, int], bytes] = {}
    failures: list[str] = []

    def report(err, msg) -> None:
        if err is not None:
            failures.append(str(err))
        else:
            placed[(msg.partition(), msg.offset())] = msg.value()

    for partition, value in values:
        producer.produce(topic, value=value, partition=partition, on_delivery=report)
        producer.poll(0)
    assert producer.flush(30) == 0, "produce did not finish"
    assert not failures, failures[:5]
    return placed


def deliveries(lines: Iterable[dict]) -> dict[tuple[int, int], list[dict]]:
    """Record lines by (partition, offset), each list in delivery-count order."""
    by: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for line in lines:
        if "offset" in line:
            by[(line["partition"], line["offset"])].append(line)
    for seen in by.values():
        seen.sort(key=lambda line: (line["delivery_count"] or 0, line["ts"]))
    return by


def check_deliveries(
    lines: Iterable[dict],
    expected: Iterable[tuple[int, int]],
    limit: int | None = None,
) -> dict[tuple[int, int], list[dict]]:
    """The invariants of a share group's deliveries, whatever the client: every expected record
    delivered, none unexpected; each record's deliveries numbered 1, 2, ... with no gap or repeat;
    no acknowledgement error; only the last delivery of a record may be terminal (accept or
    reject: nothing follows an accept or a reject); deliveries never overlap: delivery n+1 reached
    its member's application (its poll returned, "ts") no earlier than delivery n reached its own,
    since the broker can hand the record out again only after delivery n was released (after its
    application saw it) or its lock expired (after the broker acquired it for delivery n, before
    that poll returned); `limit` (share.delivery.count.limit): no record delivered more often.
    Returns the deliveries by record.

    A release is processed by the broker before the releasing client's commit returns, so the
    next delivery may reach another member before "acked_ts": that is not an overlap."""
    by = deliveries(lines)
    expected = set(expected)
    problems: list[str] = []
    missing = expected - set(by)
    if missing:
        problems.append(f"{len(missing)} records never delivered, e.g. {sorted(missing)[:10]}")
    unexpected = set(by) - expected
    if unexpected:
        problems.append(f"unexpected records delivered: {sorted(unexpected)[:10]}")
    for key, seen in sorted(by.items()):
        counts = [line["delivery_count"] for line in seen]
        if counts != list(range(1, len(seen) + 1)):
            problems.append(f"{key}: delivery counts {counts} ({_who(seen)})")
            continue
        if limit is not None and len(seen) > limit:
            problems.append(f"{key}: delivered {len(seen)} times, limit {limit} ({_who(seen)})")
        for line in seen:
            if "ack_error" in line:
                problems.append(f"{key}: ack error {line['ack_error']} ({line['member']})")
        terminal = [i for i, line in enumerate(seen) if line["ack"] in ("accept", "reject")]
        if terminal and terminal != [len(seen) - 1]:
            problems.append(f"{key}: delivered after a terminal ack ({_who(seen)})")
        for before, after in zip(seen, seen[1:]):
            if after["ts"] < before["ts"]:
                problems.append(
                    f"{key}: delivery {after['delivery_count']} reached {after['member']} at "
                    f"{after['ts']}, before delivery {before['delivery_count']} reached "
                    f"{before['member']} at {before['ts']}"
                )
    assert not problems, "\n".join(problems[:40]) + f"\n({len(problems)} problems)"
    return by


def _who(seen: list[dict]) -> str:
    return ", ".join(f"{line['member']}#{line['delivery_count']}:{line['ack']}" for line in seen)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/kits/share_clients.py CONFIG_JSON")
    confluent_main(json.loads(sys.argv[1]))
