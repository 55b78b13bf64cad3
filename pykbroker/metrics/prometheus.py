"""PrometheusReporter: the broker's metrics at ``http://<prometheus.metrics.listener>/metrics``.

Enable with ``metric.reporters=pykbroker.metrics.prometheus.PrometheusReporter`` and
``prometheus.metrics.listener=host:port`` (port 0: an ephemeral port; the bound address is logged as
"Prometheus metrics endpoint listening on host:port"). The page is the official ``prometheus_client``
text format; names and labels are those of Kafka's MBeans through the Prometheus JMX exporter's Kafka
rules (:mod:`pykbroker.metrics.jmx_names`), plus the client library's ``process_*`` and ``python_*``
metrics.

Nothing is copied at recording time: :class:`KafkaCollector` walks the MetricsRegistry when Prometheus
scrapes (gauges read live state then), on the HTTP server's thread.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import start_wsgi_server
from prometheus_client.registry import Collector

from pykbroker.config.broker_configs.server_configs import PROMETHEUS_METRICS_LISTENER_CONFIG
from pykbroker.metrics.jmx_names import COUNTER, GAUGE, QUANTILES, SUMMARY, PrometheusName, to_prometheus
from pykbroker.metrics.reporter import MetricsReporter
from pykbroker.utils.logging import get_logger
from pykbroker.utils.metrics import (
    Gauge,
    GaugeFamily,
    GroupHistogram,
    GroupMeter,
    Histogram,
    IdleRatio,
    Meter,
    MetricsRegistry,
)

LISTENER_CONFIG = PROMETHEUS_METRICS_LISTENER_CONFIG
DEFAULT_LISTENER = "0.0.0.0:9404"

_QUANTILE_LEVELS = tuple(p for _, p in QUANTILES)
_KIND = {
    Meter: "meter",
    GroupMeter: "meter",
    Histogram: "histogram",
    GroupHistogram: "histogram",
    GaugeFamily: "gauge",
    IdleRatio: "gauge",
}


def parse_listener(value: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``; an empty host means every interface) -> ``(host, port)``."""
    host, sep, port = value.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected host:port, got {value!r}")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


class KafkaCollector(Collector):
    """Converts the registry into Prometheus families at each scrape. MBean -> name conversions are
    cached (names do not change); values are read from the live metrics."""

    def __init__(self, registry: MetricsRegistry):
        self.registry = registry
        self._names: dict[tuple[str, str], PrometheusName | None] = {}

    def _name(self, mbean: str, kind: str) -> PrometheusName | None:
        key = (mbean, kind)
        try:
            return self._names[key]
        except KeyError:
            pass
        try:
            pname = to_prometheus(mbean, kind)
        except ValueError:
            pname = None
        self._names[key] = pname
        return pname

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}

        def family(name: str, type_: str, help_: str) -> Metric:
            f = families.get(name)
            if f is None:
                if type_ == COUNTER:
                    f = CounterMetricFamily(name, help_)
                elif type_ == GAUGE:
                    f = GaugeMetricFamily(name, help_)
                else:
                    f = Metric(name, help_, type_)
                families[name] = f
            return f

        for mbean, metric in self.registry.items():
            kind = _KIND.get(type(metric), "gauge")
            pname = self._name(mbean, kind)
            if pname is None:
                continue
            labels = dict(pname.labels)
            # the name's type follows from the metric's kind: counters and "unknown" are Meters, summaries
            # Histograms, gauges the rest
            if pname.type == COUNTER:
                assert isinstance(metric, Meter)
                family(pname.name, COUNTER, pname.help).add_sample(pname.name + "_total", labels, metric.count)
            elif pname.type == SUMMARY:
                assert isinstance(metric, Histogram)
                f = family(pname.name, SUMMARY, pname.help)
                for (q, _), v in zip(QUANTILES, metric.quantiles(_QUANTILE_LEVELS), strict=True):
                    f.add_sample(pname.name, {**labels, "quantile": q}, v)
                f.add_sample(pname.name + "_count", labels, metric.count)
                f.add_sample(pname.name + "_sum", labels, metric.sum)
            elif pname.type == GAUGE:
                if isinstance(metric, GaugeFamily):
                    rows = [
                        ({**labels, **dict(zip(metric.keys, map(str, kv), strict=True))}, v)
                        for kv, v in metric.values()
                    ]
                else:
                    assert isinstance(metric, (Gauge, IdleRatio))
                    try:
                        value = metric.recent_value() if isinstance(metric, IdleRatio) else metric.value
                        rows = [(labels, float(value))]
                    except Exception:  # noqa: BLE001 - a failing gauge must not break the page
                        continue
                for name in (pname.name, *pname.aliases):
                    f = family(name, GAUGE, pname.help)
                    for row_labels, v in rows:
                        f.add_sample(name, row_labels, v)
            else:  # a Meter not named ...PerSec: the exporter's "_count", untyped
                assert isinstance(metric, Meter)
                family(pname.name, "unknown", pname.help).add_sample(pname.name, labels, metric.count)
        return iter(families.values())


class PrometheusReporter(MetricsReporter):
    def __init__(self) -> None:
        self.listener = DEFAULT_LISTENER
        self.server: WSGIServer | None = None
        self.thread: threading.Thread | None = None
        self.bound_address: tuple[str, int] | None = None
        self.log = get_logger("PrometheusReporter")

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.listener = configs.get(LISTENER_CONFIG) or DEFAULT_LISTENER

    def init(self, registry: MetricsRegistry) -> None:
        """Bind and serve (OSError when the address cannot be bound)."""
        host, port = parse_listener(self.listener)
        self.collector_registry = CollectorRegistry(auto_describe=False)
        self.collector_registry.register(KafkaCollector(registry))
        ProcessCollector(registry=self.collector_registry)
        PlatformCollector(registry=self.collector_registry)
        GCCollector(registry=self.collector_registry)
        try:
            server, thread = start_wsgi_server(port, host, self.collector_registry)
        except OSError as e:  # as the socket server's "failed to bind" error, one line
            raise OSError(
                e.errno, f"Prometheus metrics endpoint failed to bind to {host}:{port}: {e.strerror or e}"
            ) from e
        self.server, self.thread = server, thread
        thread.name = "prometheus-metrics-http"
        bound_host, bound_port = server.socket.getsockname()[:2]  # what server_address holds (typed here)
        self.bound_address = (bound_host, bound_port)
        self.log.info(f"Prometheus metrics endpoint listening on {bound_host}:{bound_port}")

    def close(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            server.shutdown()
            server.server_close()
            if self.thread is not None:
                self.thread.join(5)
            self.log.info("Prometheus metrics endpoint closed")
