"""KafkaCollector (registry -> Prometheus families at scrape time), PrometheusReporter, reporter loading."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pykbroker.config.config_def import ConfigException
from pykbroker.metrics.prometheus import KafkaCollector, PrometheusReporter, parse_listener
from pykbroker.metrics.reporter import create_reporters
from pykbroker.utils.metrics import MetricsRegistry
from tests.helpers.requests import stub_request


def _scrape(registry: MetricsRegistry) -> dict[str, list]:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(KafkaCollector(registry))
    page = generate_latest(reg).decode()
    return {f.name: f for f in text_string_to_metric_families(page)}


def _samples(family) -> dict[tuple, float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples}


def test_meters_histograms_gauges_and_families_come_out_with_kafkas_exporter_names():
    r = MetricsRegistry()
    r.meter("kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=a").mark(7)
    r.meter("kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec").mark(7)
    h = r.histogram("kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce")
    for v in range(1, 101):
        h.update(float(v))
    r.gauge("kafka.server:type=ReplicaManager,name=PartitionCount", lambda: 12)
    r.gauge_family("kafka.log:type=Log,name=Size", ("topic", "partition"), lambda: [(("a", 0), 100), (("a", 1), 5)])
    families = _scrape(r)

    msgs = families["kafka_server_brokertopicmetrics_messagesin"]
    assert msgs.type == "counter"
    assert _samples(msgs) == {
        ("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "a"),)): 7.0,
        ("kafka_server_brokertopicmetrics_messagesin_total", ()): 7.0,
    }
    total = _samples(families["kafka_network_requestmetrics_totaltimems"])
    assert total[("kafka_network_requestmetrics_totaltimems_count", (("request", "Produce"),))] == 100
    assert total[("kafka_network_requestmetrics_totaltimems_sum", (("request", "Produce"),))] == 5050
    q = {labels[0][1]: v for (name, labels), v in total.items() if name == "kafka_network_requestmetrics_totaltimems"}
    assert q == {"0.50": 51.0, "0.75": 76.0, "0.95": 96.0, "0.98": 99.0, "0.99": 100.0, "0.999": 100.0}
    assert _samples(families["kafka_server_replicamanager_partitioncount"]) == {
        ("kafka_server_replicamanager_partitioncount", ()): 12.0
    }
    assert _samples(families["kafka_log_log_size"]) == {
        ("kafka_log_log_size", (("partition", "0"), ("topic", "a"))): 100.0,
        ("kafka_log_log_size", (("partition", "1"), ("topic", "a"))): 5.0,
    }


def test_values_are_read_at_scrape_time_and_a_failing_gauge_is_skipped():
    r = MetricsRegistry()
    state = {"n": 1}
    r.gauge("kafka.server:type=ReplicaManager,name=LeaderCount", lambda: state["n"])
    r.gauge("kafka.server:type=ReplicaManager,name=Broken", lambda: 1 / 0)
    r.meter("not an mbean").mark()
    assert (
        _samples(_scrape(r)["kafka_server_replicamanager_leadercount"])[("kafka_server_replicamanager_leadercount", ())]
        == 1.0
    )
    state["n"] = 5
    families = _scrape(r)
    assert (
        _samples(families["kafka_server_replicamanager_leadercount"])[("kafka_server_replicamanager_leadercount", ())]
        == 5.0
    )
    assert "kafka_server_replicamanager_broken" not in families


def test_idle_ratio_reads_the_recent_window():
    r = MetricsRegistry()
    idle = r.idle_ratio("kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent")
    idle.record(90, 100)  # 90% idle since start
    assert _samples(_scrape(r)["kafka_network_socketserver_networkprocessoravgidlepercent"])[
        ("kafka_network_socketserver_networkprocessoravgidlepercent", ())
    ] == pytest.approx(0.9)
    idle.record(0, 100)  # busy since the last scrape
    families = _scrape(r)
    for name in (
        "kafka_network_socketserver_networkprocessoravgidlepercent",
        "kafka_network_socketserver_networkprocessoravgidle_percent",
    ):
        assert _samples(families[name])[(name, ())] == 0.0


@pytest.mark.parametrize(
    ("value", "expected"),
    [("127.0.0.1:9404", ("127.0.0.1", 9404)), (":0", ("0.0.0.0", 0)), ("[::1]:80", ("::1", 80))],
)
def test_parse_listener(value, expected):
    assert parse_listener(value) == expected


def test_reporter_serves_metrics_on_an_ephemeral_port_and_closes():
    r = MetricsRegistry()
    r.meter("kafka.server:type=BrokerTopicMetrics,name=BytesOutPerSec").mark(42)
    (reporter,) = create_reporters(
        ["pykbroker.metrics.prometheus.PrometheusReporter"], {"prometheus.metrics.listener": "127.0.0.1:0"}
    )
    assert isinstance(reporter, PrometheusReporter)
    reporter.init(r)
    try:
        host, port = reporter.bound_address
        assert port > 0
        page = urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10).read().decode()
        assert "kafka_server_brokertopicmetrics_bytesout_total 42.0" in page.splitlines()
        assert "process_cpu_seconds_total" in page
    finally:
        reporter.close()
    with pytest.raises(OSError):
        socket.create_connection((host, port), timeout=2).close()


def test_reporter_bind_failure_names_the_address():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        reporter = PrometheusReporter()
        reporter.configure({"prometheus.metrics.listener": f"127.0.0.1:{port}"})
        with pytest.raises(OSError, match=f"Prometheus metrics endpoint failed to bind to 127.0.0.1:{port}"):
            reporter.init(MetricsRegistry())


def test_unknown_or_wrong_reporter_classes_are_config_errors():
    with pytest.raises(ConfigException, match="metric.reporters: Class no.such.Reporter cannot be found"):
        create_reporters(["no.such.Reporter"], {})
    with pytest.raises(ConfigException, match="Class NoModule cannot be found"):
        create_reporters(["NoModule"], {})
    with pytest.raises(ConfigException, match="is not an instance of MetricsReporter"):
        create_reporters(["pykbroker.utils.metrics.MetricsRegistry"], {})
    # Kafka 4.0's default (JMX) is accepted and ignored; an empty list builds nothing.
    assert create_reporters(["org.apache.kafka.common.metrics.JmxReporter"], {}) == []
    assert create_reporters([], {}) == []


def test_listener_key_is_validated_by_the_broker_config():
    from pykbroker.config.kafka_config import KafkaConfig
    from tests.helpers.broker import DEFAULTS

    assert KafkaConfig(dict(DEFAULTS))["prometheus.metrics.listener"] == "0.0.0.0:9404"
    assert KafkaConfig(dict(DEFAULTS, **{"prometheus.metrics.listener": ":0"}))["prometheus.metrics.listener"] == ":0"
    for bad in ("9404", "host:port", "127.0.0.1:70000"):
        with pytest.raises(ConfigException, match="prometheus.metrics.listener"):
            KafkaConfig(dict(DEFAULTS, **{"prometheus.metrics.listener": bad}))


def test_request_channel_metrics_come_out_as_counters_and_summaries():
    """RequestChannel's grouped metrics (GroupMeter, GroupHistogram) scrape as the plain kinds: RequestsPerSec a
    counter per API and version, the timings summaries in ms."""
    from pykbroker.network.request_channel import RequestChannel
    from pykbroker.utils.time import SystemTime

    r = MetricsRegistry()
    channel = RequestChannel(queue_size=10, metric_prefix="", time=SystemTime(), metrics=r)
    for end_ns in (5_000_000, 7_000_000):
        channel.update_request_metrics(stub_request("Produce", 9), end_ns)  # type: ignore[arg-type]
    families = _scrape(r)
    requests = families["kafka_network_requestmetrics_requests"]
    assert requests.type == "counter"
    assert _samples(requests) == {
        ("kafka_network_requestmetrics_requests_total", (("request", "Produce"), ("version", "9"))): 2.0
    }
    total = families["kafka_network_requestmetrics_totaltimems"]
    assert total.type == "summary"
    got = _samples(total)
    assert got[("kafka_network_requestmetrics_totaltimems_count", (("request", "Produce"),))] == 2
    assert got[("kafka_network_requestmetrics_totaltimems_sum", (("request", "Produce"),))] == 12.0
    assert got[("kafka_network_requestmetrics_totaltimems", (("quantile", "0.50"), ("request", "Produce")))] == 7.0
