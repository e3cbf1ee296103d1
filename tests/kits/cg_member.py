"""Consumer-group members (confluent-kafka) in one process, for the consumer group tests: KIP-848
(`group.protocol=consumer`, the default) or classic ones. tests/clients/java/ConsumerGroupMember.java is
the same program for Java's kafka-clients; both speak the protocol below so that tests/kits/cgkit.py
drives either.

    python tests/kits/cg_member.py CONFIG_JSON

CONFIG_JSON: {"bootstrap", "group", "members": [{"name", "client_id"?, "instance_id"?}, ...],
"topics": [names] or "regex": "^prefix.*", "assignor"?: "uniform"|"range", "commit"?: bool,
"max_poll_interval_ms"?: int, "protocol"?: "consumer"|"classic", "strategy"?: "range"|
"cooperative-sticky"|"range,cooperative-sticky"|..., "session_timeout_ms"?: int,
"heartbeat_interval_ms"?: int}; a member's entry may set its own "topics", "regex", "assignor",
"commit", "max_poll_interval_ms", "protocol", "strategy", "session_timeout_ms",
"heartbeat_interval_ms" or "group", and "hold": true to start only on "start NAME" (a
replacement whose process is up before it is needed).

"protocol": "classic" runs a JoinGroup/SyncGroup member: "strategy" is its
partition.assignment.strategy (default "range"; librdkafka refuses a list mixing eager and
cooperative assignors), session.timeout.ms defaults to 6000 and heartbeat.interval.ms to 1000
here. "assignor" (the KIP-848 server assignor) is used for consumer members only, the three others
for classic ones only (both libraries refuse a consumer member that sets partition.assignment.
strategy, session.timeout.ms or heartbeat.interval.ms). A classic member with an
eager strategy (range, roundrobin) is told its whole assignment at every rebalance (revoke
everything, then assign everything); a cooperative one (cooperative-sticky) and a KIP-848 one
only what changes; "owned" reports the result either way.

Every member prints JSON lines to stdout, each with "m" (the member's name) and "t" (the
monotonic clock in ns, CLOCK_MONOTONIC as Java's System.nanoTime, so that events of several
processes can be ordered):
- {"ev": "owned", "owned": [[topic, partition], ...], "why": "assigned"|"revoked"|"lost"}: what
  the member owns, printed inside the rebalance callback, so before the client acknowledges a
  revocation and after the broker granted an assignment;
- {"ev": "records", "records": [[topic, partition, offset], ...]}: records consumed (and, with
  "commit", committed synchronously before the next poll);
- {"ev": "error", "error": text}: an error the client reported;
- {"ev": "closed"}: the member left (close() returned).
stdin: "close NAME" closes one member (a leave: epoch -1, or -2 for a static member); "start NAME"
starts a held member; EOF closes every member (held ones never start). SIGKILL is a crash.
"""

from __future__ import annotations

import json
import sys
import threading
import time

import confluent_kafka as ck

out_lock = threading.Lock()


def emit(name: str, event: dict) -> None:
    line = json.dumps({"m": name, "t": time.monotonic_ns(), **event})
    with out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def run_member(cfg: dict, spec: dict, stop: threading.Event, go: threading.Event) -> None:
    name = spec["name"]
    while not go.wait(0.02):
        if stop.is_set():
            return
    if "topics" in spec or "regex" in spec:  # a member's own subscription
        cfg = {k: v for k, v in cfg.items() if k not in ("topics", "regex")}
    cfg = {**cfg, **spec}
    protocol = cfg.get("protocol") or "consumer"
    conf = {
        "bootstrap.servers": cfg["bootstrap"],
        "group.id": cfg["group"],
        "group.protocol": protocol,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "client.id": spec.get("client_id", name),
        "topic.metadata.refresh.interval.ms": 1000,
        "log_level": 4,
        "error_cb": lambda err: emit(name, {"ev": "error", "error": str(err)}),
    }
    # Eager: every assign callback carries the whole assignment, every revoke all of it.
    eager = False
    if protocol == "classic":
        strategy = cfg.get("strategy") or "range"
        conf["partition.assignment.strategy"] = strategy
        conf["session.timeout.ms"] = cfg.get("session_timeout_ms") or 6000
        conf["heartbeat.interval.ms"] = cfg.get("heartbeat_interval_ms") or 1000
        eager = any(s.strip() != "cooperative-sticky" for s in strategy.split(","))
    elif protocol != "consumer":
        raise ValueError(f"protocol {protocol!r}")
    elif cfg.get("assignor"):
        conf["group.remote.assignor"] = cfg["assignor"]
    if cfg.get("max_poll_interval_ms"):
        conf["max.poll.interval.ms"] = cfg["max_poll_interval_ms"]
    if spec.get("instance_id"):
        conf["group.instance.id"] = spec["instance_id"]
    consumer = ck.Consumer(conf)
    owned: set[tuple[str, int]] = set()

    def report(why: str) -> None:
        emit(name, {"ev": "owned", "why": why, "owned": sorted(owned)})

    def on_assign(c, parts):
        # KIP-848 and cooperative rebalances are incremental: `parts` is what is added. An eager
        # one hands the whole assignment over (after revoking everything).
        if eager:
            owned.clear()
        owned.update((p.topic, p.partition) for p in parts)
        report("assigned")

    def on_revoke(c, parts):
        owned.difference_update((p.topic, p.partition) for p in parts)
        report("revoked")

    def on_lost(c, parts):
        owned.difference_update((p.topic, p.partition) for p in parts)
        report("lost")

    if cfg.get("regex"):
        consumer.subscribe(
            [cfg["regex"]], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost
        )
    else:
        consumer.subscribe(cfg["topics"], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    retry_commit = False  # the last commit failed: tried again at the next poll, records or not
    while not stop.is_set():
        batch = consumer.consume(500, 0.05)
        records = []
        for msg in batch:
            if msg.error():
                if msg.error().code() != ck.KafkaError._PARTITION_EOF:
                    emit(name, {"ev": "error", "error": str(msg.error())})
                continue
            records.append([msg.topic(), msg.partition(), msg.offset()])
        if (records or retry_commit) and cfg.get("commit", True):
            try:
                consumer.commit(asynchronous=False)
                retry_commit = False
            except ck.KafkaException as e:
                # _NO_OFFSET: nothing left to commit (the partitions moved on).
                retry_commit = e.args[0].code() != ck.KafkaError._NO_OFFSET
                if retry_commit:
                    emit(name, {"ev": "error", "error": f"commit: {e}"})
        if records:
            emit(name, {"ev": "records", "records": records})
    consumer.close()
    emit(name, {"ev": "closed"})


def main() -> None:
    cfg = json.loads(sys.argv[1])
    stops = {spec["name"]: threading.Event() for spec in cfg["members"]}
    starts = {spec["name"]: threading.Event() for spec in cfg["members"]}
    for spec in cfg["members"]:
        if not spec.get("hold"):
            starts[spec["name"]].set()
    threads = [
        threading.Thread(
            target=run_member, args=(cfg, spec, stops[spec["name"]], starts[spec["name"]])
        )
        for spec in cfg["members"]
    ]
    for t in threads:
        t.start()
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["close"] and len(words) == 2 and words[1] in stops:
            stops[words[1]].set()
        elif words[:1] == ["start"] and len(words) == 2 and words[1] in starts:
            starts[words[1]].set()
    for stop in stops.values():
        stop.set()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
