"""Client quotas with kafka-python clients, and the quota metrics on the Prometheus endpoint.

A kafka-python producer limited by ``producer_byte_rate`` and a consumer limited by ``consumer_byte_rate``
deliver their quota within 20% over a steady-state window (as the confluent-kafka test in test_client_quotas),
and see the broker's throttle times (their ``throttle-time-max`` metrics); /metrics then shows Kafka's quota
sensors for their client ids (``kafka_server_quota_byte_rate`` / ``kafka_server_quota_throttle_time`` with
``resource``, ``user``, ``clientId``), the requests' ``ThrottleTimeMs`` and the listener's connection-accept
metrics (KIP-612). Quota windows: ``quota.window.num=3`` of 1 s, so the rates settle within seconds; the
consumer fetches at most 32 KB a time, so its throttles are fine-grained (a fetch over the quota is answered
empty, so fetches as large as a quota window would alternate with empty ones).
"""

from __future__ import annotations

import io
import re
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pykbroker.tools import config_command
from tests.helpers.broker import BrokerProcess
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

RATE = 200_000  # bytes/s
WARMUP_S, MEASURE_S = 2.0, 5.0
VALUE = b"v" * 1000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(
        tmp_path_factory.mktemp("quota-kp"),
        quota_window_num="3",
        metric_reporters="pykbroker.metrics.prometheus.PrometheusReporter",
        prometheus_metrics_listener="127.0.0.1:0",
    ).start()
    yield b
    b.stop()


def configs(broker, *args) -> str:
    out = io.StringIO()
    assert config_command.main(["--bootstrap-server", broker.bootstrap, *args], out=out) == 0
    return out.getvalue()


def set_client_quota(broker, client_id: str, key: str, value: int) -> None:
    configs(broker, "--alter", "--client", client_id, "--add-config", f"{key}={value}")
    wait_until(
        lambda: f"{key}={float(value)}" in configs(broker, "--describe", "--client", client_id),
        10,
        message="quota published",
    )


def scrape(broker) -> dict[str, list]:
    line = broker.wait_for_line(r"Prometheus metrics endpoint listening on \S+:\d+")
    assert line is not None
    host, port = re.search(r"listening on (\S+):(\d+)", line).groups()
    page = urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10).read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(page)}


def series(metrics: dict[str, list], name: str, sample: str = "") -> dict[tuple, float]:
    """The samples ``name + sample`` of family ``name``, by their sorted labels."""
    return {tuple(sorted(s.labels.items())): s.value for s in metrics.get(name, []) if s.name == name + sample}


PRODUCE_KEY = (("clientId", "kp-limited"), ("resource", "Produce"), ("user", ""))
FETCH_KEY = (("clientId", "kp-reader"), ("resource", "Fetch"), ("user", ""))


def throttle_time_max(metrics: dict) -> float:
    return max((v for group in metrics.values() for k, v in group.items() if k == "throttle-time-max"), default=0.0)


def test_kafka_python_producer_and_consumer_keep_their_quota_and_metrics_show_it(broker):
    from kafka import KafkaConsumer, KafkaProducer

    create_topic(broker.bootstrap, "kp-quota", partitions=1)
    # a consumer's backlog, written by an unlimited producer
    filler = KafkaProducer(bootstrap_servers=broker.bootstrap, client_id="kp-filler", acks=1, linger_ms=5)
    for _ in range(3000):
        filler.send("kp-quota", VALUE)
    filler.flush(30)
    filler.close()

    set_client_quota(broker, "kp-limited", "producer_byte_rate", RATE)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, client_id="kp-limited", acks=1, linger_ms=5)
    delivered = {"bytes": 0, "acked": 0}
    start = time.monotonic()
    window = (start + WARMUP_S, start + WARMUP_S + MEASURE_S)

    def on_ack(_metadata) -> None:
        delivered["acked"] += 1
        if window[0] <= time.monotonic() < window[1]:
            delivered["bytes"] += len(VALUE)

    sent = 0
    while time.monotonic() < window[1]:
        if sent - delivered["acked"] >= 256:  # kafka-python 3 has no buffer.memory bound: keep 256 KB queued
            time.sleep(0.005)
            continue
        producer.send("kp-quota", VALUE).add_callback(on_ack)
        sent += 1
    produce_rate = delivered["bytes"] / MEASURE_S
    producer_throttle = throttle_time_max(producer.metrics())
    during_produce = scrape(broker)
    producer.close(timeout=10)  # at most 256 queued records: about 1.3 s at the quota
    assert 0.8 * RATE <= produce_rate <= 1.2 * RATE, produce_rate
    assert producer_throttle > 0

    set_client_quota(broker, "kp-reader", "consumer_byte_rate", RATE)
    consumer = KafkaConsumer(
        "kp-quota",
        bootstrap_servers=broker.bootstrap,
        client_id="kp-reader",
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=32768,
        fetch_max_bytes=32768,
    )
    consumed = 0
    start = time.monotonic()
    window = (start + WARMUP_S, start + WARMUP_S + MEASURE_S)
    while time.monotonic() < window[1]:
        for records in consumer.poll(timeout_ms=200).values():
            if time.monotonic() >= window[0]:
                consumed += sum(len(r.value) for r in records)
    consume_rate = consumed / MEASURE_S
    consumer_throttle = throttle_time_max(consumer.metrics())
    during_fetch = scrape(broker)
    consumer.close()
    assert 0.8 * RATE <= consume_rate <= 1.2 * RATE, consume_rate
    assert consumer_throttle > 0

    # the broker's quota sensors, read while each client ran (rates: the last quota windows)
    assert series(during_produce, "kafka_server_quota_throttle_time")[PRODUCE_KEY] > 0
    assert 0.5 * RATE <= series(during_produce, "kafka_server_quota_byte_rate")[PRODUCE_KEY] <= 1.5 * RATE
    assert series(during_fetch, "kafka_server_quota_throttle_time")[FETCH_KEY] > 0
    assert 0.5 * RATE <= series(during_fetch, "kafka_server_quota_byte_rate")[FETCH_KEY] <= 1.5 * RATE
    no_quota = (("clientId", "kp-filler"), ("resource", "Produce"), ("user", ""))
    assert no_quota not in series(during_fetch, "kafka_server_quota_byte_rate")  # no quota, no sensor

    metrics = scrape(broker)
    throttle_sums = {
        dict(k)["request"]: v for k, v in series(metrics, "kafka_network_requestmetrics_throttletimems", "_sum").items()
    }
    assert throttle_sums["Produce"] > 0 and throttle_sums["FetchConsumer"] > 0
    assert throttle_sums["Metadata"] == 0
    accept_rate = series(metrics, "kafka_server_socket_server_metrics_connection_accept_rate")
    assert accept_rate[(("listener", "PLAINTEXT"),)] >= 0
    listener = (("listener", "PLAINTEXT"),)
    assert listener in series(metrics, "kafka_server_socket_server_metrics_connection_accept_throttle_time")
    assert () in series(metrics, "kafka_server_socket_server_metrics_broker_connection_accept_rate")
