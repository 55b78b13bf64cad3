"""ShareGroupMetrics: the broker-side share group meters and histograms under Kafka's names (KIP-932, KIP-1103).

Mirrors Kafka 4.2's ``org.apache.kafka.server.share.metrics.ShareGroupMetrics`` (Yammer metrics of the group
``kafka.server``, type ``ShareGroupMetrics``):

- ``kafka.server:type=ShareGroupMetrics,name=RecordAcknowledgementsPerSec,ackType=<Accept|Release|Reject>``
  (meter): records acknowledged per acknowledgement type, counted when the acknowledgement succeeded (a batch with one
  type counts its whole offset range; per-offset types count one each; GAP is not counted, as Kafka ignores unknown
  types);
- ``kafka.server:type=ShareGroupMetrics,name=PartitionLoadTimeMs`` (histogram, ms): from a share partition's creation
  to the end of its state load from the persister (successful loads only);
- ``kafka.server:type=ShareGroupMetrics,name=RequestTopicPartitionsFetchRatio,group=<g>`` (histogram, 0..100): per
  completed ShareFetch, the percentage of its requested partitions that had records acquired;
- ``kafka.server:type=ShareGroupMetrics,name=TopicPartitionsAcquireTimeMs,group=<g>`` (histogram, ms): per completed
  ShareFetch that acquired records, the time from the request's arrival at the manager to the acquisition.

The per-group histograms are created on the group's first ShareFetch. Through the Prometheus reporter they are
``kafka_server_sharegroupmetrics_recordacknowledgements_total{ackType="Accept"}``,
``kafka_server_sharegroupmetrics_partitionloadtimems`` (a summary), and so on (``docs/METRICS.md``).

Threading: any thread; every metric is thread-safe (:mod:`pykbroker.utils.metrics`).
"""

from __future__ import annotations

from pykbroker.utils.metrics import Histogram, Meter, MetricsRegistry

GROUP = "kafka.server:type=ShareGroupMetrics"
RECORD_ACKNOWLEDGEMENTS_PER_SEC = "RecordAcknowledgementsPerSec"
PARTITION_LOAD_TIME_MS = "PartitionLoadTimeMs"
TOPIC_PARTITIONS_FETCH_RATIO = "RequestTopicPartitionsFetchRatio"
TOPIC_PARTITIONS_ACQUIRE_TIME_MS = "TopicPartitionsAcquireTimeMs"

# Kafka's AcknowledgeType ids and their capitalized names (the ackType tag)
ACK_TYPE_NAMES = {1: "Accept", 2: "Release", 3: "Reject"}


def metric_name(name: str, **tags: str) -> str:
    """``kafka.server:type=ShareGroupMetrics,name=<name>[,k=v...]`` (tags in the given order)."""
    return ",".join([f"{GROUP},name={name}", *(f"{k}={v}" for k, v in tags.items())])


class ShareGroupMetrics:
    """See the module docstring. ``registry``: the broker's MetricsRegistry (the ReplicaManager's)."""

    def __init__(self, registry: MetricsRegistry | None = None):
        self.registry = registry if registry is not None else MetricsRegistry()
        self.ack_meters: dict[int, Meter] = {
            t: self.registry.meter(metric_name(RECORD_ACKNOWLEDGEMENTS_PER_SEC, ackType=n))
            for t, n in ACK_TYPE_NAMES.items()
        }
        self.partition_load_time_ms: Histogram = self.registry.histogram(metric_name(PARTITION_LOAD_TIME_MS))

    def record_acknowledgement(self, ack_type: int, count: int = 1) -> None:
        """``count`` records acknowledged with ``ack_type`` (1 ACCEPT, 2 RELEASE, 3 REJECT; others ignored)."""
        meter = self.ack_meters.get(ack_type)
        if meter is not None:
            meter.mark(count)

    def record_batches(self, batches) -> None:
        """A successful acknowledgement's batches (``first_offset``, ``last_offset``, ``types``): one type counts
        the whole range, per-offset types one record each (Kafka's SharePartitionManager.acknowledge)."""
        for b in batches:
            if len(b.types) == 1:
                self.record_acknowledgement(b.types[0], b.last_offset - b.first_offset + 1)
            else:
                for t in b.types:
                    self.record_acknowledgement(t)

    def partition_load_time(self, ms: float) -> None:
        self.partition_load_time_ms.update(ms)

    def topic_partitions_fetch_ratio(self, group_id: str, percent: int) -> None:
        self.registry.histogram(metric_name(TOPIC_PARTITIONS_FETCH_RATIO, group=group_id)).update(percent)

    def topic_partitions_acquire_time(self, group_id: str, ms: float) -> None:
        self.registry.histogram(metric_name(TOPIC_PARTITIONS_ACQUIRE_TIME_MS, group=group_id)).update(ms)
