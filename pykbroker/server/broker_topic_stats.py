"""BrokerTopicStats: Kafka's per-topic and all-topics ``BrokerTopicMetrics`` meters.

Mirrors ``kafka.server.BrokerTopicStats``: ``kafka.server:type=BrokerTopicMetrics,name=<N>PerSec`` (all
topics) and ``...,topic=<t>`` (per topic) for MessagesIn, BytesIn, BytesOut, TotalProduceRequests,
FailedProduceRequests, TotalFetchRequests and FailedFetchRequests. ReplicaManager records produce
appends (MessagesIn: records appended, from each batch's record count; BytesIn: bytes of the appended
records; a total per partition, a failure per partition that failed for a reason other than the
client's or the partition's state); the Fetch handler records what it sends to consumers (BytesOut, and
the fetch totals/failures per partition).

Cost: a request's totals are summed per topic by the caller, then applied under one lock (``record``)
for all of its topics; meters of a new topic are created once. Per-topic meters are removed when the
topic is deleted (``remove_metrics``), as Kafka does.
"""

from __future__ import annotations

import threading

from pykbroker.utils.metrics import Meter, MetricsRegistry

MESSAGES_IN = "MessagesInPerSec"
BYTES_IN = "BytesInPerSec"
BYTES_OUT = "BytesOutPerSec"
TOTAL_PRODUCE_REQUESTS = "TotalProduceRequestsPerSec"
FAILED_PRODUCE_REQUESTS = "FailedProduceRequestsPerSec"
TOTAL_FETCH_REQUESTS = "TotalFetchRequestsPerSec"
FAILED_FETCH_REQUESTS = "FailedFetchRequestsPerSec"

# The order of the counters in a request's per-topic totals (``record``).
PRODUCE_FIELDS = (MESSAGES_IN, BYTES_IN, TOTAL_PRODUCE_REQUESTS, FAILED_PRODUCE_REQUESTS)
FETCH_FIELDS = (BYTES_OUT, TOTAL_FETCH_REQUESTS, FAILED_FETCH_REQUESTS)
ALL_FIELDS = (*PRODUCE_FIELDS, *FETCH_FIELDS)


def metric_name(name: str, topic: str | None = None) -> str:
    base = f"kafka.server:type=BrokerTopicMetrics,name={name}"
    return base if topic is None else f"{base},topic={topic}"


class BrokerTopicStats:
    def __init__(self, metrics: MetricsRegistry | None = None):
        self.metrics = metrics if metrics is not None else MetricsRegistry()
        self._lock = threading.Lock()
        self.all_topics: dict[str, Meter] = {n: self.metrics.meter(metric_name(n)) for n in ALL_FIELDS}
        self._topics: dict[str, dict[str, Meter]] = {}

    def _topic_meters(self, topic: str) -> dict[str, Meter]:
        meters = self._topics.get(topic)
        if meters is None:
            meters = self._topics[topic] = {n: self.metrics.meter(metric_name(n, topic)) for n in ALL_FIELDS}
        return meters

    def record(self, fields: tuple[str, ...], per_topic: dict[str, list[int]]) -> None:
        """Add one request's totals: ``per_topic[topic][i]`` to meter ``fields[i]`` of the topic and of
        all topics. One lock acquisition for the whole request."""
        if not per_topic:
            return
        all_topics = self.all_topics
        with self._lock:
            for topic, values in per_topic.items():
                meters = self._topics.get(topic) or self._topic_meters(topic)
                for field, value in zip(fields, values, strict=True):
                    if value:
                        meters[field].count += value
                        all_topics[field].count += value

    def topic_count(self, topic: str, name: str) -> int:
        meters = self._topics.get(topic)
        return meters[name].count if meters is not None else 0

    def remove_metrics(self, topic: str) -> None:
        with self._lock:
            if self._topics.pop(topic, None) is not None:
                for n in ALL_FIELDS:
                    self.metrics.remove(metric_name(n, topic))
