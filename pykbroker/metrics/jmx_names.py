"""Kafka MBean names -> Prometheus metric names and labels, as the Prometheus JMX exporter makes them.

The rules are those of the JMX exporter's example Kafka configurations (Kafka 2.x and KRaft,
``lowercaseOutputName: true``), which Kafka's Grafana dashboards and alerts are written against:

* ``kafka.<d>:type=<T>,name=<N>PerSec...,k=v`` (a Meter's ``Count``) -> counter
  ``kafka_<d>_<t>_<n>_total{k="v"}``;
* ``kafka.<d>:type=<T>,name=<N>,k=v`` (a Gauge's ``Value``) -> gauge ``kafka_<d>_<t>_<n>{k="v"}``;
* ``kafka.coordinator.<g>:type=<T>,name=<N>`` (a Gauge) -> gauge ``kafka_coordinator_<g>_<t>_<n>``;
* a Histogram/Timer -> ``kafka_<d>_<t>_<n>{k="v",quantile="0.50"}`` for the 50th, 75th, 95th, 98th,
  99th and 999th percentiles plus ``kafka_<d>_<t>_<n>_count`` (exposed as a Prometheus summary, which
  also carries ``_sum``).

* a Kafka Metrics attribute (``org.apache.kafka.common.metrics``, JMX ``kafka.server:type=<group>`` attribute
  ``<attribute>``), registered as ``kafka.server:type=<group>,name=<attribute>`` with ``<group>`` ending in
  ``-metrics`` -> gauge ``kafka_server_<group>_<attribute>`` with ``-`` made ``_`` (the exporter's KRaft rules:
  ``kafka_server_raft_metrics_current_leader``); ``raft-metrics`` ``current-state`` -> ``..._current_state_info``
  (value 1, the state as label ``state``).

* a client quota sensor's attribute (JMX ``kafka.server:type=<Produce|Fetch|Request|...>,user=<u>,client-id=<c>``
  attribute ``<attribute>``, lower-case with dashes), registered as ``kafka.server:type=<T>,name=<attribute>`` ->
  gauge ``kafka_server_quota_<attribute>`` with ``-`` made ``_`` and label ``resource="<T>"`` (the exporter's
  "Quota specific rules": ``kafka_server_quota_throttle_time{resource="Produce",user="",clientId="c1"}``).

Names are lower-cased, label names are the MBean keys as they are (``delayedOperation``), in the order
of the MBean name. Gauges named ``...Percent`` also get the ``_percent`` name of the exporter's later
"Percent" rules (``kafka_network_socketserver_networkprocessoravgidle_percent``), which other
dashboards (Strimzi's) use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

COUNTER = "counter"
GAUGE = "gauge"
SUMMARY = "summary"

# Yammer's histogram attributes (50thPercentile ... 999thPercentile) -> the exporter's quantile labels.
QUANTILES: tuple[tuple[str, float], ...] = (
    ("0.50", 0.50),
    ("0.75", 0.75),
    ("0.95", 0.95),
    ("0.98", 0.98),
    ("0.99", 0.99),
    ("0.999", 0.999),
)

_PER_SEC = re.compile(r"^(.+)PerSec\w*$")
_PERCENT = re.compile(r"^(.+)Percent\w*$")
_WORD = re.compile(r"^\w+$")
_INVALID = re.compile(r"[^a-zA-Z0-9_:]")
_ATTRIBUTE = re.compile(r"^[a-z][a-z-]*$")  # a Kafka Metrics attribute (byte-rate), not a Yammer name (BytesInPerSec)


@dataclass(frozen=True, slots=True)
class PrometheusName:
    """One MBean as Prometheus sees it: the family ``name`` (for a counter without ``_total``),
    its ``type`` (counter, gauge, summary), the ``labels`` (MBean keys other than type and name, in
    order) and ``aliases`` (further gauge names carrying the same value)."""

    name: str
    type: str
    labels: tuple[tuple[str, str], ...]
    aliases: tuple[str, ...] = ()
    help: str = ""


def parse_mbean(mbean: str) -> tuple[str, list[tuple[str, str]]]:
    """``"kafka.server:type=X,name=Y,topic=t"`` -> ``("kafka.server", [("type", "X"), ("name", "Y"),
    ("topic", "t")])``. ValueError when there is no domain or a key has no value."""
    domain, sep, props = mbean.partition(":")
    if not sep or not domain:
        raise ValueError(f"Not an MBean name: {mbean!r}")
    keys = []
    for prop in props.split(","):
        key, eq, value = prop.partition("=")
        if not eq or not key:
            raise ValueError(f"Not an MBean name: {mbean!r}")
        keys.append((key, value))
    return domain, keys


def to_prometheus(mbean: str, kind: str) -> PrometheusName | None:
    """The Prometheus name of ``mbean`` read as ``kind`` (``meter``, ``histogram`` or ``gauge``);
    None for names outside the ``kafka.*`` domains or without ``type`` and ``name`` keys."""
    domain, keys = parse_mbean(mbean)
    if len(keys) < 2 or keys[0][0] != "type" or keys[1][0] != "name" or not domain.startswith("kafka."):
        return None
    sub = domain[len("kafka.") :]
    if not _WORD.match(sub):
        if not (sub.startswith("coordinator.") and _WORD.match(sub[len("coordinator.") :])):
            return None
        sub = sub.replace(".", "_")  # kafka.coordinator.group -> kafka_coordinator_group_...
    type_, name = keys[0][1], keys[1][1]
    labels = tuple(keys[2:])
    help_ = f"{domain}:type={type_},name={name}"
    if type_.endswith("-metrics"):  # a Kafka Metrics group: the exporter's KRaft rules
        if kind != "gauge":
            return None
        base = _INVALID.sub("_", f"kafka_{sub}_{type_}_{name}").lower()
        if type_ == "raft-metrics" and name == "current-state":
            base += "_info"
        return PrometheusName(base, GAUGE, labels, help=f"{domain}:type={type_} {name}")
    if sub == "server" and _ATTRIBUTE.match(name):  # a client quota sensor: the exporter's quota rules
        if kind != "gauge":
            return None
        base = "kafka_server_quota_" + name.replace("-", "_")
        return PrometheusName(base, GAUGE, (("resource", type_), *labels), help=f"{domain}:type={type_} {name}")
    if kind == "meter":
        m = _PER_SEC.match(name)
        if m is None:  # the exporter's generic "Count" rule: kafka_<d>_<t>_<n>_count
            return PrometheusName(f"kafka_{sub}_{type_}_{name}_count".lower(), "unknown", labels, help=help_)
        return PrometheusName(f"kafka_{sub}_{type_}_{m.group(1)}".lower(), COUNTER, labels, help=help_)
    if kind == "histogram":
        return PrometheusName(f"kafka_{sub}_{type_}_{name}".lower(), SUMMARY, labels, help=help_)
    if kind == "gauge":
        m = _PERCENT.match(name)
        aliases = (f"kafka_{sub}_{type_}_{m.group(1)}_percent".lower(),) if m else ()
        base = _INVALID.sub("_", f"kafka_{sub}_{type_}_{name}").lower()  # Kafka Metrics' request-time...
        return PrometheusName(base, GAUGE, labels, aliases, help_)
    raise ValueError(f"Unknown metric kind {kind!r}")
