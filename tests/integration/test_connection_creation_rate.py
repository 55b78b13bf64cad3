"""Connection creation rate quotas (KIP-612) against a real broker, applied at once when changed.

* per IP (``connection_creation_rate`` of an ``ip`` entity, kafka-configs ``--ip``): connections opened in a
  tight loop are accepted at the quota's rate; the others are closed by the broker after their throttle time,
  unanswered (Kafka's delayed close);
* broker-wide (dynamic ``max.connection.creation.rate``): every connection is served, but the Acceptor takes
  them no faster than the rate (they wait in the listen backlog).

Bounds come from the quota and the window configuration (``quota.window.num=2``, ``quota.window.size.seconds=1``):
with a limit of N/s the broker's rate ``count / max(elapsed, 1 s)`` over at most two 1 s windows lets through at
most ``N * (t + 2) + 1`` connections in ``t`` seconds; a slower machine only accepts fewer.
"""

from __future__ import annotations

import io
import re
import selectors
import socket
import struct
import time
import urllib.request
from dataclasses import dataclass

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.tools import config_command
from tests.helpers.broker import BrokerProcess
from tests.helpers.broker_configs import alter_broker_configs
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

SET, DELETE = 0, 1
WINDOW_S, WINDOWS = 1.0, 2
# ApiVersions v0 (header v1: api key, version, correlation id, client id)
_REQUEST = struct.pack(">hhih", 18, 0, 1, 1) + b"t"
_FRAME = struct.pack(">i", len(_REQUEST)) + _REQUEST


@dataclass
class Attempt:
    sock: socket.socket
    opened: float
    outcome: str | None = None  # "answered" or "closed"
    at: float = 0.0


def _max_accepted(rate: int, seconds: float) -> int:
    return int(rate * (seconds + WINDOWS * WINDOW_S)) + 1


def run_attempts(port: int, count: int, interval_s: float, settle_s: float) -> list[Attempt]:
    """Open ``count`` connections ``interval_s`` apart, each sending an ApiVersions request at once; wait up to
    ``settle_s`` after the last for every outcome: answered (a response frame) or closed by the broker."""
    sel = selectors.DefaultSelector()
    attempts: list[Attempt] = []
    pending = 0
    next_open = time.monotonic()
    deadline = None
    try:
        while True:
            now = time.monotonic()
            if len(attempts) < count and now >= next_open:
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                s.sendall(_FRAME)
                s.setblocking(False)
                a = Attempt(s, now)
                attempts.append(a)
                sel.register(s, selectors.EVENT_READ, a)
                pending += 1
                next_open = now + interval_s
                if len(attempts) == count:
                    deadline = now + settle_s
            if deadline is not None and (pending == 0 or now > deadline):
                break
            for key, _ in sel.select(timeout=0.002 if len(attempts) < count else 0.05):
                a = key.data
                try:
                    data = a.sock.recv(4096)
                except BlockingIOError:
                    continue
                except OSError:  # reset: closed with our request unread
                    data = b""
                a.outcome, a.at = ("answered" if data else "closed"), time.monotonic()
                sel.unregister(a.sock)
                pending -= 1
    finally:
        for a in attempts:
            a.sock.close()
        sel.close()
    return attempts


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(
        tmp_path_factory.mktemp("conn-rate"),
        quota_window_num=str(WINDOWS),
        quota_window_size_seconds=str(int(WINDOW_S)),
        socket_listen_backlog_size="1000",
        metric_reporters="pykbroker.metrics.prometheus.PrometheusReporter",
        prometheus_metrics_listener="127.0.0.1:0",
    ).start()
    yield b
    b.stop()


def scrape(broker) -> dict[str, dict[tuple, float]]:
    """/metrics of ``broker``: sample name -> {sorted labels: value}."""
    line = broker.wait_for_line(r"Prometheus metrics endpoint listening on \S+:\d+")
    assert line is not None
    host, port = re.search(r"listening on (\S+):(\d+)", line).groups()
    page = urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10).read().decode()
    samples: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(page):
        for s in family.samples:
            samples.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return samples


def configs(broker, *args) -> int:
    return config_command.main(["--bootstrap-server", broker.bootstrap, *args], out=io.StringIO())


def test_ip_connection_creation_rate(broker):
    rate = 5
    admin = BrokerConnection.to(broker.bootstrap, client_id="admin")  # opened before the quota
    assert configs(broker, "--alter", "--ip", "127.0.0.1", "--add-config", f"connection_creation_rate={rate}") == 0
    wait_until(lambda: ip_quota(admin, "127.0.0.1") == rate, 10, message="quota published")
    started = time.monotonic()
    attempts = run_attempts(broker.port, count=200, interval_s=0.01, settle_s=WINDOW_S + 2)
    span = max(a.at for a in attempts) - started
    answered = [a for a in attempts if a.outcome == "answered"]
    closed = [a for a in attempts if a.outcome == "closed"]
    assert len(answered) + len(closed) == len(attempts), "every connection is answered or closed"
    assert rate <= len(answered) <= _max_accepted(rate, span), (len(answered), span)
    # the refused ones were held for their throttle time (at most one window), then closed unanswered
    delays = sorted(a.at - a.opened for a in closed)
    assert len(closed) >= len(attempts) - _max_accepted(rate, span)
    assert delays[-1] >= 0.1 and delays[-1] <= WINDOW_S + 1.0, delays[-5:]
    # KIP-612 metrics: the IP's accepted rate, the listener's IP throttle times, the Processors' creations
    metrics = scrape(broker)
    prefix = "kafka_server_socket_server_metrics_"
    ip_rate = metrics[prefix + "connection_accept_rate"][(("ip", "127.0.0.1"),)]
    assert 0 < ip_rate <= rate * (1 + 1 / WINDOW_S), ip_rate  # at most one connection over the rate
    assert 0 < metrics[prefix + "ip_connection_accept_throttle_time"][(("listener", "PLAINTEXT"),)] <= 1000 * WINDOW_S
    created = metrics[prefix + "connection_creation_total"]
    assert sum(v for k, v in created.items() if ("listener", "PLAINTEXT") in k) >= len(answered)
    assert max(v for k, v in metrics[prefix + "connection_creation_rate"].items() if ("listener", "PLAINTEXT") in k) > 0

    # lifted: applied at once, every connection is answered
    with admin:
        alter_ip_quota(admin, "127.0.0.1", None)
        wait_until(lambda: ip_quota(admin, "127.0.0.1") is None, 10, message="removal published")
    attempts = run_attempts(broker.port, count=50, interval_s=0.0, settle_s=5)
    assert [a.outcome for a in attempts] == ["answered"] * 50


def alter_ip_quota(conn: BrokerConnection, ip: str | None, rate: int | None) -> None:
    """AlterClientQuotas of the ``ip`` entity (None: the default IP) on ``conn``; rate None removes it."""
    r = conn.request(
        ApiKeys.ALTER_CLIENT_QUOTAS,
        1,
        {
            "entries": [
                {
                    "entity": [{"entity_type": "ip", "entity_name": ip}],
                    "ops": [{"key": "connection_creation_rate", "value": float(rate or 0), "remove": rate is None}],
                }
            ],
            "validate_only": False,
        },
    )
    assert [e["error_code"] for e in r["entries"]] == [0], r


def ip_quota(conn: BrokerConnection, ip: str | None) -> float | None:
    """The broker's described ``connection_creation_rate`` of ``ip`` (None: the default IP): the metadata image
    it serves, which the broker publishes only after applying it to its connection quotas."""
    r = conn.request(
        ApiKeys.DESCRIBE_CLIENT_QUOTAS,
        1,
        {"components": [{"entity_type": "ip", "match_type": 0 if ip else 1, "match": ip}], "strict": True},
    )
    values = {v["key"]: v["value"] for e in r["entries"] or [] for v in e["values"]}
    return values.get("connection_creation_rate")


def broker_config(conn: BrokerConnection, key: str) -> str | None:
    """``key`` as DescribeConfigs of broker 1 shows it (applied before the image is published)."""
    r = conn.request(
        ApiKeys.DESCRIBE_CONFIGS,
        4,
        {
            "resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": [key]}],
            "include_synonyms": False,
            "include_documentation": False,
        },
    )
    [entry] = r["results"][0]["configs"]
    return entry["value"]


def test_default_ip_connection_creation_rate_applies_to_an_ip_without_its_own(broker):
    rate = 3
    with BrokerConnection.to(broker.bootstrap, client_id="admin") as admin:  # opened before the quota
        alter_ip_quota(admin, None, rate)
        wait_until(lambda: ip_quota(admin, None) == rate, 10, message="quota published")
        try:
            started = time.monotonic()
            attempts = run_attempts(broker.port, count=60, interval_s=0.01, settle_s=WINDOW_S + 2)
            span = max(a.at for a in attempts) - started
            answered = sum(a.outcome == "answered" for a in attempts)
            assert rate <= answered <= _max_accepted(rate, span)
        finally:
            alter_ip_quota(admin, None, None)
            wait_until(lambda: ip_quota(admin, None) is None, 10, message="removal published")


def test_broker_wide_max_connection_creation_rate_is_dynamic(broker):
    rate = 20
    with BrokerConnection.to(broker.bootstrap, client_id="admin") as admin:
        key = "max.connection.creation.rate"
        assert alter_broker_configs(broker.bootstrap, "", (key, SET, str(rate)), conn=admin) == (0, None)
        wait_until(lambda: broker_config(admin, key) == str(rate), 10, message="config published")
        try:
            time.sleep(WINDOWS * WINDOW_S)  # the admin connections' own windows expire: a fresh rate
            count = 100
            started = time.monotonic()
            attempts = run_attempts(broker.port, count=count, interval_s=0.0, settle_s=30)
            # all served (delayed, never refused), no faster than the rate
            assert [a.outcome for a in attempts] == ["answered"] * count
            times = sorted(a.at - started for a in attempts)
            for i, t in enumerate(times):
                assert i + 1 <= _max_accepted(rate, t), (i, t)
            assert times[-1] >= (count - 1 - rate * WINDOWS * WINDOW_S) / rate
        finally:
            assert alter_broker_configs(broker.bootstrap, "", (key, DELETE, None), conn=admin)[0] == 0
            wait_until(lambda: broker_config(admin, key) == "2147483647", 10, message="default published")
    # back to unlimited at once
    started = time.monotonic()
    attempts = run_attempts(broker.port, count=100, interval_s=0.0, settle_s=10)
    assert [a.outcome for a in attempts] == ["answered"] * 100


def test_controller_only_node_applies_ip_connection_creation_rate(tmp_path):
    """A controller-only node refuses an IP over its rate too (Kafka's ControllerServer publishes client quotas
    to its ConnectionQuotas)."""
    from tests.helpers.cluster import KRaftCluster

    rate = 3
    cluster = KRaftCluster(tmp_path, controllers=1, brokers=1, quota_window_num=str(WINDOWS))
    cluster.start()
    try:
        [broker] = cluster.brokers.values()
        controller_port = cluster.controller_ports[1]
        controller = cluster.controllers[1]
        with BrokerConnection.to(broker.bootstrap, client_id="admin") as admin:
            mark = len(controller.lines)
            alter_ip_quota(admin, "127.0.0.1", rate)
            # controllers do not serve DescribeClientQuotas: the ConnectionQuotas' own log line tells
            assert controller.wait_for_line(r"Updated IP connection creation rates", start=mark) is not None
            started = time.monotonic()
            attempts = run_attempts(controller_port, count=60, interval_s=0.01, settle_s=WINDOW_S + 2)
            span = max(a.at for a in attempts) - started
            answered = sum(a.outcome == "answered" for a in attempts)
            assert 1 <= answered <= _max_accepted(rate, span), (answered, span)
            alter_ip_quota(admin, "127.0.0.1", None)
    finally:
        cluster.stop()
