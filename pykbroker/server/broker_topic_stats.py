"""BrokerTopicStats: Kafka's per-topic and all-topics ``BrokerTopicMetrics`` meters.

Mirrors ``kafka.server.BrokerTopicStats``: ``kafka.server:type=BrokerTopicMetrics,name=<N>PerSec`` (all
topics) and ``...,topic=<t>`` (per topic) for MessagesIn, BytesIn, BytesOut, TotalProduceRequests,
FailedProduceRequests, TotalFetchRequests, FailedFetchRequests and (KIP-1103) Total/FailedShareFetchRequests,
Total/FailedShareAcknowledgementRequests. ReplicaManager records produce
appends (MessagesIn: records appended, from each batch's record count; BytesIn: bytes of the appended
records; a total per partition, a failure per partition that failed for a reason other than the
client's or the partition's state); the Fetch handler records what it sends to consumers (BytesOut, and
the fetch totals/failures per partition); the SharePartitionManager records share fetches and acknowledgements
(one per topic of a request, and one failure per topic with a failed partition, as Kafka's SharePartitionManager).

Cost: a request's totals are summed per topic by the caller (in a :class:`TopicProduceCounts` /
:class:`TopicFetchCounts` per topic), then applied under one lock (``record_produce`` / ``record_fetch``)
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
# KIP-1103 (Kafka 4.1+): share fetches and acknowledgements, one per topic of a request
TOTAL_SHARE_FETCH_REQUESTS = "TotalShareFetchRequestsPerSec"
FAILED_SHARE_FETCH_REQUESTS = "FailedShareFetchRequestsPerSec"
TOTAL_SHARE_ACKNOWLEDGEMENT_REQUESTS = "TotalShareAcknowledgementRequestsPerSec"
FAILED_SHARE_ACKNOWLEDGEMENT_REQUESTS = "FailedShareAcknowledgementRequestsPerSec"

ALL_FIELDS = (
    MESSAGES_IN,
    BYTES_IN,
    TOTAL_PRODUCE_REQUESTS,
    FAILED_PRODUCE_REQUESTS,
    BYTES_OUT,
    TOTAL_FETCH_REQUESTS,
    FAILED_FETCH_REQUESTS,
    TOTAL_SHARE_FETCH_REQUESTS,
    FAILED_SHARE_FETCH_REQUESTS,
    TOTAL_SHARE_ACKNOWLEDGEMENT_REQUESTS,
    FAILED_SHARE_ACKNOWLEDGEMENT_REQUESTS,
)
_SHARE_INDEX = {n: ALL_FIELDS.index(n) for n in ALL_FIELDS[7:]}


class TopicProduceCounts:
    """One produce request's counts for one topic, summed by the ReplicaManager's append (one request thread;
    then handed to :meth:`BrokerTopicStats.record_produce`): ``records`` and ``bytes`` appended, ``partitions``
    written to, ``failed_partitions`` that failed for a reason other than the client's or the partition's state."""

    __slots__ = ("records", "bytes", "partitions", "failed_partitions")

    def __init__(self) -> None:
        self.records = 0
        self.bytes = 0
        self.partitions = 0
        self.failed_partitions = 0


class TopicFetchCounts:
    """One consumer fetch response's counts for one topic, summed by the Fetch handler (one thread; then handed
    to :meth:`BrokerTopicStats.record_fetch`): record ``bytes`` sent, ``partitions`` fetched, ``failed_partitions``
    (unexpected errors)."""

    __slots__ = ("bytes", "partitions", "failed_partitions")

    def __init__(self) -> None:
        self.bytes = 0
        self.partitions = 0
        self.failed_partitions = 0


def metric_name(name: str, topic: str | None = None) -> str:
    base = f"kafka.server:type=BrokerTopicMetrics,name={name}"
    return base if topic is None else f"{base},topic={topic}"


class BrokerTopicStats:
    def __init__(self, metrics: MetricsRegistry | None = None):
        self.metrics = metrics if metrics is not None else MetricsRegistry()
        self._lock = threading.Lock()
        # Meters in ALL_FIELDS order: produce ones at [0:4], fetch ones at [4:7], share ones at [7:11].
        self.all_topics: dict[str, Meter] = {n: self.metrics.meter(metric_name(n)) for n in ALL_FIELDS}
        self._all = tuple(self.all_topics[n] for n in ALL_FIELDS)
        self._topics: dict[str, tuple[Meter, ...]] = {}

    def _topic_meters(self, topic: str) -> tuple[Meter, ...]:
        meters = self._topics.get(topic)
        if meters is None:
            meters = self._topics[topic] = tuple(self.metrics.meter(metric_name(n, topic)) for n in ALL_FIELDS)
        return meters

    def record_produce(self, per_topic: dict[str, TopicProduceCounts]) -> None:
        """One produce request's counts per topic, added to the topic's and the all-topics meters under one lock."""
        if not per_topic:
            return
        messages, bytes_in, total, failed = self._all[0:4]
        with self._lock:
            for topic, c in per_topic.items():
                m, b, t, f = c.records, c.bytes, c.partitions, c.failed_partitions
                tm = self._topics.get(topic) or self._topic_meters(topic)
                tm[0].count += m
                tm[1].count += b
                tm[2].count += t
                messages.count += m
                bytes_in.count += b
                total.count += t
                if f:
                    tm[3].count += f
                    failed.count += f

    def record_fetch(self, per_topic: dict[str, TopicFetchCounts]) -> None:
        """One consumer fetch response's counts per topic, under one lock."""
        if not per_topic:
            return
        bytes_out, total, failed = self._all[4:7]
        with self._lock:
            for topic, c in per_topic.items():
                b, t, f = c.bytes, c.partitions, c.failed_partitions
                tm = self._topics.get(topic) or self._topic_meters(topic)
                tm[4].count += b
                tm[5].count += t
                bytes_out.count += b
                total.count += t
                if f:
                    tm[6].count += f
                    failed.count += f

    def record_share(self, name: str, topics) -> None:
        """One share request's mark of meter ``name`` (a KIP-1103 share field) for each of ``topics`` (distinct
        names) and once per topic on the all-topics meter, under one lock."""
        if not topics:
            return
        i = _SHARE_INDEX[name]
        all_meter = self._all[i]
        with self._lock:
            for topic in topics:
                tm = self._topics.get(topic) or self._topic_meters(topic)
                tm[i].count += 1
                all_meter.count += 1

    def topic_count(self, topic: str, name: str) -> int:
        meters = self._topics.get(topic)
        return meters[ALL_FIELDS.index(name)].count if meters is not None else 0

    def remove_metrics(self, topic: str) -> None:
        with self._lock:
            if self._topics.pop(topic, None) is not None:
                for n in ALL_FIELDS:
                    self.metrics.remove(metric_name(n, topic))
