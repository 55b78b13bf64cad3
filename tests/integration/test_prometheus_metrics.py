"""The Prometheus endpoint of a real broker (``metric.reporters=...PrometheusReporter``): after producing
and consuming with confluent-kafka, /metrics carries Kafka's metric names through the JMX exporter's
rules, with exact record counts, and parses as Prometheus text."""

from __future__ import annotations

import re
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

REPORTER = {
    "metric_reporters": "pykbroker.metrics.prometheus.PrometheusReporter",
    "prometheus_metrics_listener": "127.0.0.1:0",
}

REQUIRED = [
    "kafka_server_brokertopicmetrics_messagesin_total",
    "kafka_server_brokertopicmetrics_bytesin_total",
    "kafka_server_brokertopicmetrics_bytesout_total",
    "kafka_network_requestmetrics_requests_total",
    *(
        f"kafka_network_requestmetrics_{n}"
        for n in (
            "totaltimems",
            "requestqueuetimems",
            "localtimems",
            "remotetimems",
            "responsequeuetimems",
            "responsesendtimems",
        )
    ),
    "kafka_network_requestchannel_requestqueuesize",
    "kafka_network_socketserver_networkprocessoravgidlepercent",
    "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
    "kafka_server_replicamanager_underreplicatedpartitions",
    "kafka_server_replicamanager_partitioncount",
    "kafka_server_replicamanager_leadercount",
    "kafka_controller_kafkacontroller_activecontrollercount",
    "kafka_controller_kafkacontroller_offlinepartitionscount",
    "kafka_log_log_size",
    "kafka_log_log_logendoffset",
    "kafka_server_delayedoperationpurgatory_purgatorysize",
    "kafka_coordinator_group_groupmetadatamanager_numgroups",
    "kafka_coordinator_group_groupmetadatamanager_numoffsets",
]


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    page = urllib.request.urlopen(url, timeout=10).read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(page)
        for s in family.samples
    }


def value(samples, name, **labels) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def by_label(samples, name, label, **fixed) -> dict[str, float]:
    out = {}
    for (n, labels), v in samples.items():
        d = dict(labels)
        if n == name and all(d.get(k) == val for k, val in fixed.items()) and label in d:
            out[d[label]] = v
    return out


def test_metrics_endpoint_after_producing_and_consuming(broker_factory):
    from confluent_kafka import Consumer, Producer

    broker = broker_factory(**REPORTER)
    line = broker.wait_for_line(r"Prometheus metrics endpoint listening on \S+:\d+")
    assert line is not None, broker.output()
    host, port = re.search(r"listening on (\S+):(\d+)", line).groups()
    url = f"http://{host}:{port}/metrics"

    topic, n, partitions = "metrics-t", 500, 3
    create_topic(broker.bootstrap, topic, partitions)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(n):
        producer.produce(topic, key=str(i).encode(), value=b"v" * 100)
    assert producer.flush(30) == 0

    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "metrics-g", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    seen = []

    def consumed_all() -> bool:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen.append(msg)
        return len(seen) >= n

    wait_until(consumed_all, timeout=60, interval=0, message=f"{n} records consumed")
    consumer.commit(asynchronous=False)
    consumer.close()

    def settled():
        # Settles just after the clients return: the group empties once the DelayedJoin of the leave
        # completes, and a request's metrics are recorded when its response send completes.
        samples = scrape(url)
        produce_count = samples.get(("kafka_network_requestmetrics_totaltimems_count", (("request", "Produce"),)))
        produce_requests = by_label(
            samples, "kafka_network_requestmetrics_requests_total", "version", request="Produce"
        )
        if samples.get(
            ("kafka_coordinator_group_groupmetadatamanager_numgroupsempty", ())
        ) == 1 and produce_count == sum(produce_requests.values()):
            return samples
        return None

    samples = wait_until(settled, timeout=10, message="group empty and request metrics recorded")
    names = {name for name, _ in samples}
    assert [name for name in REQUIRED if name not in names] == []

    # Exact counts: MessagesInPerSec counts the records appended, per topic and in all topics.
    assert value(samples, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == n
    assert value(samples, "kafka_server_brokertopicmetrics_messagesin_total") >= n  # + offset commits
    bytes_in = value(samples, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    assert bytes_in >= n * 100
    # Stored batches are the produced bytes; the consumer read all of them at least once.
    assert sum(by_label(samples, "kafka_log_log_size", "partition", topic=topic).values()) == bytes_in
    assert value(samples, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) >= bytes_in
    assert sum(by_label(samples, "kafka_log_log_logendoffset", "partition", topic=topic).values()) == n
    assert set(by_label(samples, "kafka_log_log_logendoffset", "partition", topic=topic)) == {"0", "1", "2"}

    # Requests: per API (and version), timing summaries with Yammer's quantiles.
    produce_requests = by_label(samples, "kafka_network_requestmetrics_requests_total", "version", request="Produce")
    assert sum(produce_requests.values()) >= 1
    assert value(samples, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == sum(
        produce_requests.values()
    )
    quantiles = by_label(samples, "kafka_network_requestmetrics_totaltimems", "quantile", request="Produce")
    assert set(quantiles) == {"0.50", "0.75", "0.95", "0.98", "0.99", "0.999"}
    assert 0 <= quantiles["0.50"] <= quantiles["0.999"]
    assert value(samples, "kafka_network_requestmetrics_localtimems_count", request="FetchConsumer") >= 1

    # Gauges read live state: 3 partitions + 5 of __consumer_offsets (offsets.topic.num.partitions=5).
    assert value(samples, "kafka_server_replicamanager_partitioncount") == partitions + 5
    assert value(samples, "kafka_server_replicamanager_leadercount") == partitions + 5
    assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(samples, "kafka_server_kafkaserver_brokerstate") == 3  # RUNNING
    assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(samples, "kafka_controller_kafkacontroller_globaltopiccount") == 2
    assert value(samples, "kafka_coordinator_group_groupmetadatamanager_numgroups") == 1
    assert value(samples, "kafka_coordinator_group_groupmetadatamanager_numgroupsempty") == 1
    assert value(samples, "kafka_coordinator_group_groupmetadatamanager_numoffsets") == partitions
    for op in ("Produce", "Fetch", "Rebalance", "Heartbeat"):
        assert value(samples, "kafka_server_delayedoperationpurgatory_purgatorysize", delayedOperation=op) >= 0
    for name in (
        "kafka_network_socketserver_networkprocessoravgidlepercent",
        "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
    ):
        assert 0.0 <= value(samples, name) <= 1.0

    # The endpoint closes with the broker.
    assert broker.stop() == 0
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=5)


def test_unknown_metric_reporter_stops_start_up_with_a_config_error(broker_factory):
    broker = broker_factory(start=False, metric_reporters="com.example.NoSuchReporter")
    with pytest.raises(RuntimeError, match="broker did not start") as e:
        broker.start(timeout=30)
    assert "Invalid value com.example.NoSuchReporter for configuration metric.reporters" in str(e.value)
    assert "Class com.example.NoSuchReporter cannot be found" in str(e.value)
    assert "Traceback" not in str(e.value)


def metrics_url(broker) -> str:
    line = broker.wait_for_line(r"Prometheus metrics endpoint listening on \S+:\d+")
    assert line is not None, broker.output()
    host, port = re.search(r"listening on (\S+):(\d+)", line).groups()
    return f"http://{host}:{port}/metrics"


def test_errors_per_sec_counts_each_response_error_code(broker_factory):
    from tests.helpers.topics import produce_raw, record_batch

    broker = broker_factory(**REPORTER)
    url = metrics_url(broker)
    create_topic(broker.bootstrap, "errors-t", 1)
    assert produce_raw(broker.bootstrap, "errors-t", record_batch(3))["error_code"] == 0
    for _ in range(2):
        assert produce_raw(broker.bootstrap, "no-such-topic", record_batch(3))["error_code"] == 3

    def counted():
        samples = scrape(url)
        produce = by_label(samples, "kafka_network_requestmetrics_errors_total", "error", request="Produce")
        return produce if produce.get("UNKNOWN_TOPIC_OR_PARTITION") == 2 else None

    produce = wait_until(counted, timeout=10, message="Produce errors counted")
    assert produce == {"NONE": 1, "UNKNOWN_TOPIC_OR_PARTITION": 2}
    samples = scrape(url)
    # Every API answered counts its response's codes, NONE included (ApiVersions, Metadata, CreateTopics...).
    assert value(samples, "kafka_network_requestmetrics_errors_total", request="ApiVersions", error="NONE") >= 1
    assert value(samples, "kafka_network_requestmetrics_errors_total", request="CreateTopics", error="NONE") >= 1


def test_raft_metrics_of_a_single_node(broker_factory):
    broker = broker_factory(**REPORTER)
    url = metrics_url(broker)
    create_topic(broker.bootstrap, "raft-t", 1)  # metadata records: commits on the Raft log

    def led():
        samples = scrape(url)
        if samples.get(("kafka_server_raft_metrics_high_watermark", ()), 0) > 0:
            return samples
        return None

    samples = wait_until(led, timeout=10, message="raft-metrics with a high watermark")
    node = 1  # node.id of tests/helpers/broker.py
    assert value(samples, "kafka_server_raft_metrics_current_leader") == node
    assert value(samples, "kafka_server_raft_metrics_current_vote") == node
    assert value(samples, "kafka_server_raft_metrics_current_epoch") >= 1
    assert value(samples, "kafka_server_raft_metrics_current_state_info", state="leader") == 1
    assert value(samples, "kafka_server_raft_metrics_log_end_offset") >= value(
        samples, "kafka_server_raft_metrics_high_watermark"
    )
    assert value(samples, "kafka_server_raft_metrics_log_end_epoch") >= 1
    assert value(samples, "kafka_server_raft_metrics_append_records_rate") > 0
    assert value(samples, "kafka_server_raft_metrics_commit_latency_max") >= 0
    assert value(samples, "kafka_server_raft_metrics_commit_latency_avg") >= 0
    assert value(samples, "kafka_server_raft_metrics_election_latency_max") >= 0
