"""The network thread's limits over real TCP: connection caps, idle expiry, slow-loris requests,
the queued-bytes pool and running out of file descriptors. Refusals close at once (never a hang
in the listen backlog) and are logged rate-limited, never one line per connection."""

from __future__ import annotations

import os
import re
import resource
import socket
import struct
import threading
import time

from rawwire import RawClient, closed_within

from corral import _core
from corral.network.apis import ApiKey

CLOSE_PROMPTLY = 3.0
MiB = 1 << 20
REFUSAL = re.compile(r"refused \d+ connections?|accepting connections failed")


def api_versions(client: RawClient) -> dict:
    return client.call(
        ApiKey.API_VERSIONS, 3, {"client_software_name": "limits", "client_software_version": "1"}
    )


def served(port: int, attempts: int = 10) -> bool:
    """A fresh client gets an ApiVersions answer (retrying while the broker notices closes)."""
    for _ in range(attempts):
        try:
            with RawClient(port, timeout=CLOSE_PROMPTLY) as client:
                if api_versions(client)["error_code"] == 0:
                    return True
        except (ConnectionError, OSError):
            pass
        time.sleep(0.3)
    return False


def log_lines(broker, pattern: re.Pattern, at_least: int = 1, timeout: float = 3.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        text = broker.log()
        text = text[: text.rfind("\n") + 1]  # whole lines only: the last may be half written
        lines = [line for line in text.splitlines() if pattern.search(line)]
        if len(lines) >= at_least or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def outcome(sock: socket.socket) -> str:
    """'served' if an ApiVersions sent on `sock` is answered, 'closed' if the broker closes it."""
    sock.settimeout(CLOSE_PROMPTLY)
    try:
        sock.sendall(_core.encode_request(ApiKey.API_VERSIONS, 0, 1, {}, "limits"))
        return "served" if sock.recv(1 << 16) else "closed"
    except ConnectionError:
        return "closed"
    except TimeoutError:
        return "hung"


def check_connection_cap(broker, expected_log: str) -> None:
    clients = [RawClient(broker.port) for _ in range(5)]
    try:
        for client in clients:
            assert api_versions(client)["error_code"] == 0
        with socket.create_connection(("127.0.0.1", broker.port)) as sixth:
            assert closed_within(sixth, CLOSE_PROMPTLY), "the connection over the cap was left open"
        assert all(api_versions(client)["error_code"] == 0 for client in clients)
        clients.pop().close()
        time.sleep(0.3)
        assert served(broker.port)
    finally:
        for client in clients:
            client.close()
    lines = log_lines(broker, REFUSAL)
    assert len(lines) == 1, lines
    assert expected_log in lines[0], lines[0]


def test_max_connections_per_ip(corral_factory):
    broker = corral_factory(**{"max.connections.per.ip": 5})
    check_connection_cap(
        broker, "refused 1 connection over max.connections.per.ip=5 from /127.0.0.1"
    )


def test_max_connections(corral_factory):
    broker = corral_factory(**{"max.connections": 5})
    check_connection_cap(broker, "refused 1 connection over max.connections=5")


def test_idle_connections_close_but_active_and_busy_ones_stay(corral_factory):
    broker = corral_factory(
        **{"connections.max.idle.ms": 1500, "group.initial.rebalance.delay.ms": 3000}
    )
    with (
        RawClient(broker.port) as idle,
        RawClient(broker.port) as active,
        RawClient(broker.port) as busy,
    ):
        assert api_versions(idle)["error_code"] == 0
        # A JoinGroup of a new group waits out the 3 s initial rebalance delay: the connection has
        # a request with Python all along and must not expire.
        busy.send(
            ApiKey.JOIN_GROUP,
            3,
            {
                "group_id": "idle-test",
                "session_timeout_ms": 10000,
                "rebalance_timeout_ms": 10000,
                "member_id": "",
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
            },
        )
        start = time.monotonic()
        while time.monotonic() - start < 4.5:
            assert api_versions(active)["error_code"] == 0
            time.sleep(0.3)
        _, joined = busy.receive(ApiKey.JOIN_GROUP, 3)
        assert joined["error_code"] == 0
        assert closed_within(idle.sock, 0.5), "the idle connection is still open"
        assert api_versions(active)["error_code"] == 0
    assert served(broker.port)


def test_partial_request_times_out(corral_factory):
    broker = corral_factory(**{"corral.socket.partial.request.timeout.ms": 1500})
    with (
        socket.create_connection(("127.0.0.1", broker.port)) as loris,
        RawClient(broker.port) as good,
    ):
        name = loris.getsockname()
        loris.sendall(struct.pack(">i", 100) + b"\x00\x12\x00")
        start = time.monotonic()
        assert closed_within(loris, 5.0), "the partial request was left open"
        assert 1.0 < time.monotonic() - start < 4.0
        assert api_versions(good)["error_code"] == 0
    lines = log_lines(broker, re.compile(rf"{re.escape(f'{name[0]}:{name[1]}')}\b"))
    assert len(lines) == 1, lines
    assert (
        "corral.socket.partial.request.timeout.ms" in lines[0] and "7 of 104 bytes" in lines[0]
    ), lines[0]
    assert served(broker.port)


def test_queued_request_bytes_bound_memory(corral_factory):
    cap = 32 * MiB
    broker = corral_factory(
        **{"queued.max.request.bytes": cap, "socket.request.max.bytes": 100 * MiB}
    )
    pid = broker.proc.pid
    assert served(broker.port)
    baseline = rss_bytes(pid)
    payload = memoryview(struct.pack(">i", 100 * MiB) + bytes(90 * 1000 * 1000))
    socks = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(10)]
    sent = [0] * len(socks)

    def send(i: int) -> None:
        sock = socks[i]
        sock.settimeout(15)
        view = payload
        try:
            while view:
                n = sock.send(view[: 1 << 20])
                sent[i] += n
                view = view[n:]
        except OSError:
            pass

    threads = [threading.Thread(target=send, args=(i,), daemon=True) for i in range(len(socks))]
    for t in threads:
        t.start()
    try:
        peak = 0
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            peak = max(peak, rss_bytes(pid))
            time.sleep(0.2)
        # A small client is still served while the pool is exhausted.
        with RawClient(broker.port, timeout=CLOSE_PROMPTLY) as fresh:
            assert api_versions(fresh)["error_code"] == 0
        peak = max(peak, rss_bytes(pid))
        bound = cap + 100 * MiB + 150 * MiB
        assert peak < bound, (
            f"RSS {peak / MiB:.0f} MiB (baseline {baseline / MiB:.0f} MiB); "
            f"sent {[s // MiB for s in sent]} MiB"
        )
        assert sum(sent) > 90 * MiB, "at least one large request went in"
        print(
            f"RSS baseline {baseline / MiB:.0f} MiB, peak {peak / MiB:.0f} MiB, "
            f"sent {[s // MiB for s in sent]} MiB"
        )
    finally:
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        for t in threads:
            t.join(20)
    assert served(broker.port)
    assert broker.alive()


def outcomes_of_connections(port: int, count: int) -> list[str]:
    """Opens `count` connections at once and tells how each fared (see `outcome`); none may hang."""
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
    try:
        outcomes = [outcome(sock) for sock in socks]
    finally:
        for sock in socks:
            sock.close()
    assert "hung" not in outcomes and "error" not in outcomes, outcomes
    return outcomes


def test_connections_over_the_descriptor_limit_are_closed_not_left_hanging(corral_factory):
    broker = corral_factory(rlimit_nofile=64, **{"offsets.topic.num.partitions": 1})
    outcomes = outcomes_of_connections(broker.port, 100)
    assert outcomes.count("served") >= 5 and outcomes.count("closed") >= 50, outcomes
    lines = log_lines(broker, REFUSAL)
    assert 1 <= len(lines) < 20, lines
    assert re.search(r"connections: at most \d+ .*RLIMIT_NOFILE=64", broker.log())
    time.sleep(0.3)
    assert served(broker.port)
    assert broker.alive()


def test_accept_out_of_descriptors_closes_on_the_spare_and_logs_rate_limited(corral_factory):
    broker = corral_factory()
    pid = broker.proc.pid
    # Lower the running broker's limit below what its computed cap assumed: accept() hits EMFILE.
    limit = open_descriptors(pid) + 8
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, limit))
    outcomes = outcomes_of_connections(broker.port, 100)
    assert outcomes.count("served") >= 1 and outcomes.count("closed") >= 50, outcomes
    # The first refusals are reported at once, the rest together 10 s later.
    counted = re.compile(r"refused (\d+) connections? for want of file descriptors")
    deadline = time.monotonic() + 13
    while True:
        lines = log_lines(broker, REFUSAL)
        total = sum(int(m.group(1)) for line in lines if (m := counted.search(line)))
        if total >= outcomes.count("closed") or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert total >= outcomes.count("closed"), lines
    assert 1 <= len(lines) <= 3, lines
    time.sleep(0.3)
    assert served(broker.port)
    assert broker.alive()


def test_limit_settings_and_the_descriptor_cap():
    from corral.config.settings import ConfigError, Settings, physical_memory_tenth
    from corral.network.descriptors import connections as descriptor_cap
    from corral.server import network_limits

    s = Settings()
    assert s["max.connections"] == s["max.connections.per.ip"] == 2**31 - 1
    assert s["connections.max.idle.ms"] == 600000
    assert s["corral.socket.partial.request.timeout.ms"] == 30000
    assert s["queued.max.request.bytes"] == physical_memory_tenth() > 0
    for name in (
        "connections.max.idle.ms",
        "corral.socket.partial.request.timeout.ms",
        "queued.max.request.bytes",
    ):
        assert Settings({name: "-1"})[name] == -1
        try:
            Settings({name: "0"})
        except ConfigError as e:
            assert name in str(e)
        else:
            raise AssertionError(f"{name}=0 was accepted")
    limits = network_limits(
        Settings(
            {
                "queued.max.request.bytes": -1,
                "connections.max.idle.ms": -1,
                "max.connections.per.ip": 3,
                "max.connections": 10,
            }
        )
    )
    assert limits["queued_max_request_bytes"] is None and limits["idle_timeout_ms"] is None
    assert limits["max_connections_per_ip"] == 3 and limits["max_connections"] <= 10
    assert descriptor_cap(64, 14) == 64 - 14 - 32
    assert descriptor_cap(1024, 60) == 1024 - 60 - 256
    assert descriptor_cap(64, 63) == 0
    assert descriptor_cap(resource.RLIM_INFINITY, 60) == 2**31 - 1


def test_a_stalled_request_holding_the_pool_times_out_and_frees_it(corral_factory):
    broker = corral_factory(
        **{
            "queued.max.request.bytes": 32 * MiB,
            "socket.request.max.bytes": 100 * MiB,
            "corral.socket.partial.request.timeout.ms": 2000,
        }
    )
    with (
        socket.create_connection(("127.0.0.1", broker.port)) as holder,
        socket.create_connection(("127.0.0.1", broker.port)) as waiter,
    ):
        holder.sendall(struct.pack(">i", 100 * MiB) + bytes(50 * MiB))  # read in whole, then stalls
        time.sleep(0.5)
        # A whole 40 MiB frame of an unknown API: refused (and closed) only once it is all read,
        # which the pool allows only after the holder is gone.
        body = struct.pack(">hhih", 999, 0, 1, 0) + bytes(40 * MiB)
        data = struct.pack(">i", len(body)) + body
        # Sends from a duplicate: closed_within sets the timeout of `waiter` meanwhile.
        sending = waiter.dup()
        sending.settimeout(20)

        def send() -> None:
            try:
                sending.sendall(data)
            except OSError:
                pass

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        assert not closed_within(waiter, 1.0), (
            "the waiting request was handled while the pool was full"
        )
        assert closed_within(holder, 5.0), "the stalled request kept its reservation"
        assert closed_within(waiter, 5.0), "the waiting request was not read once the pool had room"
        sender.join(5)
        sending.close()
    assert log_lines(broker, re.compile(r"unknown api key 999"))
    assert served(broker.port)
