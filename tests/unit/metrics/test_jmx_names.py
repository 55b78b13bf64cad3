"""MBean names -> Prometheus names and labels, as the Prometheus JMX exporter's Kafka rules make them."""

from __future__ import annotations

import pytest

from pykbroker.metrics.jmx_names import COUNTER, GAUGE, QUANTILES, SUMMARY, parse_mbean, to_prometheus


@pytest.mark.parametrize(
    ("mbean", "kind", "name", "type_", "labels"),
    [
        # Meters named ...PerSec: "<name without PerSec>_total" counters, keys as labels.
        (
            "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=orders",
            "meter",
            "kafka_server_brokertopicmetrics_messagesin",
            COUNTER,
            (("topic", "orders"),),
        ),
        (
            "kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec",
            "meter",
            "kafka_server_brokertopicmetrics_bytesin",
            COUNTER,
            (),
        ),
        (
            "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce,version=9",
            "meter",
            "kafka_network_requestmetrics_requests",
            COUNTER,
            (("request", "Produce"), ("version", "9")),
        ),
        # Client quota sensors: the exporter's quota rules (resource label; user/clientId from the gauge family).
        (
            "kafka.server:type=Produce,name=throttle-time",
            "gauge",
            "kafka_server_quota_throttle_time",
            GAUGE,
            (("resource", "Produce"),),
        ),
        (
            "kafka.server:type=Fetch,name=byte-rate",
            "gauge",
            "kafka_server_quota_byte_rate",
            GAUGE,
            (("resource", "Fetch"),),
        ),
        # socket-server-metrics (KIP-612 connection rates): the KRaft rule of Kafka Metrics groups
        (
            "kafka.server:type=socket-server-metrics,name=connection-accept-throttle-time,listener=PLAINTEXT",
            "gauge",
            "kafka_server_socket_server_metrics_connection_accept_throttle_time",
            GAUGE,
            (("listener", "PLAINTEXT"),),
        ),
        # Histograms: the base name, quantiles added by the collector.
        (
            "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=FetchConsumer",
            "histogram",
            "kafka_network_requestmetrics_totaltimems",
            SUMMARY,
            (("request", "FetchConsumer"),),
        ),
        # Gauges: lower-cased name, label names kept as the MBean spells them.
        (
            "kafka.server:type=DelayedOperationPurgatory,name=PurgatorySize,delayedOperation=Produce",
            "gauge",
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            GAUGE,
            (("delayedOperation", "Produce"),),
        ),
        (
            "kafka.log:type=Log,name=LogEndOffset,topic=t,partition=3",
            "gauge",
            "kafka_log_log_logendoffset",
            GAUGE,
            (("topic", "t"), ("partition", "3")),
        ),
        (
            "kafka.controller:type=KafkaController,name=ActiveControllerCount",
            "gauge",
            "kafka_controller_kafkacontroller_activecontrollercount",
            GAUGE,
            (),
        ),
        # The coordinator's two-part domain (the exporter's kafka.coordinator.(\w+) rule).
        (
            "kafka.coordinator.group:type=GroupMetadataManager,name=NumGroupsStable",
            "gauge",
            "kafka_coordinator_group_groupmetadatamanager_numgroupsstable",
            GAUGE,
            (),
        ),
        # A Kafka Metrics quota attribute (kafka.server:type=Request attribute request-time): the quota rule.
        (
            "kafka.server:type=Request,name=request-time",
            "gauge",
            "kafka_server_quota_request_time",
            GAUGE,
            (("resource", "Request"),),
        ),
    ],
)
def test_conversion(mbean, kind, name, type_, labels):
    p = to_prometheus(mbean, kind)
    assert (p.name, p.type, p.labels) == (name, type_, labels)


def test_percent_gauges_also_get_the_percent_rule_name():
    p = to_prometheus("kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent", "gauge")
    assert p.name == "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent"
    assert p.aliases == ("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",)
    assert to_prometheus("kafka.log:type=Log,name=Size,topic=t,partition=0", "gauge").aliases == ()


def test_a_meter_not_named_per_sec_is_the_exporters_count():
    p = to_prometheus("kafka.server:type=X,name=Something", "meter")
    assert (p.name, p.type) == ("kafka_server_x_something_count", "unknown")


def test_the_last_per_sec_is_cut_like_the_greedy_rule():
    assert to_prometheus("kafka.server:type=T,name=APerSecBPerSecRate", "meter").name == "kafka_server_t_apersecb"


@pytest.mark.parametrize(
    "mbean",
    [
        "java.lang:type=Memory,name=Heap",  # not a kafka.* domain
        "kafka.server:name=X,type=Y",  # type must come first, then name
        "kafka.server:type=Only",
        "kafka.a.b.c:type=T,name=N",
    ],
)
def test_names_outside_the_rules_are_not_exported(mbean):
    assert to_prometheus(mbean, "gauge") is None


def test_parse_mbean_keeps_the_key_order_and_rejects_malformed_names():
    assert parse_mbean("kafka.log:type=Log,name=Size,topic=t,partition=0") == (
        "kafka.log",
        [("type", "Log"), ("name", "Size"), ("topic", "t"), ("partition", "0")],
    )
    for bad in ("no-domain", ":type=X", "kafka.server:type"):
        with pytest.raises(ValueError):
            parse_mbean(bad)
    with pytest.raises(ValueError):
        to_prometheus("kafka.server:type=T,name=N", "timer")


def test_quantiles_are_yammers_percentiles():
    assert [q for q, _ in QUANTILES] == ["0.50", "0.75", "0.95", "0.98", "0.99", "0.999"]
